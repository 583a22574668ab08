package hub

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/replhub/replhub/internal/atomicfile"
	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// clientXfer is a client's push or pull (replhub push/pull). The hub
// reads or writes the local file itself, req.Local: it runs as the
// client's user on the client's machine, and so no byte goes through the
// client. The client gets progress replies, then the last word; when its
// connection closes, the transfer stops.
//
// Every frame to the target goes through op.relay, as between two
// sessions: a target that stops reading fails the transfer after
// relayStall, and it stays busy until it says its last word or dies
// (finishLater), so that no cell goes to it meanwhile.
type clientXfer struct {
	h      *Hub
	req    wire.Request
	send   func(wire.Reply) error
	target *Session
	op     *serveOp
	kind   string // "read" (a pull) or "write" (a push)
	title  string
	gone   chan struct{} // closed when the client went away

	// A push's file, what is read of it (the file, or its bytes read
	// already: wholeIfSmall), and its size and mode.
	src  *os.File
	in   io.Reader
	size int64
	mode os.FileMode

	// A pull's file, written by the chunk queue once sinkReady is closed.
	sink       *Sink
	sinkErr    error
	sinkReady  chan struct{} // closed once sink is set (or will not be)
	sinkFailed chan struct{} // closed when writing the file failed
	overran    atomic.Bool   // the session sent past its window
	flush      func()        // waits until the queued chunks are written

	acks     chan int64 // a push's acks from the target
	answered bool       // the target's first answer came (isLast)

	mu           sync.Mutex // progress
	done, total  int64
	lastProgress time.Time
}

// clientTransfer serves a client's push or pull; next reports the client's
// connection ending.
func (h *Hub) clientTransfer(req wire.Request, next func() (*wire.Request, bool), send func(wire.Reply) error) wire.Reply {
	// The client's going is watched from the start: a small file is read
	// whole before the transfer, and one that waits is closed then.
	gone := make(chan struct{})
	go func() {
		for {
			if _, ok := next(); !ok {
				close(gone)
				return
			}
		}
	}()
	x, refused := h.newClientXfer(req, send, gone)
	if refused != nil {
		return *refused
	}
	if x.src != nil {
		defer x.src.Close()
	}
	return x.run()
}

// newClientXfer checks req, opens a push's file and makes the target busy
// serving it; a refusal is the reply. gone closes when the client goes.
func (h *Hub) newClientXfer(req wire.Request, send func(wire.Reply) error, gone chan struct{}) (*clientXfer, *wire.Reply) {
	refuse := func(r wire.Reply) (*clientXfer, *wire.Reply) { return nil, &r }
	if !filepath.IsAbs(req.Local) {
		return refuse(errReply(wire.CodeBadRequest, "hub: a transfer needs the local file's absolute path"))
	}
	if req.Path == "" {
		return refuse(errReply(wire.CodeBadRequest, "hub: a transfer needs the path of the file in the session: it is empty"))
	}
	target, err := h.lookup(req.Name, wire.AdviceFor(req.Surface))
	if err != nil {
		return refuse(replyErr(err))
	}
	x := &clientXfer{h: h, req: req, send: send, target: target, gone: gone,
		kind:      "read",
		title:     fmt.Sprintf("pull to %s on the command line's machine: %s", req.Local, req.Path),
		sinkReady: make(chan struct{}), sinkFailed: make(chan struct{}), acks: make(chan int64, 64)}
	if req.Op == wire.OpPush {
		x.kind, x.title = "write", fmt.Sprintf("push from %s on the command line's machine: %s", req.Local, req.Path)
		var fi os.FileInfo
		if x.src, fi, err = openToPush(req.Local); err != nil {
			return refuse(errReply(wire.CodeBadRequest, "%v", err))
		}
		x.mode = fi.Mode().Perm()
		if x.in, x.size, err = wholeIfSmall(x.src, fi.Size(), gone); err != nil {
			x.src.Close()
			return refuse(errReply(wire.CodeBadRequest, "reading %s: %v", req.Local, err))
		}
	}
	x.total = x.size
	if x.op, err = h.beginServe(target, x.kind, "the command line"); err != nil {
		if x.src != nil {
			x.src.Close()
		}
		return refuse(errReply(wire.CodeBusy, "%v", err))
	}
	x.op.what = string(req.Op)
	return x, nil
}

// openToPush opens a push's local file, a regular file. The open does not
// block on a FIFO (O_NONBLOCK), which would hold the hub's goroutine for
// good, and the file stays nonblocking: a regular file's reads ignore it,
// but one that only says it is regular and waits for what it gives
// (/proc/kmsg, a tracing pipe) is read through the runtime's poller, so
// that closing it at the transfer's end ends a read that waits, where a
// blocking read would hold a thread and the file as long as nothing came.
func openToPush(path string) (*os.File, os.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err == nil {
		err = atomicfile.NotToPush(path, fi)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// smallWhole is the size up to which a file is read whole before its
// transfer, so that the size announced is what it holds.
const smallWhole = 64 << 10

// wholeIfSmall is what a transfer reads of f, whose size says size, and
// the size to announce: a file of up to smallWhole bytes is read whole
// first. Its size may say nothing of what it holds: a sysfs file says 4096
// for a line of 18, and a copy that stops short of its size has failed.
// (/proc's say 0, which means any size; a file that grew past smallWhole
// meanwhile is read again from its start, its size a floor.) A file that
// waits for what it gives holds that read until gone closes: f is closed
// then, which ends the poller's wait.
func wholeIfSmall(f *os.File, size int64, gone <-chan struct{}) (io.Reader, int64, error) {
	if size <= 0 || size > smallWhole {
		return f, size, nil
	}
	read := make(chan struct{})
	defer close(read)
	go func() {
		select {
		case <-gone:
			f.Close()
		case <-read:
		}
	}()
	b := make([]byte, smallWhole+1)
	n, err := io.ReadFull(f, b)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return bytes.NewReader(b[:n]), int64(n), nil
	case err != nil:
		return nil, 0, err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, 0, err
	}
	return f, size, nil
}

// run serves the transfer to its end.
func (x *clientXfer) run() wire.Reply {
	enqueue, flush := queued(x.write, func() {
		x.overran.Store(true)
		x.op.cancel()
	})
	x.flush = flush
	defer flush()
	x.op.setSinks(enqueue, func(a *proto.Ack) {
		select {
		case x.acks <- a.Seq:
		default:
		}
	})
	x.h.transcribeNote(x.target, x.title, "")
	serve := &proto.Serve{Sid: x.op.sid, Kind: x.kind, From: "the command line", Path: x.req.Path}
	if x.kind == "write" {
		serve.Size, serve.Mode = x.size, uint32(x.mode)
	}
	t0 := time.Now()
	first, ok := x.op.firstAnswer(sendServe(x.target, serve, x.op, nil), string(x.req.Op), x.gone)
	if !ok {
		close(x.sinkReady)
		return x.linkFailed()
	}
	if first == nil || !first.OK {
		close(x.sinkReady)
		death := x.h.endServe(x.target, x.op)
		if first == nil {
			return replyErr(x.h.diedServing(x.target, string(x.req.Op), death))
		}
		return errReply(wire.CodeBadRequest, "%s", x.servedError(first.Error))
	}
	x.answered = true
	if x.kind == "read" {
		var err error
		x.total = first.Size
		x.sink, err = NewSink(x.req.Local, os.FileMode(first.Mode))
		close(x.sinkReady)
		if err != nil {
			x.stopped()
			return errReply(wire.CodeBadRequest, "%v", err)
		}
	} else {
		close(x.sinkReady)
		if r := x.sendFile(); r != nil {
			return *r
		}
	}
	last, r := x.wait()
	if r != nil {
		return *r
	}
	return x.finish(first, last, t0)
}

// isLast says whether s is the target's last word: it answers twice
// (ready, then its last word), or once when it refuses.
func (x *clientXfer) isLast(s *proto.Served) bool {
	last := x.answered || !s.OK
	x.answered = true
	return last
}

// report sends the client a progress reply at most every 100 ms, and at
// the end.
func (x *clientXfer) report(n int64) {
	x.mu.Lock()
	x.done += n
	d, total := x.done, x.total
	now := time.Now()
	due := now.Sub(x.lastProgress) > 100*time.Millisecond || d == total
	if due {
		x.lastProgress = now
	}
	x.mu.Unlock()
	if due {
		x.send(wire.Reply{Stream: &wire.Stream{Done: d, Size: total}})
	}
}

// write writes a pulled chunk to the local file and acknowledges it; it
// runs on the chunk queue's goroutine.
func (x *clientXfer) write(c *proto.Chunk) {
	<-x.sinkReady
	if c.EOF || x.sink == nil {
		proto.PutChunk(c.Data)
		return
	}
	failed := x.sinkErr != nil
	if !failed {
		x.sinkErr = x.sink.Write(c.Data)
	}
	n := int64(len(c.Data))
	proto.PutChunk(c.Data)
	if x.sinkErr != nil {
		if !failed {
			close(x.sinkFailed)
			x.op.cancel()
		}
		return
	}
	x.op.relay(x.target, &proto.Ack{Sid: x.op.sid, Seq: c.Seq})
	x.report(n)
}

// sendFile sends a push's file, at most wire.Window chunks unacknowledged;
// the next chunk is read while this one is sent. A reply ends the
// transfer there; nil goes on to the target's last word.
func (x *clientXfer) sendFile() *wire.Reply {
	quit := make(chan struct{})
	defer close(quit)
	chunks := readAhead(x.in, quit)
	// relay sends m to the target; false when the link failed (a stall):
	// a target that died says so on op.done.
	relay := func(m proto.Msg) bool {
		return x.op.relay(x.target, m) || x.op.err() == nil
	}
	fail := func(r wire.Reply) *wire.Reply { return &r }
	acked := int64(-1)
	for seq := int64(0); ; seq++ {
		for seq-acked > wire.Window {
			select {
			case a := <-x.acks:
				acked = max(acked, a)
			case <-x.gone:
				return fail(x.stopped())
			case <-x.op.failed:
				return fail(x.linkFailed())
			case last := <-x.op.done:
				x.op.done <- last // the target's last word: wait takes it
				return nil
			}
		}
		var c readChunk
		select {
		case c = <-chunks:
		case <-x.gone:
			return fail(x.stopped())
		}
		n, rerr := len(c.b), c.err
		if n == 0 {
			proto.PutChunk(c.b)
		} else if !relay(&proto.Chunk{Sid: x.op.sid, Seq: seq, Data: c.b}) {
			return fail(x.linkFailed())
		} else {
			x.report(int64(n))
		}
		if rerr == io.EOF {
			if !relay(&proto.Chunk{Sid: x.op.sid, Seq: seq + 1, EOF: true}) {
				return fail(x.linkFailed())
			}
			return nil
		}
		if rerr != nil {
			x.stopped()
			return fail(errReply(wire.CodeBadRequest, "reading %s: %v", x.req.Local, rerr))
		}
	}
}

// wait waits for the target's last word; a reply ends the transfer there.
func (x *clientXfer) wait() (*proto.Served, *wire.Reply) {
	fail := func(r wire.Reply) (*proto.Served, *wire.Reply) { return nil, &r }
	sinkFailed := x.sinkFailed
	var deadline <-chan time.Time
	for {
		select {
		case last := <-x.op.done:
			return last, nil
		case <-x.op.target.exited:
			return x.op.answer(), nil
		case <-x.gone:
			return fail(x.stopped())
		case <-x.op.failed:
			return fail(x.linkFailed())
		case <-sinkFailed:
			// The session was asked to stop; it ends between two chunks.
			sinkFailed, deadline = nil, time.After(10*time.Second)
		case <-deadline:
			x.h.log.Warn("transfer not stopped", "session", x.target.name)
			x.stopped()
			return fail(errReply(wire.CodeBadRequest, "writing %s: %v (and session '%s' did not stop sending)", x.req.Local, x.sinkErr, x.target.name))
		}
	}
}

// stopped asks the target to stop and drops a pull's file.
func (x *clientXfer) stopped() wire.Reply {
	x.op.cancel()
	x.finishLater()
	return wire.Reply{}
}

// servedError is what the client hears of the target's error msg: the
// worker's "cancelled" is an interrupt of the session's serve.
func (x *clientXfer) servedError(msg string) string {
	if msg == "cancelled" {
		return fmt.Sprintf("the %s of %s was stopped by an interrupt of session '%s'; no file was written", x.req.Op, x.req.Path, x.target.name)
	}
	return msg
}

// linkFailed ends the transfer whose link to the target failed (it took
// none of it for relayStall); op.fail has asked the target to stop.
func (x *clientXfer) linkFailed() wire.Reply {
	x.finishLater()
	return errReply(wire.CodeBusy, "%v", x.op.err())
}

// finishLater leaves the target busy until it says its last word (or its
// only one, a refusal) or dies, and drops a pull's file.
func (x *clientXfer) finishLater() {
	x.h.finishLater(x.target, x.op, nil, false, x.isLast, x.flush)
	x.abort()
}

// abort drops a pull's file once the chunks queued for it are written.
func (x *clientXfer) abort() {
	x.flush()
	if x.sink != nil {
		x.sink.Abort()
	}
}

// finish frees the target and words the transfer's end.
func (x *clientXfer) finish(first, last *proto.Served, t0 time.Time) wire.Reply {
	x.flush()
	death := x.h.endServe(x.target, x.op)
	if last == nil {
		x.abort()
		return replyErr(x.h.diedServing(x.target, string(x.req.Op), death))
	}
	if x.overran.Load() {
		x.abort()
		return errReply(wire.CodeBadRequest, "session '%s' sent more of %s than it was asked for; the %s is stopped", x.target.name, x.req.Path, x.req.Op)
	}
	if !last.OK || x.sinkErr != nil {
		x.abort()
		if x.sinkErr != nil {
			return errReply(wire.CodeBadRequest, "writing %s: %v", x.req.Local, x.sinkErr)
		}
		return errReply(wire.CodeBadRequest, "%s", x.servedError(last.Error))
	}
	size := last.Size // a push's, as the session wrote it
	if x.sink != nil {
		// A pull's, as written here: a file may grow while it is read, and
		// one whose size says nothing (/proc's) announces 0; but one that
		// ends short of what was announced is not whole.
		size = x.sink.Size()
		if size < first.Size {
			x.abort()
			return errReply(wire.CodeBadRequest, "session '%s' sent %d of the %d bytes of %s that it announced (did the file shrink meanwhile?); the pull is stopped",
				x.target.name, size, first.Size, x.req.Path)
		}
		if err := x.sink.Finish(); err != nil {
			return errReply(wire.CodeBadRequest, "writing %s: %v", x.req.Local, err)
		}
	}
	d := time.Since(t0)
	verb, prep := "pushed", "to"
	if x.req.Op == wire.OpPull {
		verb, prep = "pulled", "from"
	}
	return wire.Reply{Message: fmt.Sprintf("%s %d bytes %s session '%s' in %s (%.1f MB/s)",
		verb, size, prep, x.target.name, wire.Duration(d.Seconds()), float64(size)/1e6/max(d.Seconds(), 1e-6))}
}
