#!/usr/bin/env bash
# Builds the pinned tools the tests drive into bin/, each from its own module
# under hack/tools/ through the Go module proxy:
#
#   kube   kube-apiserver, kube-scheduler, kube-controller-manager (k8s
#          v1.36.3) and etcd (v3.6.8)
#   clusterctl   the real clusterctl (Cluster API v1.14.2)
#   cert-manager its controller and cainjector (cert-manager v1.21.2), as
#          subcommands of one binary
#   kustomize    kustomize v5.8.1, which make release-manifests runs
#   kubevirt     virt-api and virt-controller (KubeVirt v1.7.0), and
#          bin/kubevirt-install.yaml: the CRDs, RBAC, webhooks and APIServices
#          virt-operator would install, which the test world applies
#   cdi          cdi-controller and cdi-apiserver (CDI v1.64.0, thin mains
#          over CDI's packages), and bin/cdi-install.yaml: the CRDs, RBAC,
#          Services, webhooks and APIService CDI's operator would install
#   ipam         Cluster API's in-cluster IPAM provider (v1.1.0) as
#          bin/ipam-in-cluster, and bin/ipam-crds.yaml: its pool CRDs
#   prometheus   the Prometheus server (v3.16.0, Go module v0.316.0) without
#          service discovery plugins, which the monitoring test and the
#          sandbox's --prometheus run
#
# Usage: hack/build-tools.sh [kube|clusterctl|cert-manager|kustomize|kubevirt|cdi|ipam|prometheus ...] (all when
# none is named). A stamp per set holding the hash of its module's files
# and link flags skips the build while they are unchanged.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
mkdir -p "$bin"

# build NAME MODULE_DIR LDFLAGS OUTPUT=TARGET...: builds each TARGET of the
# module into bin/OUTPUT unless the stamp says they are current.
build() {
  local name=$1 mod=$2 ldflags=$3; shift 3
  local stamp="$bin/.$name.stamp" want current=1 spec
  want=$({ find "$mod" -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) | sort | xargs cat; echo "$ldflags"; } | sha256sum | cut -d' ' -f1)
  for spec in "$@"; do [[ -x "$bin/${spec%%=*}" ]] || current=0; done
  if [[ $current == 1 && -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
    echo ">> $name is up to date in bin/"
    return
  fi
  echo ">> building $name into bin/ (the first build takes minutes on 2 cores; later runs reuse it)"
  local start t0
  start=$(date +%s)
  for spec in "$@"; do
    t0=$(date +%s)
    (cd "$mod" && go build -ldflags "$ldflags" -o "$bin/${spec%%=*}" "${spec#*=}")
    echo "   built ${spec%%=*} in $(( $(date +%s) - t0 ))s"
  done
  echo "$want" > "$stamp"
  echo ">> $name built in $(( $(date +%s) - start ))s"
}

clusterctl_version=$(awk '$1 == "sigs.k8s.io/cluster-api" { print $2; exit }' "$root/hack/tools/clusterctl/go.mod")
kube_version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$root/hack/tools/kube/go.mod")
kube_minor=$(echo "$kube_version" | cut -d. -f2)
# Prometheus v3.x.y is published as Go module v0.3xx.y.
prometheus_module=$(awk '{ for (i = 1; i < NF; i++) if ($i == "github.com/prometheus/prometheus") { print $(i + 1); exit } }' "$root/hack/tools/prometheus/go.mod")
prometheus_version="3.$(( $(echo "$prometheus_module" | cut -d. -f2) - 300 )).$(echo "$prometheus_module" | cut -d. -f3)"
sets=("$@")
[[ ${#sets[@]} -gt 0 ]] || sets=(kube clusterctl cert-manager kustomize kubevirt cdi ipam prometheus)
for set in "${sets[@]}"; do
  case $set in
    # clusterctl refuses an API server whose /version is not a release.
    kube) build kube-binaries "$root/hack/tools/kube" \
      "-X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${kube_minor}" \
      kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
      kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
      kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
      etcd=./etcd ;;
    # Without the version stamped in, `clusterctl version` prints nothing
    # and clusterctl cannot tell which contract it speaks.
    clusterctl) build clusterctl "$root/hack/tools/clusterctl" \
      "-X sigs.k8s.io/cluster-api/version.gitVersion=$clusterctl_version -X sigs.k8s.io/cluster-api/version.gitMajor=1 -X sigs.k8s.io/cluster-api/version.gitMinor=14" \
      clusterctl=sigs.k8s.io/cluster-api/cmd/clusterctl ;;
    cert-manager) build cert-manager "$root/hack/tools/certmanager" "" cert-manager=. ;;
    kustomize) build kustomize "$root/hack/tools/kustomize" "" kustomize=sigs.k8s.io/kustomize/kustomize/v5 ;;
    # KubeVirt's go.mod points kubevirt.io/api and client-go at ./staging,
    # which its module zip lacks; hack/tools/kubevirt replaces them with the
    # published modules, hence -mod=mod outside the workspace.
    kubevirt) GOWORK=off GOFLAGS=-mod=mod build kubevirt "$root/hack/tools/kubevirt" "" \
      virt-controller=kubevirt.io/kubevirt/cmd/virt-controller \
      virt-api=kubevirt.io/kubevirt/cmd/virt-api \
      kubevirt-manifests=./manifests
      "$bin/kubevirt-manifests" > "$bin/kubevirt-install.yaml.tmp" 2> "$bin/kubevirt-install.log"
      mv "$bin/kubevirt-install.yaml.tmp" "$bin/kubevirt-install.yaml" ;;
    # The checksum database has no entry for CDI v1.64.0 nor for the
    # openshift/library-go version it pins: their hashes are pinned in
    # hack/tools/cdi/go.sum, and only they skip the database.
    cdi) GONOSUMDB=kubevirt.io/containerized-data-importer,github.com/openshift/library-go GOWORK=off build cdi "$root/hack/tools/cdi" "" \
      cdi-controller=./controller \
      cdi-apiserver=./apiserver \
      cdi-manifests=./manifests
      "$bin/cdi-manifests" > "$bin/cdi-install.yaml.tmp"
      mv "$bin/cdi-install.yaml.tmp" "$bin/cdi-install.yaml" ;;
    # The pool CRDs come from the release's config/crd/bases, as its
    # kustomization would install them, less the conversion webhook for
    # v1alpha1, which nothing here writes.
    ipam) GOWORK=off build ipam "$root/hack/tools/ipam" "" ipam-in-cluster=sigs.k8s.io/cluster-api-ipam-provider-in-cluster
      ipam_dir=$(cd "$root/hack/tools/ipam" && GOWORK=off go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api-ipam-provider-in-cluster)
      for f in "$ipam_dir"/config/crd/bases/*.yaml; do echo "---"; cat "$f"; done > "$bin/ipam-crds.yaml.tmp"
      mv "$bin/ipam-crds.yaml.tmp" "$bin/ipam-crds.yaml" ;;
    # remove_all_sd leaves out every service discovery but static, file
    # and HTTP, which is all a scrape of one endpoint needs.
    prometheus) GOFLAGS="-tags=remove_all_sd -buildvcs=false" build prometheus "$root/hack/tools/prometheus" \
      "-X github.com/prometheus/common/version.Version=$prometheus_version" \
      prometheus=github.com/prometheus/prometheus/cmd/prometheus ;;
    *) echo "unknown tool set $set (kube, clusterctl, cert-manager, kustomize, kubevirt, cdi, ipam, prometheus)" >&2; exit 2 ;;
  esac
done
