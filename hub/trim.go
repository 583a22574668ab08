package hub

import (
	"context"
	"runtime"
	"runtime/debug"
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
//
// A flood of output (a session's unread output of floodSize or more) is
// returned sooner: floodWait after it is let go (taken for a reply, or
// dropped), busy or not, and at most once every floodEvery, so that a
// run of floods costs one collection a second. A collection with fifty
// sessions live takes a few milliseconds of the trimming goroutine; a
// trivial cell never causes one.
const (
	trimEvery  = 2 * time.Second
	trimSlack  = 1 << 20
	floodSize  = 1 << 20
	floodWait  = 100 * time.Millisecond
	floodEvery = time.Second
	// releaseCodeBy is how long the hub waits for an idle tick with no
	// cell running before it lets go of its start-up code anyway.
	releaseCodeBy = time.Minute
)

// floodLetGo tells trimLoop that a flood's memory was let go; it never
// blocks.
func (h *Hub) floodLetGo() {
	if h == nil {
		return
	}
	select {
	case h.floods <- struct{}{}:
	default:
	}
}

// trimLoop trims the heap while the hub is idle, and after floods, until
// ctx ends.
func (h *Hub) trimLoop(ctx context.Context) {
	t := time.NewTicker(trimEvery)
	defer t.Stop()
	var tr trimmer
	var heap heapGauge
	free := func() { h.free(); heap.settle() }
	startupMapped := true // the code only start-up ran is still mapped
	started := time.Now()
	var flood <-chan time.Time // nil while no flood waits
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			busy := h.served.Swap(0) > 0
			tr.tick(busy, heap.slack, free)
			if startupMapped && releaseNow(busy, h.anyRunning, time.Since(started)) {
				// Once: the code start-up alone ran goes; what runs later
				// stays, so a call after an idle spell finds it mapped.
				releaseCode()
				startupMapped = false
			}
		case <-h.floods:
			if flood == nil {
				flood = time.After(max(floodWait, time.Until(tr.last.Add(floodEvery))))
			}
		case <-flood:
			flood = nil
			tr.flood(heap.slack, free)
		}
	}
}

// free returns the heap's free memory to the system, and logs what it
// cost.
func (h *Hub) free() {
	t0 := time.Now()
	debug.FreeOSMemory()
	h.log.Debug("heap trimmed", "took", time.Since(t0))
}

// trimmer decides, tick by tick and flood by flood, when to trim.
type trimmer struct {
	floor int64     // the slack the last trim left, which it could not return
	last  time.Time // when it last trimmed
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
		t.trim(slack, free)
	}
}

// flood trims after a flood was let go, when the slack is worth it.
func (t *trimmer) flood(slack func() int64, free func()) {
	if slack() >= trimSlack {
		t.trim(slack, free)
	}
}

func (t *trimmer) trim(slack func() int64, free func()) {
	free()
	t.floor = slack()
	t.last = time.Now()
}

// heapGauge reads the heap the hub holds (not given back to the system)
// beyond what is live. runtime/metrics would tell the live heap at the
// last collection, but its init, which every replhub process runs, costs
// a CLI call 1.3 ms; runtime.ReadMemStats does not tell it. So live is
// the heap allocated just after the last trim, whose collection left
// only what was live: since then, what the hub allocated counts as slack
// until a trim finds out whether it is garbage. A hub whose live heap
// grew trims once more, and then knows it.
type heapGauge struct {
	live uint64 // HeapAlloc just after the last trim; 0 before the first
}

func (g *heapGauge) slack() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	held := m.HeapInuse + m.HeapIdle - m.HeapReleased
	return int64(held) - int64(min(g.live, m.HeapAlloc))
}

// settle takes the live heap, right after a trim's collection.
func (g *heapGauge) settle() {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	g.live = m.HeapAlloc
}

// releaseNow says whether a tick releases the start-up code: one in which
// no request began, and no cell runs (its output would map back at once
// what it needs), unless releaseCodeBy has passed since the hub started,
// so that a cell that never ends does not keep it.
func releaseNow(busy bool, running func() bool, up time.Duration) bool {
	return !busy && (up > releaseCodeBy || !running())
}

// anyRunning reports whether a session runs a cell.
func (h *Hub) anyRunning() bool {
	for _, s := range h.allSessions() {
		s.mu.Lock()
		running := s.state == stateRunning
		s.mu.Unlock()
		if running {
			return true
		}
	}
	return false
}
