package hub

import (
	"sync"
	"time"
)

// aheads starts the readers that quick requests put off (see conn.read):
// each is due readAhead after its request came, unless its request was
// answered first. One timer serves all of a hub's connections, armed
// while any is pending: a timer of its own for each request cost it a
// wake-up of the thread that waits in the network poller, a fifth of a
// ping's time in the hub.
type aheads struct {
	mu      sync.Mutex
	t       *time.Timer // runs fire; made at the first add
	armed   bool        // t will fire
	pending []*ahead    // in the order they are due, some stopped
}

// ahead is one reader put off: start, once due, unless stopped first.
type ahead struct {
	due     time.Time
	start   func()
	stopped bool // stopped, or started: either way no longer pending
}

// add puts off start for after.
func (a *aheads) add(after time.Duration, start func()) *ahead {
	e := &ahead{due: time.Now().Add(after), start: start}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pending = append(a.pending, e)
	if !a.armed {
		a.armed = true
		if a.t == nil {
			a.t = time.AfterFunc(after, a.fire)
		} else {
			a.t.Reset(after)
		}
	}
	return e
}

// stop keeps e from starting; false if it has started already.
func (a *aheads) stop(e *ahead) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if e.stopped {
		return false
	}
	e.stopped = true
	return true
}

// fire starts the readers that are due, drops the stopped ones, and arms
// the timer again for the next one due.
func (a *aheads) fire() {
	a.mu.Lock()
	now := time.Now()
	var due []*ahead
	kept := a.pending[:0]
	for _, e := range a.pending {
		switch {
		case e.stopped:
		case !e.due.After(now):
			e.stopped = true
			due = append(due, e)
		default:
			kept = append(kept, e)
		}
	}
	clear(a.pending[len(kept):])
	a.pending = kept
	a.armed = len(kept) > 0
	if a.armed {
		a.t.Reset(kept[0].due.Sub(now))
	}
	a.mu.Unlock()
	for _, e := range due {
		go e.start()
	}
}
