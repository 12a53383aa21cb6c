#!/usr/bin/env bash
# Fails (exit 1) when a Go file of the repository does not start with the
# licence header in hack/boilerplate.go.txt. It checks every *.go file git
# tracks or would track (untracked and not ignored), in every module: the
# product module, test/ and hack/tools/.
#
# A file starts with the header exactly, then a blank line (so the header is
# never taken for the package's doc comment). Files with build constraints
# may put their //go:build lines and one blank line first, as controller-gen
# writes them.
#
# The offending files go to stdout, one per line; everything else goes to
# stderr.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
header=hack/boilerplate.go.txt

# has_header FILE: exit 0 when FILE carries the header.
has_header() {
  awk -v hf="$header" '
    BEGIN { while ((getline line < hf) > 0) h[++n] = line; close(hf) }
    FNR == 1 && /^\/\/(go:build| ?\+build)/ { constraints = 1 }
    constraints {
      if ($0 ~ /^\/\/(go:build| ?\+build)/) next
      if ($0 == "") { constraints = 0; next }
      exit 1
    }
    {
      i++
      if (i <= n) { if ($0 != h[i]) exit 1; next }
      if ($0 == "") ok = 1
      exit
    }
    END { exit !ok }
  ' "$1"
}

checked=0
bad=()
while IFS= read -r -d '' f; do
  [[ -f "$f" ]] || continue # tracked but deleted in the work tree
  checked=$((checked + 1))
  has_header "$f" || bad+=("$f")
done < <(git ls-files -z --cached --others --exclude-standard -- '*.go' | sort -z)

if ((${#bad[@]} > 0)); then
  echo "${#bad[@]} of $checked Go files do not start with the header in $header:" >&2
  printf '%s\n' "${bad[@]}"
  exit 1
fi
echo ">> all $checked Go files start with the header in $header" >&2
