package hub

import (
	"bytes"
	"runtime"
	"strconv"
	"strings"
)

// goroutineMark is the set of goroutine ids alive now. Ids are never
// reused, so the goroutines not in it are those started since (their
// ids need not be higher: each P takes ids in batches).
func goroutineMark() map[int64]bool {
	mark := map[int64]bool{}
	for _, g := range goroutineStacks() {
		mark[g.id] = true
	}
	return mark
}

// goroutinesSince counts the goroutines alive that are not in mark,
// created by a function whose name holds one of creators
// ("(*Session).refuse"): not other tests' leftovers, nor the runtime's,
// whatever their number.
func goroutinesSince(mark map[int64]bool, creators ...string) int {
	n := 0
	for _, g := range goroutineStacks() {
		if mark[g.id] {
			continue
		}
		for _, c := range creators {
			if strings.Contains(g.createdBy, c) {
				n++
				break
			}
		}
	}
	return n
}

type goroutineStack struct {
	id        int64
	createdBy string
}

// goroutineStacks are every goroutine's id and "created by" line, from
// runtime.Stack.
func goroutineStacks() []goroutineStack {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []goroutineStack
	for _, block := range bytes.Split(buf, []byte("\n\n")) {
		head, rest, _ := strings.Cut(string(block), "\n")
		f := strings.Fields(head) // goroutine 42 [chan receive]:
		if len(f) < 2 || f[0] != "goroutine" {
			continue
		}
		id, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		g := goroutineStack{id: id}
		if _, after, ok := strings.Cut(rest, "created by "); ok {
			g.createdBy, _, _ = strings.Cut(after, "\n")
		}
		out = append(out, g)
	}
	return out
}
