#!/usr/bin/env bash
# The whole suite, as CI runs it (the README's test command calls it once
# the packages it needs are installed).
#
# The race-built tests run at the usual priority and, beside them at the
# lowest (nice 19), the checks that time nothing: `go vet`, the macOS and
# static builds, the tests run without -race and the fuzzers. Those take
# the CPU the tests leave idle while they wait on processes, sockets and
# timeouts, and give it back whenever a test wants it. Their output is
# printed after the tests'.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = side ]; then
	set -e
	go vet ./...
	GOOS=darwin go build ./...
	CGO_ENABLED=0 go build -o /dev/null ./cmd/replhub
	# Under the race detector rawio makes ordinary system calls (the
	# detector sees only those), and the hub's image scaling is too slow
	# to be worth its time there.
	go test -count=1 ./internal/rawio ./client
	go test -count=1 -run '^TestBoundImage' ./hub
	fuzz() { go test -run '^$' -fuzz "^$1\$" -fuzztime "$2x" -fuzzminimizetime 100x "$3"; }
	fuzz FuzzReader 300000 ./proto
	fuzz FuzzReaderOnePass 200000 ./proto
	fuzz FuzzReadRequest 150000 ./wire
	fuzz FuzzExpand 200000 ./nodeset
	fuzz FuzzPlainExec 200000 ./cmd/replhub/early
	fuzz FuzzParseNews 100000 ./internal/lean
	fuzz FuzzLineReader 20000 ./mcp
	exit 0
fi

log=$(mktemp "${TMPDIR:-/tmp}/replhub-side.XXXXXX") || exit 1
trap 'rm -f "$log"' EXIT
nice -n 19 "$0" side >"$log" 2>&1 &
side=$!
go test -race -p 3 -count=1 -timeout 30m ./tests ./...
tests=$?
wait "$side"
sided=$?
echo "--- beside the tests: go vet, macOS and static builds, tests without -race, fuzzers"
cat "$log"
if [ "$tests" != 0 ] || [ "$sided" != 0 ]; then
	echo "FAIL: the race-built tests exited $tests, the checks beside them $sided" >&2
	exit 1
fi
