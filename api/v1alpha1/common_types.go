package v1alpha1

// InfraClusterSecretKubeconfigKey is the key of the infra cluster Secret that
// holds the kubeconfig of the infra cluster.
const InfraClusterSecretKubeconfigKey = "kubeconfig"

// InfraClusterSecretNamespaceKey is the optional key of the infra cluster
// Secret that names the namespace to use on the infra cluster.
const InfraClusterSecretNamespaceKey = "namespace"
