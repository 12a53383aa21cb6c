package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/cluster-api/cmd/clusterctl/client/yamlprocessor"

	"github.com/capkv/cluster-api-provider-kubevirt/test/testenv"
)

// applyTemplate renders templates/cluster-template.yaml as clusterctl
// generate cluster does, with vars (unset variables take the template's
// defaults), and creates every object.
func applyTemplate(ctx context.Context, vars map[string]string) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "templates", "cluster-template.yaml"))
	Expect(err).NotTo(HaveOccurred())
	out, err := yamlprocessor.NewSimpleProcessor().Process(raw, func(name string) (string, error) {
		if v, ok := vars[name]; ok {
			return v, nil
		}
		return "", errors.New("not set")
	})
	Expect(err).NotTo(HaveOccurred())
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return
		}
		Expect(err).NotTo(HaveOccurred())
		if len(u.Object) > 0 {
			Expect(c.Create(ctx, u)).To(Succeed(), "creating %s %s", u.GetKind(), u.GetName())
		}
	}
}
