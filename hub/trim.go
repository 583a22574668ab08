package hub

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Trimming: a burst of work (fifty sessions starting at once, a big
// reply) leaves the hub's heap holding garbage and free pages that the
// runtime gives back to the system only slowly, so an idle hub would sit
// on its busiest moment's memory. After a tick in which no request began,
// once the heap holds trimSlack more than it did after the last trim
// beyond what is live, the hub collects and returns what is free. A
// request that goes on (an attached console, a long wait) does not hold
// it off, and an idle hub whose slack does not grow trims once.
const (
	trimEvery = 2 * time.Second
	trimSlack = 1 << 20
)

// trimLoop trims the heap while the hub is idle, until ctx ends.
func (h *Hub) trimLoop(ctx context.Context) {
	t := time.NewTicker(trimEvery)
	defer t.Stop()
	var tr trimmer
	started := true
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		busy := h.served.Swap(0) > 0
		tr.tick(busy, heapSlack, debug.FreeOSMemory)
		if started && !busy {
			// Once: the code start-up alone ran goes; what runs later
			// stays, so a call after an idle spell finds it mapped.
			releaseCode()
			started = false
		}
	}
}

// trimmer decides, tick by tick, when to trim.
type trimmer struct {
	floor int64 // the slack the last trim left, which it could not return
}

// tick trims (free) when no request began in the tick (busy) and the
// slack has grown by trimSlack since the last trim; a busy tick lets the
// next idle one trim again.
func (t *trimmer) tick(busy bool, slack func() int64, free func()) {
	if busy {
		t.floor = 0
		return
	}
	if slack() >= t.floor+trimSlack {
		free()
		t.floor = slack()
	}
}

// heapSlack is the heap the hub holds (not given back to the system)
// beyond what was live at the last collection.
func heapSlack() int64 {
	s := []metrics.Sample{
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/memory/classes/heap/unused:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	metrics.Read(s)
	for _, v := range s {
		if v.Value.Kind() != metrics.KindUint64 {
			return 0
		}
	}
	held := s[0].Value.Uint64() + s[1].Value.Uint64() + s[2].Value.Uint64()
	return int64(held) - int64(s[3].Value.Uint64())
}
