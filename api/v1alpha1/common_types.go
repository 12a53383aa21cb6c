package v1alpha1

// InfraClusterSecretKubeconfigKey is the key of the infra cluster Secret that
// holds the kubeconfig of the infra cluster.
const InfraClusterSecretKubeconfigKey = "kubeconfig"

// InfraClusterSecretNamespaceKey is the optional key of the infra cluster
// Secret that names the namespace to use on the infra cluster.
const InfraClusterSecretNamespaceKey = "namespace"

// ClusterFinalizer lets the KubevirtCluster controller clean up what it created
// on the infra cluster before the object goes away.
const ClusterFinalizer = "kubevirtcluster.infrastructure.cluster.x-k8s.io"

// MachineFinalizer lets the KubevirtMachine controller clean up the virtual
// machine before the object goes away.
const MachineFinalizer = "kubevirtmachine.infrastructure.cluster.x-k8s.io"
