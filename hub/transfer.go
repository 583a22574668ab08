package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// File transfers: the side that has the file (a session serving "read", a
// session pushing, or a client) sends 8 MiB chunks; the side that writes
// (a session serving "write", a session pulling, or a client) acknowledges
// each one; the sender keeps at most a few unacknowledged. The hub forwards
// one chunk at a time and holds no more than that per transfer. A side
// that stops reading, or a target that never gives its first answer,
// fails the transfer after relayStall (stall.go); the other side's reader
// never waits longer.

// queued runs sink on its own goroutine, in order: reading the next chunk
// from one side then overlaps with writing this one to the other. stop
// waits until all are written.
//
// A sender keeps at most wire.Window chunks, and its end, unacknowledged,
// so the queue never fills for one that keeps to it. It never blocks the
// reader that enqueues either: a chunk past queueRoom (a worker that sends
// past its window) is dropped, with all after it, and full is called.
func queued(sink func(*proto.Chunk), full func()) (enqueue func(*proto.Chunk), stop func()) {
	ch := make(chan *proto.Chunk, queueRoom)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for f := range ch {
			sink(f)
		}
	}()
	// A chunk that comes after stop (a worker that sends past its end)
	// is dropped, not sent on the closed channel.
	var mu sync.Mutex
	closed, over := false, false
	enqueue = func(f *proto.Chunk) {
		mu.Lock()
		defer mu.Unlock()
		if !closed && !over {
			select {
			case ch <- f:
				return
			default:
				over = true
				go full()
			}
		}
		proto.PutChunk(f.Data)
	}
	stop = func() {
		mu.Lock()
		if !closed {
			closed = true
			close(ch)
		}
		mu.Unlock()
		<-done
	}
	return enqueue, stop
}

// queueRoom is a queue's room: the window, the end, and one that the sink
// has written but not yet taken off (its ack may come first).
const queueRoom = wire.Window + 2

// readChunk is one chunk of a file, or the error that ended it (io.EOF at
// the end, with the last bytes).
type readChunk struct {
	b   []byte
	err error
}

// readAhead reads f in chunks on its own goroutine, one ahead of the
// reader, until the end, an error, or stop.
func readAhead(f io.Reader, stop <-chan struct{}) <-chan readChunk {
	ch := make(chan readChunk, 1)
	go func() {
		for {
			b := proto.GetChunk(wire.ChunkSize)
			n, err := io.ReadFull(f, b)
			if err == io.ErrUnexpectedEOF {
				err = io.EOF
			}
			select {
			case ch <- readChunk{b[:n], err}:
			case <-stop:
				proto.PutChunk(b)
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// sessionTransfer serves a pull or push that code in session from asked
// for, with a session named f.Target on the other end.
func (h *Hub) sessionTransfer(cancelled context.Context, from *Session, f *proto.Req) {
	fail := func(err error) {
		from.send(&proto.Reply{ID: f.ID, Error: errorMessage(err)})
	}
	if f.Target == from.name {
		fail(fmt.Errorf("session '%s' cannot %s from itself: use open() there", from.name, f.Kind))
		return
	}
	target, err := h.lookup(f.Target, wire.Advice{})
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
	op.what = f.Kind
	from.link(f.ID, target, op, cancelled)
	defer from.unlink(f.ID)
	// The end of a pull is told only once the target is free again (below),
	// so that the caller's next request never finds it still busy.
	enqueue, flush := queued(func(c *proto.Chunk) {
		if c.EOF {
			proto.PutChunk(c.Data)
			return
		}
		op.relay(from, &proto.Chunk{ID: f.ID, Seq: c.Seq, Data: c.Data})
	}, op.overrun)
	op.setSinks(enqueue, func(a *proto.Ack) { op.relay(from, &proto.Ack{ID: f.ID, Seq: a.Seq}) })
	h.transcribeNote(target, title, "")
	serve := &proto.Serve{Sid: op.sid, Kind: kind, From: from.name, Path: f.Path}
	if kind == "write" {
		serve.Size, serve.Mode = f.Size, f.Mode
	}
	// The target answers twice (ready, then its last word), or once when
	// it refuses.
	answered := false
	isLast := func(s *proto.Served) bool {
		last := answered || !s.OK
		answered = true
		return last
	}
	first, ok := op.firstAnswer(sendServe(target, serve, op, nil), f.Kind, nil)
	if ok && (first == nil || !first.OK) {
		flush()
		death := h.endServe(target, op)
		switch err := op.err(); {
		case err != nil: // the link failed first: the serve may never have gone
			fail(err)
		case first == nil:
			fail(h.diedServing(target, f.Kind, death))
		default:
			fail(errors.New(first.Error))
		}
		return
	}
	last, replied := first, false
	if ok {
		answered = true
		replied = op.relay(from, &proto.Reply{ID: f.ID, OK: true, Size: first.Size, Mode: first.Mode})
		last, ok = op.next(nil)
	}
	end := &proto.Chunk{ID: f.ID, EOF: f.Kind == "pull", Done: f.Kind == "push"}
	if err := op.err(); err != nil {
		h.finishLater(target, op, last, ok, isLast, flush)
		if !replied {
			fail(err) // the caller still waits for its first answer
			return
		}
		end.Error = err.Error()
		from.send(end)
		return
	}
	flush() // every chunk reaches the caller before the last word
	death := h.endServe(target, op)
	switch {
	case last == nil:
		end.Error = h.diedServing(target, f.Kind, death).Error()
	case !last.OK:
		end.Error = last.Error
	default:
		end.OK = true
	}
	from.send(end)
}
