package hub

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// File transfers: the side that has the file (a session serving "read", a
// session pushing, or a client) sends 8 MiB chunks; the side that writes
// (a session serving "write", a session pulling, or a client) acknowledges
// each one; the sender keeps at most a few unacknowledged. The hub forwards
// one chunk at a time and holds no more than that per transfer. Between
// two sessions, a side that stops reading fails the transfer after
// relayStall (stall.go); the other side's reader never waits longer.

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
func readAhead(f *os.File, stop <-chan struct{}) <-chan readChunk {
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
func (h *Hub) sessionTransfer(from *Session, f *proto.Req) {
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
	cancelled, stop, err := from.runningAs(f.ID)
	if err != nil {
		fail(err)
		return
	}
	defer stop()
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
	first, ok := op.next(sendServe(target, serve, op))
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

// clientTransfer serves a client's push or pull (replhub push/pull). The
// hub reads or writes the local file itself, req.Local: it runs as the
// client's user on the client's machine, and so no byte goes through the
// client. The client gets progress replies, then the last word; when its
// connection closes (next reports it), the transfer stops.
func (h *Hub) clientTransfer(req wire.Request, next func() (*wire.Request, bool), send func(wire.Reply) error) wire.Reply {
	if !filepath.IsAbs(req.Local) {
		return errReply(wire.CodeBadRequest, "hub: a transfer needs the local file's absolute path")
	}
	target, err := h.lookup(req.Name, wire.AdviceFor(req.Surface))
	if err != nil {
		return replyErr(err)
	}
	var src *os.File
	var size int64
	var mode os.FileMode
	kind, title := "read", fmt.Sprintf("pull to %s on the command line's machine: %s", req.Local, req.Path)
	if req.Op == wire.OpPush {
		kind, title = "write", fmt.Sprintf("push from %s on the command line's machine: %s", req.Local, req.Path)
		if src, err = os.Open(req.Local); err != nil {
			return errReply(wire.CodeBadRequest, "%v", err)
		}
		defer src.Close()
		fi, err := src.Stat()
		if err != nil {
			return errReply(wire.CodeBadRequest, "%v", err)
		}
		if fi.IsDir() {
			return errReply(wire.CodeBadRequest, "%s is a folder: push one file at a time (tar it first)", req.Local)
		}
		size, mode = fi.Size(), fi.Mode().Perm()
	}
	op, err := h.beginServe(target, kind, "the command line")
	if err != nil {
		return errReply(wire.CodeBusy, "%v", err)
	}
	// The client going away ends the transfer.
	gone := make(chan struct{})
	go func() {
		for {
			if _, ok := next(); !ok {
				close(gone)
				return
			}
		}
	}()
	var mu sync.Mutex
	var done int64
	var lastProgress time.Time
	report := func(n int64, total int64) {
		mu.Lock()
		done += n
		d := done
		now := time.Now()
		due := now.Sub(lastProgress) > 100*time.Millisecond || d == total
		if due {
			lastProgress = now
		}
		mu.Unlock()
		if due {
			send(wire.Reply{Stream: &wire.Stream{Done: d, Size: total}})
		}
	}

	var sink *Sink
	var sinkErr error
	sinkReady := make(chan struct{})  // closed once sink is set (or will not be)
	sinkFailed := make(chan struct{}) // closed when writing the file failed
	acks := make(chan int64, 64)
	var overran atomic.Bool // the session sent past its window
	total := size
	enqueue, flush := queued(func(c *proto.Chunk) {
		<-sinkReady
		if c.EOF || sink == nil {
			proto.PutChunk(c.Data)
			return
		}
		failed := sinkErr != nil
		if !failed {
			sinkErr = sink.Write(c.Data)
		}
		n := int64(len(c.Data))
		proto.PutChunk(c.Data)
		if sinkErr != nil {
			if !failed {
				close(sinkFailed)
				target.send(&proto.Cancel{Sid: op.sid})
			}
			return
		}
		target.send(&proto.Ack{Sid: op.sid, Seq: c.Seq})
		report(n, total)
	}, func() {
		overran.Store(true)
		target.send(&proto.Cancel{Sid: op.sid})
	})
	defer flush()
	op.setSinks(enqueue, func(a *proto.Ack) {
		select {
		case acks <- a.Seq:
		default:
		}
	})
	h.transcribeNote(target, title, "")
	serve := &proto.Serve{Sid: op.sid, Kind: kind, From: "the command line", Path: req.Path}
	if kind == "write" {
		serve.Size, serve.Mode = size, uint32(mode)
	}
	t0 := time.Now()
	first, _ := op.next(target.send(serve))
	if first == nil || !first.OK {
		close(sinkReady)
		death := h.endServe(target, op)
		if first == nil {
			return replyErr(h.diedServing(target, req.Op, death))
		}
		return errReply(wire.CodeBadRequest, "%s", first.Error)
	}
	stopped := func() wire.Reply {
		target.send(&proto.Cancel{Sid: op.sid})
		select {
		case <-op.done:
		case <-time.After(10 * time.Second):
			h.log.Warn("transfer not stopped", "session", target.name)
		}
		h.endServe(target, op)
		if sink != nil {
			sink.Abort()
		}
		return wire.Reply{}
	}
	if kind == "read" {
		total = first.Size
		sink, err = NewSink(req.Local, os.FileMode(first.Mode))
		close(sinkReady)
		if err != nil {
			stopped()
			return errReply(wire.CodeBadRequest, "%v", err)
		}
	} else {
		close(sinkReady)
		// Send the file, at most wire.Window chunks unacknowledged; the next
		// chunk is read while this one is sent.
		chunks := readAhead(src, gone)
		acked := int64(-1)
		for seq := int64(0); ; seq++ {
			for seq-acked > wire.Window {
				select {
				case a := <-acks:
					acked = max(acked, a)
				case <-gone:
					return stopped()
				case last := <-op.done:
					op.done <- last
					goto wait
				}
			}
			var c readChunk
			select {
			case c = <-chunks:
			case <-gone:
				return stopped()
			}
			n, rerr := len(c.b), c.err
			if n > 0 {
				target.send(&proto.Chunk{Sid: op.sid, Seq: seq, Data: c.b})
				report(int64(n), total)
			}
			proto.PutChunk(c.b)
			if rerr == io.EOF {
				target.send(&proto.Chunk{Sid: op.sid, Seq: seq + 1, EOF: true})
				break
			}
			if rerr != nil {
				stopped()
				return errReply(wire.CodeBadRequest, "reading %s: %v", req.Local, rerr)
			}
		}
	}
wait:
	var last *proto.Served
	select {
	case last = <-op.done:
	case <-gone:
		return stopped()
	case <-sinkFailed:
		// The session was asked to stop; it ends between two chunks.
		select {
		case last = <-op.done:
		case <-gone:
			return stopped()
		case <-time.After(10 * time.Second):
			h.log.Warn("transfer not stopped", "session", target.name)
			last = &proto.Served{Error: "the session did not stop sending"}
		}
	}
	flush()
	death := h.endServe(target, op)
	if last == nil {
		if sink != nil {
			sink.Abort()
		}
		return replyErr(h.diedServing(target, req.Op, death))
	}
	if overran.Load() {
		if sink != nil {
			sink.Abort()
		}
		return errReply(wire.CodeBadRequest, "session '%s' sent more of %s than it was asked for; the %s is stopped", target.name, req.Path, req.Op)
	}
	if !last.OK || sinkErr != nil {
		if sink != nil {
			sink.Abort()
		}
		if sinkErr != nil {
			return errReply(wire.CodeBadRequest, "writing %s: %v", req.Local, sinkErr)
		}
		return errReply(wire.CodeBadRequest, "%s", last.Error)
	}
	if sink != nil {
		if err := sink.Finish(); err != nil {
			return errReply(wire.CodeBadRequest, "writing %s: %v", req.Local, err)
		}
	}
	if req.Op == wire.OpPush {
		size = last.Size
	} else {
		size = first.Size
	}
	d := time.Since(t0)
	verb, prep := "pushed", "to"
	if req.Op == wire.OpPull {
		verb, prep = "pulled", "from"
	}
	return wire.Reply{Message: fmt.Sprintf("%s %d bytes %s session '%s' in %s (%.1f MB/s)",
		verb, size, prep, target.name, wire.Duration(d.Seconds()), float64(size)/1e6/max(d.Seconds(), 1e-6))}
}
