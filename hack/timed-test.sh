#!/usr/bin/env bash
# go test -exec wrapper: runs a test binary through hack/timed.sh under its
# package's directory relative to the repository root, so that make test
# prints each package's wall and CPU seconds (hack/timings.sh).
root=$(cd "$(dirname "$0")/.." && pwd)
exec "$root/hack/timed.sh" package "${PWD#"$root"/}" "$@"
