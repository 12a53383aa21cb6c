#!/usr/bin/env bash
# Builds the real kube-apiserver, kube-scheduler, kube-controller-manager and
# etcd from the pinned hack/tools/kube module into bin/. A stamp holding the
# hash of the module's go.mod and go.sum skips the build while the pins are
# unchanged.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
mod="$root/hack/tools/kube"
stamp="$bin/.kube-binaries.stamp"
want=$(cat "$mod/go.mod" "$mod/go.sum" "$mod/etcd/main.go" | sha256sum | cut -d' ' -f1)

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] &&
   [[ -x "$bin/kube-apiserver" && -x "$bin/kube-scheduler" && -x "$bin/kube-controller-manager" && -x "$bin/etcd" ]]; then
  echo ">> kube binaries are up to date in bin/"
  exit 0
fi

mkdir -p "$bin"
echo ">> building kube-apiserver, kube-scheduler, kube-controller-manager (k8s v1.36.3) and etcd (v3.6.8) into bin/"
echo "   the first build takes several minutes on 2 cores; later runs reuse it"
start=$(date +%s)
cd "$mod"
for target in k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-controller-manager ./etcd; do
  t0=$(date +%s)
  echo "   building $(basename "$target") ..."
  go build -o "$bin/" "$target"
  echo "   built $(basename "$target") in $(( $(date +%s) - t0 ))s"
done
echo "$want" > "$stamp"
echo ">> kube binaries built in $(( $(date +%s) - start ))s"
