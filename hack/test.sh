#!/usr/bin/env bash
# make test: every check CI runs before lint, each step timed, and the timing
# table (hack/timings.sh) printed at the end, passed or failed.
#
# Environment: TEST_TIMEOUT (-test.timeout of each test module binary),
# TEST_PARALLEL (test packages at once after the long suites; hack/test-module.sh),
# TIMINGS_DIR (where the timings go; out/timings).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export TIMINGS_DIR=${TIMINGS_DIR:-$root/out/timings}
rm -rf "$TIMINGS_DIR"; mkdir -p "$TIMINGS_DIR"
start=$(date +%s)
export TIMINGS_START=$start
trap 'status=$?; "$root/hack/timings.sh" $(( $(date +%s) - start )); exit $status' EXIT

step() { local name=$1; shift; echo ">> $name"; "$root/hack/timed.sh" step "$name" "$@"; }

# The modules of both Go modules download while the tools build.
(go mod download && cd test && go mod download) > "$TIMINGS_DIR/download.log" 2>&1 &
downloads=$!
step tools hack/build-tools.sh
wait $downloads || { cat "$TIMINGS_DIR/download.log" >&2; exit 1; }
# How fast this machine is, for the timing table (docs/testing.md, "Machine
# speed"): measured while nothing else runs.
step calibrate bash -c 'cd test && go run ./cmd/calibrate > "$TIMINGS_DIR/calibration"'
step verify-gen make --no-print-directory verify-gen
step verify-boilerplate make --no-print-directory verify-boilerplate
step build make --no-print-directory build
step release make --no-print-directory release
# go vet runs once, in make lint (golangci-lint's govet); go test runs its
# own vet checks on every package it tests.
# Test binaries link without debug information (-s -w): a commit relinks
# every one of them, and the e2e binary alone took 24.5 CPU s to link with
# it and 19 without. Stack traces and profiles keep their function names.
test_ldflags="-s -w"
step unit-tests go test -count=1 -ldflags "$test_ldflags" -exec "$root/hack/timed-test.sh" ./...
cd test
# The long suites first, the other packages in the slots they leave
# (hack/test-module.sh).
step test-module env KUBE_BIN_DIR="$root/bin" TEST_LDFLAGS="$test_ldflags" "$root/hack/test-module.sh"
