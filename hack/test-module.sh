#!/usr/bin/env bash
# Runs the test module's packages for make test, scheduled for two cores:
#
#   1. the two long suites (integration and e2e, two worlds each) link and
#      start together;
#   2. as each long suite ends, the other packages link and run in the
#      slots it leaves, longest first: none beside both, TEST_PARALLEL - 1
#      (2) beside one, TEST_PARALLEL (3) once neither runs.
#
# `go test -p 2` ran the other packages two at a time after the suites:
# about 480 s at a little over one core, as each waits on its world; three
# at once keep both cores busy (docs/testing.md, "Tests at once"). Their
# binaries link in their slots, as `go test` links them: linked beside the
# long suites, even at the lowest priority, they found no idle core and
# slowed the suites.
#
# Each package runs in its directory as `go test` runs it, under
# hack/timed.sh (the timing table); its output goes to
# out/test-logs/<package>.log and is printed when it fails. The exit status
# is 1 when any package failed.
#
# Environment: TEST_TIMEOUT (each binary's -test.timeout; 60m), TEST_PARALLEL,
# TEST_LDFLAGS (the binaries' link flags), KUBE_BIN_DIR (passed on).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/test"
long=(integration e2e)
# Longest first, so that no long package starts last and runs alone; but
# migrate and move, each a world of several API servers and etcds, apart:
# side by side each took 40 to 60 s longer (CI at d1dd794).
tail=(migrate world monitoring move upgrade controllers testenv webhooks release cmd/bench sim)
# A package added to the module and not to the lists above runs last.
while read -r pkg; do
  [[ " ${long[*]} ${tail[*]} " == *" $pkg "* ]] || tail+=("$pkg")
done < <(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.Dir}}{{end}}' ./... | sed "s#^$PWD/##")
slots=${TEST_PARALLEL:-3}
bin=$root/out/test-bin logs=$root/out/test-logs
rm -rf "$bin" "$logs"; mkdir -p "$bin" "$logs"
ldflags=${TEST_LDFLAGS:-}

# -tags e2e: Cluster API builds its MachinePoolSpec only with that tag
# (its test/e2e/machine_pool.go), and test/e2e runs it; packages without
# tagged files build from the same cache either way.
link() { go test -c -tags e2e -o "$bin/" -ldflags "$ldflags" "${@/#/./}"; }

# run PACKAGE: links its test binary unless linked, and runs it in its
# directory; prints go test's summary line and leaves its exit status in
# $done/<package>.
run() {
  local pkg=$1 name=${1##*/} log="$logs/${1//\//-}.log" start=$SECONDS status=0
  [[ -x "$bin/$name.test" ]] || link "$pkg" || status=1
  if [[ $status != 0 ]]; then
    printf 'FAIL\ttest/%s [build failed]\n' "$pkg"
  elif [[ ! -x "$bin/$name.test" ]]; then
    printf '?   \ttest/%s\t[no test files]\n' "$pkg"
  else
    (cd "$pkg" && "$root/hack/timed.sh" package "test/$pkg" "$bin/$name.test" \
      -test.paniconexit0 -test.timeout="${TEST_TIMEOUT:-60m}" > "$log" 2>&1)
    status=$?
    if [[ $status == 0 ]]; then
      printf 'ok  \ttest/%s\t%ds\n' "$pkg" $(( SECONDS - start ))
    else
      cat "$log"
      printf 'FAIL\ttest/%s\t%ds\n' "$pkg" $(( SECONDS - start ))
    fi
  fi
  echo "$status" > "$done/${pkg//\//-}"
}

# finished PACKAGE: whether it ended (its status is in $done).
finished() { [[ -e "$done/${1//\//-}" ]]; }

# stop PID: stops a process and everything it started, deepest first
# (a package's test binary stops its world's processes as it exits).
stop() { local child; for child in $(pgrep -P "$1"); do stop "$child"; done; kill "$1" 2>/dev/null; }
done=$(mktemp -d)
trap 'rm -rf "$done"' EXIT
trap 'for job in $(jobs -p); do stop "$job"; done; exit 143' TERM INT
link "${long[@]}" || exit 1
for pkg in "${long[@]}"; do run "$pkg" & done

# The scheduler looks once a second: starting a package a second late costs
# nothing beside runs of minutes.
next=0
while true; do
  running_long=0
  for pkg in "${long[@]}"; do finished "$pkg" || running_long=$(( running_long + 1 )); done
  running_tail=0
  for pkg in "${tail[@]:0:next}"; do finished "$pkg" || running_tail=$(( running_tail + 1 )); done
  # Both long suites: their two slots are taken, as with go test -p 2.
  free=$(( running_long == 2 ? 0 : slots - running_long ))
  while (( next < ${#tail[@]} && running_tail < free )); do
    run "${tail[$next]}" &
    next=$(( next + 1 )) running_tail=$(( running_tail + 1 ))
  done
  (( running_long + running_tail == 0 && next == ${#tail[@]} )) && break
  sleep 1
done
wait
failed=0
for pkg in "${long[@]}" "${tail[@]}"; do
  [[ $(cat "$done/${pkg//\//-}") == 0 ]] || failed=1
done
exit $failed
