package hub

import (
	"sync"
	"time"
)

// behindAfter bounds the records written behind. A cell that comes
// within this long of its session's last one has its records (its lines
// in the transcript, its live record's cell count) kept in memory and
// written with those of the cells after it, at most this long later
// (flushBehind). Back-to-back cells then make no write of their own, and
// with it no system call that the Go runtime hears of: each such call,
// the first after the hub was idle, woke the runtime's monitor thread,
// whose switches in and out cost a round trip some 20 µs on a machine
// where the client, the hub and the worker share the cores (the rest of
// the round trip's calls are raw: rawio). A cell after a pause is written
// at once, as before; so is a big cell's code.
const behindAfter = 2 * time.Millisecond

// behindSet is the sessions with records written behind.
type behindSet struct {
	mu    sync.Mutex
	set   map[*Session]struct{}
	armed bool          // flushBehind is due
	after time.Duration // in place of behindAfter, for tests
}

// behindLocked keeps s's records to write within behindAfter; s.mu is
// held.
func (h *Hub) behindLocked(s *Session) {
	h.behind.mu.Lock()
	defer h.behind.mu.Unlock()
	if h.behind.set == nil {
		h.behind.set = make(map[*Session]struct{})
	}
	h.behind.set[s] = struct{}{}
	if !h.behind.armed {
		h.behind.armed = true
		after := behindAfter
		if h.behind.after != 0 {
			after = h.behind.after
		}
		time.AfterFunc(after, h.flushBehind)
	}
}

// flushBehind writes every session's records written behind.
func (h *Hub) flushBehind() {
	h.behind.mu.Lock()
	set := h.behind.set
	h.behind.set, h.behind.armed = nil, false
	h.behind.mu.Unlock()
	for s := range set {
		s.mu.Lock()
		h.flushBehindLocked(s)
		s.mu.Unlock()
	}
}

// flushBehindLocked writes s's records written behind, before anything
// else goes into its transcript; s.mu is held.
func (h *Hub) flushBehindLocked(s *Session) {
	if s.behindLive {
		s.behindLive = false
		h.touchLiveLocked(s)
	}
	if len(s.behind) == 0 {
		return
	}
	b := s.behind
	s.behind = nil
	if s.openTranscriptLocked() != nil {
		return
	}
	defer s.releaseTranscriptLocked()
	s.transcript.Write(b)
}
