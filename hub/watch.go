package hub

import (
	"context"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/replhub/replhub/wire"
)

// Attach: consoles (replhub attach) and streaming execs see a session's
// cells and output as they happen. Each is a watcher: the session hands it
// events under its mutex, never blocking (a watcher that falls behind
// loses output and is told how much), and a goroutine of the request
// sends them on. The hooks into the cell's life are three calls:
// outputs.tap (every byte of output), cellStartedLocked (from exec) and
// cellFinishedLocked (from finishLocked).
//
// A watcher that runs a cell (its run's stream) takes that cell's output
// as it comes: the bytes it took are not in the cell's result, so the
// reply that ends the cell carries only what the watcher could not take.
// Other watchers only look: an agent's cell keeps its output for the
// agent.

// watcherQueue bounds the events waiting for one watcher's connection.
const watcherQueue = 2048

// maxEventCode bounds the code of a cell shown to watchers.
const maxEventCode = 64 << 10

// attachState is a session's watchers and the cells typed in consoles
// that no other reply has mentioned yet; under Session.mu.
type attachState struct {
	watchers []*watcher
	// personCells are the cells typed in a console since the last reply
	// to anybody else: that reply says so, once.
	personCells []int
}

// watcher is one console or streaming exec. A console (person) sees every
// cell; a streaming exec only its own. Its events channel is closed by
// close, after it has left the session, so that no push can follow.
type watcher struct {
	events chan *wire.Event
	// person is set for a console: its cells count as a person's.
	person bool
	// Under the session's mutex:
	s     *Session
	carry []byte // the start of a UTF-8 character cut by a chunk's end
	lost  int    // bytes of output dropped since the last event that went
	// behind is the cell of its own whose output it fell behind on.
	behind int
	// holding keeps a console's events in held from the end of its own
	// cell until that cell's reply has gone (attachCell): so the reply
	// comes before what the next cell, a queued one, does.
	holding bool
	held    []*wire.Event
	gone    bool
	once    sync.Once
}

func newWatcher(person bool) *watcher {
	return &watcher{events: make(chan *wire.Event, watcherQueue), person: person}
}

type watcherKey struct{}

type surfaceKey struct{}

// withSurface tells cellStartedLocked who runs the cell that exec starts
// under ctx (wire.SurfaceMCP: an agent), for the consoles that see it.
func withSurface(ctx context.Context, surface string) context.Context {
	return context.WithValue(ctx, surfaceKey{}, surface)
}

// surfaceOf is the surface withSurface gave ctx ("" for none).
func surfaceOf(ctx context.Context) string {
	sf, _ := ctx.Value(surfaceKey{}).(string)
	return sf
}

// withWatcher makes the cell that exec starts under ctx w's.
func withWatcher(ctx context.Context, w *watcher) context.Context {
	return context.WithValue(ctx, watcherKey{}, w)
}

// pushLocked queues ev for w; false when w's queue is full.
func (w *watcher) pushLocked(ev *wire.Event) bool {
	if w.gone {
		return false
	}
	if w.holding {
		if len(w.held) >= watcherQueue {
			return false
		}
		w.held = append(w.held, ev)
		return true
	}
	select {
	case w.events <- ev:
		return true
	default:
		return false
	}
}

// outLocked queues output p for w, holding back a character cut in two
// by the chunk's end; false when w's queue is full (p is then lost to w).
func (w *watcher) outLocked(p []byte) bool {
	data := append(w.carry, p...)
	w.carry = nil
	k := cutRune(data)
	text := string(data[:len(data)-k])
	if w.lost > 0 {
		text = fmt.Sprintf("\n[... %d bytes of output not shown here: this console fell behind ...]\n", w.lost) + text
	}
	if text != "" && !w.pushLocked(&wire.Event{Kind: wire.EventOut, Text: text}) {
		w.lost += len(data)
		return false
	}
	w.lost = 0
	w.carry = append([]byte(nil), data[len(data)-k:]...)
	return true
}

// flushLocked queues what w holds back of a character.
func (w *watcher) flushLocked() {
	if len(w.carry) > 0 {
		w.pushLocked(&wire.Event{Kind: wire.EventOut, Text: string(w.carry)})
		w.carry = nil
	}
}

// cutRune is how many bytes at the end of p start a UTF-8 character that
// the next chunk completes.
func cutRune(p []byte) int {
	for k := 1; k <= min(3, len(p)); k++ {
		c := p[len(p)-k]
		if c < 0x80 {
			return 0
		}
		if utf8.RuneStart(c) {
			if utf8.FullRune(p[len(p)-k:]) {
				return 0
			}
			return k
		}
	}
	return 0
}

// watchLocked adds w to s's watchers.
func (s *Session) watchLocked(w *watcher) {
	w.s = s
	s.attached.watchers = append(s.attached.watchers, w)
	s.out.tap = s.tapLocked
}

// close takes w off its session and closes its events: nothing more is
// queued for it.
func (w *watcher) close() {
	w.once.Do(func() {
		if s := w.s; s != nil {
			s.mu.Lock()
			w.gone = true
			ws := s.attached.watchers
			for i, x := range ws {
				if x == w {
					s.attached.watchers = append(ws[:i:i], ws[i+1:]...)
					break
				}
			}
			if len(s.attached.watchers) == 0 {
				s.out.tap = nil
			}
			s.mu.Unlock()
		}
		close(w.events)
	})
}

// tapLocked shows output p to every watcher; the running cell's own
// watcher takes it, unless it has fallen behind in this cell.
func (s *Session) tapLocked(p []byte) bool {
	var own *watcher
	if r := s.cur; r != nil && r.sealed == nil && !r.isFinished() {
		own = r.stream
	}
	took := false
	for _, w := range s.attached.watchers {
		if w != own {
			if w.person {
				w.outLocked(p)
			}
			continue
		}
		// Once it fell behind, the rest of the cell's output goes to its
		// reply, so that nothing is shown twice or out of order.
		took = w.behind != s.cur.cell && w.outLocked(p)
		if !took {
			w.behind = s.cur.cell
		}
	}
	return took
}

// cellStartedLocked is called by exec as cell r of code starts, before
// its code goes to the worker; the cell is the watcher's under ctx, if any.
func (s *Session) cellStartedLocked(ctx context.Context, r *run, code string) {
	w := watcherOf(ctx)
	s.startedLocked(r, w, byOf(ctx, w), code)
}

// queuedStartedLocked is called by nextLocked as queued cell r starts:
// the watcher that queued it (enqueue) is its own.
func (s *Session) queuedStartedLocked(r *run, code string) {
	s.startedLocked(r, r.stream, r.by, code)
}

// startedLocked starts cell r of code, started by w (nil: no watcher's)
// as by. A watcher's cell streams to it, and takes the output nobody had
// read: that belongs to the reply of this cell. The other watchers see the
// cell's code.
func (s *Session) startedLocked(r *run, w *watcher, by, code string) {
	r.stream = nil
	if w != nil && !w.gone {
		r.stream = w
		if w.s == nil {
			// A streaming exec: it watches for this cell only, and shows
			// the unread output first.
			s.watchLocked(w)
			if s.out.len() > 0 {
				if t := s.out.take().all.text; t != "" {
					w.pushLocked(&wire.Event{Kind: wire.EventOut, Text: t})
				}
			}
		} else {
			s.out.take() // a console showed it when it came, or as it attached
		}
		if w.person {
			s.attached.personCells = append(s.attached.personCells, r.cell)
		}
	}
	s.showCellLocked(r, w, by, code)
}

// watcherOf is the watcher whose cell exec or enqueue starts under ctx.
func watcherOf(ctx context.Context) *watcher {
	w, _ := ctx.Value(watcherKey{}).(*watcher)
	return w
}

// byOf says who starts a cell under ctx, for wire.Event.By.
func byOf(ctx context.Context, w *watcher) string {
	if w != nil && w.person {
		return wire.ByAttach
	}
	if surfaceOf(ctx) == wire.SurfaceMCP {
		return wire.ByAgent
	}
	return ""
}

// showCellLocked shows watchers other than w, the cell's own, that cell r
// of code started.
func (s *Session) showCellLocked(r *run, w *watcher, by, code string) {
	if len(s.attached.watchers) == 0 {
		return
	}
	if len(code) > maxEventCode {
		code = fmt.Sprintf("%s\n# [... %d more bytes of this cell ...]", code[:maxEventCode], len(code)-maxEventCode)
	}
	for _, x := range s.attached.watchers {
		if x != w && x.person {
			x.pushLocked(&wire.Event{Kind: wire.EventCell, Cell: r.cell, Code: code, By: by})
		}
	}
}

// cellFinishedLocked is called as cell r finishes: watchers that only
// looked get its status, value and error (its output came as it was
// written), in one event they share: nobody writes to an event once sent.
func (s *Session) cellFinishedLocked(r *run) {
	if w := r.stream; w != nil {
		w.flushLocked()
		w.holding = w.person
	}
	if r.result == nil {
		return
	}
	var done *wire.Event
	for _, w := range s.attached.watchers {
		if w == r.stream || !w.person {
			continue
		}
		w.flushLocked()
		if done == nil {
			done = &wire.Event{Kind: wire.EventDone, Cell: r.cell, Result: lookedResult(r.result)}
		}
		w.pushLocked(done)
	}
}

// lookedResult is what a console that only looked is told of a finished
// cell: res without the output it saw as it came, and without images.
func lookedResult(res *wire.Result) *wire.Result {
	looked := *res
	looked.Output, looked.Notes, looked.Truncated, looked.TruncatedChars = "", nil, false, 0
	looked.Stdout, looked.Stderr = "", ""
	// Images are the agent's: a console sees what they were.
	looked.Display = make([]wire.Display, len(res.Display))
	for i, d := range res.Display {
		d.Data = nil
		looked.Display[i] = d
	}
	return &looked
}

// personNote says, once, which cells a person typed in a console since the
// last reply to anybody else; empty when none.
func (s *Session) personNote() string {
	s.mu.Lock()
	cells := s.attached.personCells
	s.attached.personCells = nil
	s.mu.Unlock()
	if len(cells) == 0 {
		return ""
	}
	return "someone worked in this session from `replhub attach`: " + cellList(cells)
}
