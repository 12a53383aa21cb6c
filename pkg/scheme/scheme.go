// Package scheme builds the runtime scheme shared by the manager, the tests
// and the test world: Kubernetes, Cluster API, CAPKV, KubeVirt and CDI kinds.
package scheme

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kubevirtv1 "kubevirt.io/api/core/v1"
	instancetypev1beta1 "kubevirt.io/api/instancetype/v1beta1"
	cdiv1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	infrav1 "github.com/capkv/cluster-api-provider-kubevirt/api/v1alpha1"
)

// New returns a scheme with every kind the provider reads or writes.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		clusterv1.AddToScheme,
		infrav1.AddToScheme,
		kubevirtv1.AddToScheme,
		instancetypev1beta1.AddToScheme,
		cdiv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			// Registration only fails on programming errors (conflicting kinds).
			panic(err)
		}
	}
	return s
}
