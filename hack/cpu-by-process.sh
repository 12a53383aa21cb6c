#!/usr/bin/env bash
# Usage: hack/cpu-by-process.sh OUTPUT [INTERVAL]
# Samples every process's CPU seconds every INTERVAL seconds (5) until
# killed, and keeps in OUTPUT the CPU seconds per command name (the most
# each process reached, summed over processes), most first: a CPU profile of
# a make test run by process, as docs/testing.md shows it. Processes that
# live less than an interval are missed.
set -uo pipefail
out=$1 interval=${2:-5}
samples=$(mktemp)
trap 'rm -f "$samples"' EXIT
summarize() {
  awk '{ if ($3 > max[$1]) { max[$1] = $3; name[$1] = $2 } }
    END { for (p in max) sum[name[p]] += max[p]; for (n in sum) printf "%8d  %s\n", sum[n], n }' "$samples" |
    sort -nr > "$out"
}
trap 'summarize; rm -f "$samples"; exit 0' TERM INT
while true; do
  ps -eo pid=,comm=,cputimes= >> "$samples"
  summarize
  sleep "$interval"
done
