#!/usr/bin/env bash
# Usage: hack/timed.sh KIND NAME COMMAND...
# Runs COMMAND and appends "KIND NAME wall-seconds cpu-seconds status
# start-second" (tab separated) to $TIMINGS_DIR/KIND.tsv. CPU seconds are
# the user and system time of COMMAND and of every process it waited for (a
# test's API servers and controllers included); the start second counts
# from $TIMINGS_START (make test's start), so the table shows what ran side
# by side. The exit status is COMMAND's.
set -uo pipefail
kind=$1 name=$2; shift 2
dir=${TIMINGS_DIR:-$(cd "$(dirname "$0")/.." && pwd)/out/timings}
mkdir -p "$dir"
stats=$(mktemp)
started=$(( $(date +%s) - ${TIMINGS_START:-$(date +%s)} ))
/usr/bin/time -q -f 'timed %e %U %S' -o "$stats" "$@"
status=$?
read -r _ wall user sys < <(grep '^timed ' "$stats")
rm -f "$stats"
if [[ -n "${wall:-}" ]]; then
  printf '%s\t%s\t%.0f\t%.0f\t%s\t%s\n' "$kind" "$name" "$wall" "$(echo "$user + $sys" | bc)" \
    "$([[ $status == 0 ]] && echo ok || echo FAIL)" "$started" >> "$dir/$kind.tsv"
fi
exit $status
