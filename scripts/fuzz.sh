#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each (default 10s):
# `make test` runs them briefly, `make fuzz` for minutes. A failing input
# is saved under the package's testdata/fuzz/ and fails the run.
set -euo pipefail
fuzztime=${FUZZTIME:-10s}
go=${GO:-go}
status=0
for pkg in $($go list ./...); do
	dir=$($go list -f '{{.Dir}}' "$pkg")
	grep -lq '^func Fuzz' "$dir"/*_test.go 2>/dev/null || continue
	for target in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go | sed 's/^func //'); do
		echo "fuzz $pkg $target for $fuzztime"
		if ! $go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg" >/tmp/fuzz-$$.log 2>&1; then
			cat /tmp/fuzz-$$.log
			status=1
		fi
	done
done
rm -f /tmp/fuzz-$$.log
exit $status
