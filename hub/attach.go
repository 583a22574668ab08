package hub

import (
	"context"
	"fmt"
	"sync"

	"github.com/replhub/replhub/wire"
)

// The requests of attach (wire.OpAttach) and of an exec that streams
// (Request.Stream); the watchers they use are in watch.go.

// announce tells a streaming exec's client, before its cell's output, that
// the exec created the session, and of its predecessor's death; it
// reports whether it did, and the reply then leaves them out.
func announce(ctx context.Context, s *Session, created bool, previous string) bool {
	w, _ := ctx.Value(watcherKey{}).(*watcher)
	if w == nil || (!created && previous == "") {
		return false
	}
	head := wire.Result{Previous: previous}
	if created {
		info := s.snapshot()
		head.Created = &info
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return w.pushLocked(&wire.Event{Kind: wire.EventOut, Text: head.Text()})
}

// execStreaming runs an exec whose client reads the cell's output as it
// comes (Request.Stream): out events, then the reply, plain when asked
// (package early's call on a terminal).
func (h *Hub) execStreaming(ctx context.Context, req wire.Request, progress func(*wire.Progress), send func(wire.Reply) error) wire.Reply {
	w := newWatcher(false)
	pumped := make(chan struct{})
	go func() {
		defer close(pumped)
		for ev := range w.events {
			send(wire.Reply{Event: ev})
		}
	}()
	res, err := h.Exec(withWatcher(ctx, w), req, progress)
	w.close()
	<-pumped
	if err != nil {
		return replyErr(err)
	}
	return resultReply(req, res, res.ExitCode())
}

// attach serves a console on session req.Name until the client goes away
// or the session ends (see wire.OpAttach).
func (h *Hub) attach(ctx context.Context, req wire.Request, send func(wire.Reply) error, next func() (*wire.Request, bool)) wire.Reply {
	adv := wire.AdviceFor(req.Surface)
	s, err := h.lookup(req.Name, adv)
	if err != nil {
		return replyErr(err)
	}
	w := newWatcher(true)
	defer w.close()
	info := s.snapshot()
	s.mu.Lock()
	if s.state == stateDead {
		s.mu.Unlock()
		return errReply(wire.CodeDead, "session '%s' is dead: %s", s.name, s.death)
	}
	hello := &wire.Event{Kind: wire.EventAttached, Info: &info, Text: s.out.peek().text}
	if r := s.cur; r != nil && !r.isFinished() {
		hello.Cell = r.cell
	}
	s.watchLocked(w)
	s.mu.Unlock()
	if send(wire.Reply{Event: hello}) != nil {
		return wire.Reply{}
	}

	reqs := make(chan *wire.Request)
	go func() {
		defer close(reqs)
		for {
			r, ok := next()
			if !ok {
				return
			}
			select {
			case reqs <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	// Cells typed here run on goroutines of their own, so that the
	// console's interrupts and the session's events go on meanwhile.
	var cells sync.WaitGroup
	defer cells.Wait()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for {
		select {
		case ev := <-w.events:
			if send(wire.Reply{Event: ev}) != nil {
				return wire.Reply{}
			}
		case r, ok := <-reqs:
			if !ok {
				return wire.Reply{}
			}
			switch r.Op {
			case wire.OpExec:
				cells.Add(1)
				go func() {
					defer cells.Done()
					s.attachCell(cctx, w, r.Code, adv)
				}()
			case wire.OpInterrupt:
				// Only the console's own cell, running or queued: a Ctrl-C
				// that comes as it ends must not stop the agent's next one.
				cell := s.ownCell(w)
				if cell == 0 {
					continue
				}
				if _, err := s.interruptCell(adv, cell); err != nil {
					s.mu.Lock()
					w.pushLocked(&wire.Event{Kind: wire.EventRefused, Text: err.Error()})
					s.mu.Unlock()
				}
			}
		case <-s.exited:
			for len(w.events) > 0 {
				send(wire.Reply{Event: <-w.events})
			}
			send(wire.Reply{Event: &wire.Event{Kind: wire.EventDead, Text: s.deathText()}})
			return wire.Reply{Message: fmt.Sprintf("session '%s' ended", s.name)}
		case <-ctx.Done():
			return wire.Reply{}
		}
	}
}

// attachCell runs code typed in console w, at once or, in a busy session,
// from the queue, and hands w its reply; it waits for the cell as long as
// it runs.
func (s *Session) attachCell(ctx context.Context, w *watcher, code string, adv wire.Advice) {
	tell := func(ev *wire.Event) {
		s.mu.Lock()
		defer s.mu.Unlock()
		held := w.held
		w.holding, w.held = false, nil
		w.pushLocked(ev)
		for _, h := range held {
			w.pushLocked(h)
		}
	}
	// Queued behind a running cell (the agent's), it runs when that ends.
	res, err := s.enqueue(withWatcher(ctx, w), code, MaxTimeout, false, ReplyCap, nil, adv)
	if err == nil && res != nil && res.Status == wire.StatusQueued {
		s.mu.Lock()
		w.pushLocked(&wire.Event{Kind: wire.EventQueued, Cell: res.Cell, Text: fmt.Sprintf(
			"cell %d is queued behind the running cell (%d ahead of it); it runs when that ends, Ctrl-C takes it out", res.Cell, res.Ahead)})
		s.mu.Unlock()
		res, err = s.wait(ctx, MaxTimeout, res.Cell, ReplyCap, nil)
	}
	for err == nil && res != nil && res.Status == wire.StatusRunning {
		var more *wire.Result
		more, err = s.wait(ctx, MaxTimeout, res.Cell, ReplyCap, nil)
		if more != nil {
			more.Output = res.Output + more.Output
			more.Notes = append(res.Notes, more.Notes...)
		}
		res = more
	}
	if err != nil {
		tell(&wire.Event{Kind: wire.EventRefused, Text: err.Error()})
		return
	}
	if res != nil {
		tell(&wire.Event{Kind: wire.EventDone, Cell: res.Cell, Mine: true, Result: res})
	}
}

// ownCell is console w's cell, running or queued; 0 when it has none.
func (s *Session) ownCell(w *watcher) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.cur; r != nil && r.stream == w && !r.isFinished() {
		return r.cell
	}
	for _, r := range s.queue {
		if r.stream == w {
			return r.cell
		}
	}
	return 0
}
