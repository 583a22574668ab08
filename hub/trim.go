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
// on its busiest moment's memory. Once no request has been in flight for
// a tick and at least trimSlack of the heap is not live, the hub collects
// and returns what is free. Nobody waits on it: it runs only while idle.
const (
	trimEvery = 2 * time.Second
	trimSlack = 1 << 20
)

// trimLoop trims the heap while the hub is idle, until ctx ends.
func (h *Hub) trimLoop(ctx context.Context) {
	t := time.NewTicker(trimEvery)
	defer t.Stop()
	trimmed := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if h.served.Swap(0) > 0 || h.inFlight.Load() > 0 {
			trimmed = false
			continue
		}
		// A whole tick without a request: trim once until the next.
		if !trimmed && heapSlack() >= trimSlack {
			debug.FreeOSMemory()
			trimmed = true
		}
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
