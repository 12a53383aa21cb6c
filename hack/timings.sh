#!/usr/bin/env bash
# Prints the timing table of a make test run from $TIMINGS_DIR (out/timings):
# the steps of make test, each test package, e2e shard and tool built,
# slowest first, with wall and CPU seconds and the second each started at
# (from make test's start); rows under 5 s fold into one.
# CPU above wall means both cores worked; the budget per package is in
# docs/testing.md.
#
# Usage: hack/timings.sh [SECONDS]: with make test's wall seconds, it also
# prints them against the budget, and this machine's calibration
# (test/cmd/calibrate; docs/testing.md, "Time budget" and "Machine speed").
set -euo pipefail
dir=${TIMINGS_DIR:-$(cd "$(dirname "$0")/.." && pwd)/out/timings}
for kind in step package shard tool; do
  [[ -s "$dir/$kind.tsv" ]] || continue
  echo ">> timings: ${kind}s (wall s, CPU s, started at s), slowest first"
  sort -t$'\t' -k3,3nr "$dir/$kind.tsv" | awk -F'\t' '
    $3 < 5 && $4 < 5 && $5 == "ok" { n++; sw += $3; sc += $4; w += $3; c += $4; next }
    { printf "   %-44s %6d %6d %6s  %s\n", $2, $3, $4, $6, $5; w += $3; c += $4 }
    END { if (n) printf "   %-44s %6d %6d\n", "(" n " more, under 5 s each)", sw, sc
          printf "   %-44s %6d %6d\n", "(sum)", w, c }'
done
# make test's budget in wall seconds, and the calibration's CPU seconds on
# the machine it was set on (docs/testing.md, "Time budget").
budget=1200
reference=4.4
total=${1:-}
[[ -n "$total" ]] || exit 0
if (( total > budget )); then
  echo ">> make test took ${total}s: over its budget of ${budget}s by $((total - budget))s"
else
  echo ">> make test took ${total}s: inside its budget of ${budget}s"
fi
if [[ -s "$dir/calibration" ]]; then
  speed=$(cat "$dir/calibration")
  echo ">> machine: calibration ${speed} CPU s, the budget's machine ${reference}: $(echo "scale=2; $speed / $reference" | bc)x its time (compare CPU seconds across machines with it, not the wall)"
fi
