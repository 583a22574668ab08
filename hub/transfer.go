package hub

import (
	"fmt"
	"sync"
	"time"

	"github.com/replhub/replhub/wire"
)

// File transfers: the side that has the file (a session serving "read", a
// session pushing, or a client) sends 8 MiB chunks; the side that writes
// (a session serving "write", a session pulling, or a client) acknowledges
// each one; the sender keeps at most a few unacknowledged. The hub forwards
// one chunk at a time and holds no more than that per transfer.

// queued runs sink on its own goroutine, in order, with up to wire.Window
// frames waiting: reading the next chunk from one side then overlaps with
// writing this one to the other. stop waits until all are written.
func queued(sink func(*frame)) (enqueue func(*frame), stop func()) {
	ch := make(chan *frame, wire.Window)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for f := range ch {
			sink(f)
		}
	}()
	var once sync.Once
	return func(f *frame) { ch <- f }, func() { once.Do(func() { close(ch) }); <-done }
}

// sessionTransfer serves a pull or push that code in session from asked
// for, with a session named f.Target on the other end.
func (h *Hub) sessionTransfer(from *Session, f *frame) {
	fail := func(err error) {
		from.send(map[string]any{"op": "reply", "id": f.ID, "ok": false, "error": errorMessage(err)}, nil)
	}
	if f.Target == from.name {
		fail(fmt.Errorf("session '%s' cannot %s from itself: use open() there", from.name, f.Kind))
		return
	}
	target, err := h.lookup(f.Target)
	if err != nil {
		fail(err)
		return
	}
	kind, title := "read", fmt.Sprintf("pull from '%s': %s", from.name, f.Path)
	if f.Kind == "push" {
		kind, title = "write", fmt.Sprintf("push from '%s': %s (%d bytes)", from.name, f.Path, f.Size)
	}
	op, err := h.beginServe(target, kind, from.name)
	if err != nil {
		fail(err)
		return
	}
	from.link(f.ID, target, op)
	defer from.unlink(f.ID)
	// The end of a pull is told only once the target is free again (below),
	// so that the caller's next request never finds it still busy.
	enqueue, flush := queued(func(c *frame) {
		if c.EOF {
			return
		}
		from.send(map[string]any{"op": "chunk", "id": f.ID, "seq": c.Seq}, c.data)
		wire.PutChunk(c.data)
	})
	defer flush()
	op.chunkSink = enqueue
	op.ackSink = func(a *frame) { from.send(map[string]any{"op": "ack", "id": f.ID, "seq": a.Seq}, nil) }
	h.transcribeNote(target, title, "")
	serve := map[string]any{"op": "serve", "sid": op.sid, "kind": kind, "from": from.name, "path": f.Path}
	if kind == "write" {
		serve["size"], serve["mode"] = f.Size, f.Mode
	}
	first := awaitServed(target, op, target.send(serve, nil))
	if first == nil || !first.OK {
		death := h.endServe(target, op)
		if first == nil {
			fail(h.diedServing(target, f.Kind, death))
		} else {
			fail(fmt.Errorf("%s", first.errorText()))
		}
		return
	}
	from.send(map[string]any{"op": "reply", "id": f.ID, "ok": true, "size": first.Size, "mode": first.Mode}, nil)
	last := <-op.done
	flush() // every chunk reaches the caller before the last word
	death := h.endServe(target, op)
	switch {
	case last == nil && f.Kind == "pull":
		from.send(map[string]any{"op": "chunk", "id": f.ID, "eof": true, "error": h.diedServing(target, "pull", death).Error()}, nil)
	case last == nil:
		from.send(map[string]any{"op": "chunk", "id": f.ID, "done": true, "ok": false, "error": h.diedServing(target, "push", death).Error()}, nil)
	case f.Kind == "push":
		from.send(map[string]any{"op": "chunk", "id": f.ID, "done": true, "ok": last.OK, "error": last.errorText()}, nil)
	case !last.OK:
		from.send(map[string]any{"op": "chunk", "id": f.ID, "eof": true, "error": last.errorText()}, nil)
	default:
		from.send(map[string]any{"op": "chunk", "id": f.ID, "eof": true}, nil)
	}
}

// clientTransfer serves a client's push or pull (replhub push/pull). The
// client's chunks and acks arrive as further request lines through next;
// the hub's answers go out through send.
func (h *Hub) clientTransfer(req wire.Request, next func() (*wire.Request, bool), send func(wire.Reply) error) wire.Reply {
	target, err := h.lookup(req.Name)
	if err != nil {
		return replyErr(err)
	}
	st := req.Stream
	if st == nil {
		st = &wire.Stream{}
	}
	kind, title := "read", fmt.Sprintf("pull to the command line: %s", req.Path)
	if req.Op == wire.OpPush {
		kind, title = "write", fmt.Sprintf("push from the command line: %s (%d bytes)", req.Path, st.Size)
	}
	op, err := h.beginServe(target, kind, "the command line")
	if err != nil {
		return errReply(wire.CodeBusy, "%v", err)
	}
	// abort stops the target's side when the client went away; a target
	// that does not stop within 10 s is left to finish on its own.
	abort := func() {
		target.send(map[string]any{"op": "interrupt"}, nil)
		select {
		case <-op.done:
		case <-time.After(10 * time.Second):
			h.log.Warn("transfer not stopped", "session", target.name)
		}
		h.endServe(target, op)
	}
	enqueue, flush := queued(func(c *frame) {
		send(wire.Reply{Stream: &wire.Stream{Seq: c.Seq, Data: c.data, EOF: c.EOF}})
		wire.PutChunk(c.data)
	})
	defer flush()
	op.chunkSink = enqueue
	op.ackSink = func(a *frame) { send(wire.Reply{Stream: &wire.Stream{Seq: a.Seq, Ack: true}}) }
	h.transcribeNote(target, title, "")
	serve := map[string]any{"op": "serve", "sid": op.sid, "kind": kind, "from": "the command line", "path": req.Path}
	if kind == "write" {
		serve["size"], serve["mode"] = st.Size, st.Mode
	}
	t0 := time.Now()
	first := awaitServed(target, op, target.send(serve, nil))
	if first == nil || !first.OK {
		death := h.endServe(target, op)
		if first == nil {
			return replyErr(h.diedServing(target, req.Op, death))
		}
		return errReply(wire.CodeBadRequest, "%s", first.errorText())
	}
	if err := send(wire.Reply{Stream: &wire.Stream{Ready: true, Size: first.Size, Mode: first.Mode}}); err != nil {
		abort()
		return wire.Reply{}
	}
	// The client's lines: chunks (push) or acks (pull), until its eof
	// (push) or the target's last frame (pull).
	lines := make(chan *wire.Request)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			r, ok := next()
			if !ok {
				close(lines)
				return
			}
			select {
			case lines <- r:
			case <-stop:
				return
			}
		}
	}()
	var size int64
	for {
		select {
		case r, ok := <-lines:
			if !ok {
				abort()
				return wire.Reply{}
			}
			if r.Stream == nil {
				continue
			}
			if r.Stream.Ack {
				target.send(map[string]any{"op": "ack", "sid": op.sid, "seq": r.Stream.Seq}, nil)
				continue
			}
			header := map[string]any{"op": "chunk", "sid": op.sid, "seq": r.Stream.Seq}
			if r.Stream.EOF {
				header["eof"] = true
			}
			size += int64(len(r.Stream.Data))
			target.send(header, r.Stream.Data)
			wire.PutChunk(r.Stream.Data)
		case last := <-op.done:
			flush()
			death := h.endServe(target, op)
			if last == nil {
				return replyErr(h.diedServing(target, req.Op, death))
			}
			if !last.OK {
				return errReply(wire.CodeBadRequest, "%s", last.errorText())
			}
			if req.Op == wire.OpPush {
				size = last.Size
			} else {
				size = first.Size
			}
			d := time.Since(t0)
			return wire.Reply{Message: fmt.Sprintf("%s %d bytes %s session '%s' in %s (%.1f MB/s)",
				map[string]string{wire.OpPush: "pushed", wire.OpPull: "pulled"}[req.Op], size,
				map[string]string{wire.OpPush: "to", wire.OpPull: "from"}[req.Op], target.name,
				wire.Duration(d.Seconds()), float64(size)/1e6/max(d.Seconds(), 1e-6))}
		}
	}
}
