#!/usr/bin/env bash
# The whole suite, as CI runs it (the README's test command calls it once
# the packages it needs are installed).
#
# `go vet` first; then the race-built tests at the usual priority and,
# beside them in the scheduler's idle class (SCHED_IDLE, or nice 19 where
# chrt is missing), the checks that time nothing: the macOS and static
# builds, the hub's image scaling without -race and the fuzzers. Those
# take the CPU the tests leave idle while they wait on processes, sockets
# and timeouts, and give it back the moment a test wants it. Their output
# is printed after the tests'.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

if [ "${1:-}" = side ]; then
	set -e
	GOOS=darwin go build ./...
	CGO_ENABLED=0 go build -o /dev/null ./cmd/replhub
	# The hub's image scaling is too slow to be worth its time under the
	# race detector, and times nothing.
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

go vet ./... || exit 1
log=$(mktemp "${TMPDIR:-/tmp}/replhub-side.XXXXXX") || exit 1
# A Ctrl-C or a TERM ends the checks beside the tests too, rather than
# wait for the rest of them or leave them running: as a background job,
# they ignore SIGINT (a fuzzer that hears it passes, and the next one
# starts), and the tests' go command exits on it without dying of it, so
# that this shell would go on to wait for them.
# They run in a process group of their own (setsid), which the trap ends
# whole: the go commands and fuzzers under the script, not only the script.
side=
trap '[ -z "$side" ] || kill -- -"$side" 2>/dev/null; rm -f "$log"' EXIT
trap 'exit 130' INT
idle="nice -n 19"
if command -v chrt >/dev/null; then
	idle="chrt --idle 0"
fi
# By its path from here ($0 may be relative to another folder).
setsid $idle bash tests/all.sh side </dev/null >"$log" 2>&1 &
side=$!
go test -race -p 3 -count=1 -timeout 30m ./tests ./...
tests=$?
# Once more without -race, at the usual priority (their sessions have
# time limits): under the race detector rawio makes ordinary system calls,
# since the detector sees only those.
go test -count=1 ./internal/rawio ./client || tests=$?
wait "$side"
sided=$?
side=
echo "--- beside the tests: macOS and static builds, image scaling without -race, fuzzers"
cat "$log"
if [ "$tests" != 0 ] || [ "$sided" != 0 ]; then
	echo "FAIL: the tests exited $tests, the checks beside them $sided" >&2
	exit 1
fi
