#!/usr/bin/env bash
# Builds the pinned tools the tests drive, each from its own module under
# hack/tools/ through the Go module proxy, into a per-machine tool cache, and
# links them into bin/:
#
#   kube   kube-apiserver, kube-scheduler, kube-controller-manager (k8s
#          v1.36.3) and etcd (v3.6.8)
#   clusterctl   the real clusterctl (Cluster API v1.14.2)
#   cert-manager its controller and cainjector (cert-manager v1.21.2), as
#          subcommands of one binary
#   kustomize    kustomize v5.8.1, which make release-manifests runs, and
#          render-flavors, which make generate runs: the same kustomize
#          building templates/flavors/ into templates/cluster-template*.yaml
#          and templates/classes/ into templates/clusterclass-*.yaml
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
# none is named).
#
# The tool cache ($CAPKV_TOOL_CACHE, else ~/.cache/capkv/tools) holds one
# directory per tool set and key: the hash of its module's files, link flags,
# build flags and Go version. A fresh clone on a machine that built a set
# once links it from there; a change of pin rebuilds only that set. Missing
# sets download their modules together first, then build two at a time
# (a link is single-threaded, so two builds keep both cores busy), without
# debug information (-s -w): nothing here debugs the tools, and the linker
# then writes no DWARF. No -trimpath, so that packages a tool shares with
# the test module at the same versions compile once. Each build's wall and
# CPU seconds go to $TIMINGS_DIR/tool.tsv for the timing table
# (hack/timings.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
cache=${CAPKV_TOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/capkv/tools}
timings=${TIMINGS_DIR:-$root/out/timings}
mkdir -p "$bin" "$cache" "$timings"

clusterctl_version=$(awk '$1 == "sigs.k8s.io/cluster-api" { print $2; exit }' "$root/hack/tools/clusterctl/go.mod")
kube_version=$(awk '$1 == "k8s.io/kubernetes" { print $2; exit }' "$root/hack/tools/kube/go.mod")
kube_minor=$(echo "$kube_version" | cut -d. -f2)
# Prometheus v3.x.y is published as Go module v0.3xx.y.
prometheus_module=$(awk '{ for (i = 1; i < NF; i++) if ($i == "github.com/prometheus/prometheus") { print $(i + 1); exit } }' "$root/hack/tools/prometheus/go.mod")
prometheus_version="3.$(( $(echo "$prometheus_module" | cut -d. -f2) - 300 )).$(echo "$prometheus_module" | cut -d. -f3)"

# set_spec SET prints, one per line: the module directory, the environment
# (space-separated VAR=value), the link flags, then OUTPUT=TARGET lines.
set_spec() {
  local t="$root/hack/tools"
  case $1 in
    # clusterctl refuses an API server whose /version is not a release.
    kube) printf '%s\n' "$t/kube" "" \
      "-X k8s.io/component-base/version.gitVersion=$kube_version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${kube_minor}" \
      kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
      kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
      kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler \
      etcd=./etcd ;;
    # Without the version stamped in, `clusterctl version` prints nothing
    # and clusterctl cannot tell which contract it speaks.
    clusterctl) printf '%s\n' "$t/clusterctl" "" \
      "-X sigs.k8s.io/cluster-api/version.gitVersion=$clusterctl_version -X sigs.k8s.io/cluster-api/version.gitMajor=1 -X sigs.k8s.io/cluster-api/version.gitMinor=14" \
      clusterctl=sigs.k8s.io/cluster-api/cmd/clusterctl ;;
    cert-manager) printf '%s\n' "$t/certmanager" "" "" cert-manager=. ;;
    kustomize) printf '%s\n' "$t/kustomize" "" "" kustomize=sigs.k8s.io/kustomize/kustomize/v5 \
      render-flavors=./renderflavors ;;
    # KubeVirt's go.mod points kubevirt.io/api and client-go at ./staging,
    # which its module zip lacks; hack/tools/kubevirt replaces them with the
    # published modules, hence -mod=mod outside the workspace.
    kubevirt) printf '%s\n' "$t/kubevirt" "GOWORK=off GOFLAGS=-mod=mod" "" \
      virt-controller=kubevirt.io/kubevirt/cmd/virt-controller \
      virt-api=kubevirt.io/kubevirt/cmd/virt-api \
      kubevirt-manifests=./manifests ;;
    # The checksum database has no entry for CDI v1.64.0 nor for the
    # openshift/library-go version it pins: their hashes are pinned in
    # hack/tools/cdi/go.sum, and only they skip the database.
    cdi) printf '%s\n' "$t/cdi" "GONOSUMDB=kubevirt.io/containerized-data-importer,github.com/openshift/library-go GOWORK=off" "" \
      cdi-controller=./controller \
      cdi-apiserver=./apiserver \
      cdi-manifests=./manifests ;;
    ipam) printf '%s\n' "$t/ipam" "GOWORK=off" "" ipam-in-cluster=sigs.k8s.io/cluster-api-ipam-provider-in-cluster ;;
    # remove_all_sd leaves out every service discovery but static, file
    # and HTTP, which is all a scrape of one endpoint needs.
    prometheus) printf '%s\n' "$t/prometheus" "GOFLAGS=-tags=remove_all_sd" \
      "-X github.com/prometheus/common/version.Version=$prometheus_version" \
      prometheus=github.com/prometheus/prometheus/cmd/prometheus ;;
    *) echo "unknown tool set $1 (kube, clusterctl, cert-manager, kustomize, kubevirt, cdi, ipam, prometheus)" >&2; return 2 ;;
  esac
}

# finish SET DIR writes what a set derives from its build into DIR.
finish() {
  local dir=$2
  case $1 in
    kubevirt) "$dir/kubevirt-manifests" > "$dir/kubevirt-install.yaml" 2> "$dir/kubevirt-install.log" ;;
    cdi) "$dir/cdi-manifests" > "$dir/cdi-install.yaml" ;;
    # The pool CRDs come from the release's config/crd/bases, as its
    # kustomization would install them, less the conversion webhook for
    # v1alpha1, which nothing here writes.
    ipam) local ipam_dir f
      ipam_dir=$(cd "$root/hack/tools/ipam" && GOWORK=off go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api-ipam-provider-in-cluster)
      for f in "$ipam_dir"/config/crd/bases/*.yaml; do echo "---"; cat "$f"; done > "$dir/ipam-crds.yaml" ;;
  esac
}

# key SET prints the cache key of a set: what its binaries depend on.
key() {
  local spec mod
  spec=$(set_spec "$1")
  mod=$(sed -n 1p <<<"$spec")
  { find "$mod" -type f \( -name '*.go' -o -name go.mod -o -name go.sum \) | sort | xargs cat
    echo "${spec//$root\//}"; go version; echo "strip=-s -w"; } | sha256sum | cut -c1-16
}

# build SET builds a set into its cache directory (a temporary one, renamed
# when whole, so an interrupted build is never taken for a finished one).
build() {
  local set=$1 spec mod envs ldflags dir tmp line out target wall user sys
  spec=$(set_spec "$set")
  mod=$(sed -n 1p <<<"$spec"); envs=$(sed -n 2p <<<"$spec"); ldflags=$(sed -n 3p <<<"$spec")
  dir="$cache/$set-$(key "$set")"; tmp="$dir.tmp.$$"
  rm -rf "$tmp"; mkdir -p "$tmp"
  while read -r line; do
    out=${line%%=*}; target=${line#*=}
    { TIMEFORMAT='%R %U %S'; time (cd "$mod" && env $envs go build -buildvcs=false \
        -ldflags "-s -w $ldflags" -o "$tmp/$out" "$target" 2>"$tmp/.err"); } 2>"$tmp/.time" ||
      { cat "$tmp/.err"; return 1; }
    read -r wall user sys < "$tmp/.time"
    printf 'tool\t%s\t%.0f\t%.0f\tok\t%s\n' "$out" "$wall" "$(echo "$user + $sys" | bc)" \
      "$(( $(date +%s) - ${TIMINGS_START:-$(date +%s)} - ${wall%.*} ))" >> "$timings/tool.tsv"
    echo "   built $out in ${wall%.*}s (CPU $(echo "($user + $sys)/1" | bc)s)"
  done < <(sed -n '4,$p' <<<"$spec")
  rm -f "$tmp/.err" "$tmp/.time"
  finish "$set" "$tmp" || return 1
  rm -rf "$dir"; mv "$tmp" "$dir"
}

# link SET points bin/ at a set's cached files.
link() {
  local dir f
  dir="$cache/$1-$(key "$1")"
  for f in "$dir"/*; do ln -sfn "$f" "$bin/$(basename "$f")"; done
}

download() {
  local spec mod envs
  spec=$(set_spec "$1"); mod=$(sed -n 1p <<<"$spec"); envs=$(sed -n 2p <<<"$spec")
  (cd "$mod" && env $envs go mod download)
}

sets=("$@")
# Longest first, so the two build lanes end together.
[[ ${#sets[@]} -gt 0 ]] || sets=(kube kubevirt ipam cert-manager prometheus cdi clusterctl kustomize)
missing=()
for set in "${sets[@]}"; do
  set_spec "$set" >/dev/null
  if [[ -d "$cache/$set-$(key "$set")" ]]; then link "$set"; else missing+=("$set"); fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo ">> tools up to date (${sets[*]}), from $cache"
  exit 0
fi
echo ">> building ${missing[*]} into $cache (the first build takes minutes on 2 cores; every later clone on this machine reuses it)"
start=$(date +%s)
logs=$(mktemp -d); trap 'rm -rf "$logs"' EXIT
for set in "${missing[@]}"; do download "$set" > "$logs/$set.download" 2>&1 & done
if ! wait; then cat "$logs"/*.download >&2; echo "downloading the tool modules failed" >&2; exit 1; fi
echo ">> modules downloaded in $(( $(date +%s) - start ))s"
for set in "${missing[@]}"; do
  while [[ $(jobs -rp | wc -l) -ge 2 ]]; do wait -n || true; done
  ( if build "$set" > "$logs/$set.log" 2>&1; then echo ">> $set built"; cat "$logs/$set.log"
    else echo ">> building $set failed:" >&2; cat "$logs/$set.log" >&2; touch "$logs/$set.failed"; fi ) &
done
wait
if compgen -G "$logs/*.failed" >/dev/null; then exit 1; fi
for set in "${missing[@]}"; do link "$set"; done
echo ">> tools built in $(( $(date +%s) - start ))s"
