package hub

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// Stalls. The hub relays the chunks and acks of a put, get or call, or of
// a push or pull, from one session's worker to another's, on the frame
// reader of the session that sent them. A worker that stops reading its
// stdin (SIGSTOP, C code that holds the GIL, a hostile worker) would block
// that write, and with it the sender's reader, its cancel and its output,
// for ever. So every frame relayed for a link goes through serveOp.relay:
// relaySend gives up once the destination has taken no byte for
// relayStall, and the link fails alone (serveOp.fail). A stalled peer
// holds a sender's reader up for at most relayStall, once per link, or
// until the sender is interrupted (its cell, or a group's part it serves):
// the interrupt's answer waits behind the frame, so the interrupt fails
// the link that frame is relayed for, and a relay returns once its link
// failed (Session.dropStalled). A
// file's serve that its target reads but never answers fails after
// relayStall too (serveOp.firstAnswer): a worker opens the file at once.

// relayStall is how long a relayed frame waits while its destination
// takes no byte of anything the hub writes it. REPLHUB_RELAY_STALL (a Go
// duration, for tests) in the hub's environment sets it (setRelayStall).
var relayStall = 20 * time.Second

// setRelayStall takes relayStall from the environment, if set there.
func setRelayStall() {
	if d, err := time.ParseDuration(os.Getenv("REPLHUB_RELAY_STALL")); err == nil && d > 0 {
		relayStall = max(d, 100*time.Millisecond)
	}
}

var (
	errStalled = errors.New("hub: the session takes no frames")
	// errUnsent is errStalled for a frame the relay writer never took:
	// no byte of it went, nor will.
	errUnsent = fmt.Errorf("%w; the frame was dropped", errStalled)
	errGone   = errors.New("hub: the session has ended")
	// errPending and errLinkFailed: the link a relayed frame was for
	// failed while the frame waited; it goes whole once its session reads
	// again (pending), or was dropped.
	errPending    = errors.New("hub: the link failed; the frame waits for the session to read")
	errLinkFailed = errors.New("hub: the link failed; the frame was dropped")
)

// relayFrame is a frame for a session's relay writer (relayWriter); done
// receives what writing it returned.
type relayFrame struct {
	m    proto.Msg
	done chan error
	hold *objectHold // the object m carries, let go with its data
	// owner says who gives a chunk's buffer back to the pool, once the
	// frame is written: the sender that waits for it, unless the sender
	// stopped waiting; then the relay writer does. Exactly one of them.
	owner atomic.Int32
}

// A relayFrame's owner.
const (
	ownerUndecided = iota
	ownerSender
	ownerWriter
)

// relaySend sends m to s's worker on behalf of another session. It returns
// errStalled once s's writer has taken no byte for relayStall: m, which
// the relay writer had taken, then goes whole later or fails with the
// stream; or errUnsent, when the relay writer was still busy with an
// earlier frame: m is dropped. Once failed is closed (the link m is for
// failed; nil: never), it stops waiting too, and returns errPending if
// the relay writer has m (it goes whole once s reads again), else
// errLinkFailed (m is dropped). In either case a write that has just
// ended, as it gave up, returns what it returned. It owns a chunk's
// Data, which goes back to the pool once written or dropped.
//
// The write itself is s's relay writer's, so that the caller can stop
// waiting for it; a frame costs a hand-over, not a goroutine.
func (s *Session) relaySend(m proto.Msg, failed <-chan struct{}) error {
	return s.relaySendHeld(m, failed, nil)
}

// relaySendHeld is relaySend of m, which carries the object of hold: it
// takes over one of hold's refs, let go with m's data, by the sender or,
// once the sender gives up, by the relay writer.
func (s *Session) relaySendHeld(m proto.Msg, failed <-chan struct{}, hold *objectHold) error {
	q := s.relayQueue()
	f := &relayFrame{m: m, done: make(chan error, 1), hold: hold}
	seen := s.w.Written()
	t := time.NewTimer(relayStall)
	defer t.Stop()
	for {
		select {
		case q <- f:
			q = nil // the relay writer has it now
			continue
		case err := <-f.done:
			f.drop()
			return err
		case <-s.exited:
			return f.giveUp(q == nil, errGone)
		case <-failed:
			if q == nil {
				return f.giveUp(true, errPending)
			}
			return f.giveUp(false, errLinkFailed)
		case <-t.C:
		}
		if n := s.w.Written(); n != seen {
			seen = n
			t.Reset(relayStall)
			continue
		}
		if q != nil {
			return f.giveUp(false, errUnsent)
		}
		return f.giveUp(true, errStalled)
	}
}

// giveUp stops waiting for f with err, and leaves its buffer to the relay
// writer if taken says it has f, unless it has just written it: then what
// that returned.
func (f *relayFrame) giveUp(taken bool, err error) error {
	if taken && f.owner.CompareAndSwap(ownerUndecided, ownerWriter) {
		return err
	}
	if taken {
		err = <-f.done
	}
	f.drop()
	return err
}

// drop lets f's data go: a chunk's buffer back to the pool, an object's
// bytes out of the hub's count.
func (f *relayFrame) drop() {
	dropData(f.m)
	f.hold.release()
}

// relayLater sends m to s's worker after the relayed frames before it,
// stalled ones included; it returns once m is queued or s has ended, and
// is meant to run on a goroutine of its own.
func (s *Session) relayLater(m proto.Msg) {
	f := &relayFrame{m: m, done: make(chan error, 1)}
	f.owner.Store(ownerWriter)
	select {
	case s.relayQueue() <- f:
	case <-s.exited:
		dropData(m)
	}
}

// relayQueue starts s's relay writer at the first relay and returns its
// queue.
func (s *Session) relayQueue() chan *relayFrame {
	s.relayOnce.Do(func() {
		s.relayq = make(chan *relayFrame)
		go s.relayWriter()
	})
	return s.relayq
}

// relayWriter writes the frames relayed to s, one at a time, until s has
// ended.
func (s *Session) relayWriter() {
	for {
		select {
		case f := <-s.relayq:
			err := s.send(f.m)
			if !f.owner.CompareAndSwap(ownerUndecided, ownerSender) {
				f.drop()
			}
			f.done <- err
		case <-s.exited:
			return
		}
	}
}

// dropData gives a chunk's buffer back to the pool.
func dropData(m proto.Msg) {
	if c, ok := m.(*proto.Chunk); ok {
		proto.PutChunk(c.Data)
	}
}

// relay sends m to dst, the caller or the target of op, for op's link, and
// says whether m went or goes once dst reads again. Once the link has
// failed, m is dropped; a stall fails it.
func (op *serveOp) relay(dst *Session, m proto.Msg) bool {
	if op.err() != nil {
		dropData(m)
		return false
	}
	err := dst.relaySend(m, op.failed)
	if errors.Is(err, errStalled) {
		op.stalled(dst)
	}
	return err == nil || err == errStalled || err == errPending
}

// stalled fails op's link because dst took nothing for relayStall.
func (op *serveOp) stalled(dst *Session) {
	dst.hub.log.Warn("relay stalled", "session", dst.name, "sid", op.sid, "kind", op.what)
	op.fail(fmt.Errorf("session '%s' took none of the %s's data for %s: is it stopped (SIGSTOP) or stuck in C code? interrupt or kill it",
		dst.name, op.what, wire.Duration(relayStall.Seconds())))
}

// overrun fails op's link when its target sent more chunks than its
// window lets it (queued's full).
func (op *serveOp) overrun() {
	op.fail(fmt.Errorf("session '%s' sent more of the %s's data than it was asked for; the %s is stopped",
		op.target.name, op.what, op.what))
}

// fail ends op's link with err, once: the request is answered with it at
// once (next reports it), what comes for the link is dropped (relay), and
// the target is told to stop, after any frame stalled on its way to it.
// The target stays busy until it answers or dies (finishLater).
func (op *serveOp) fail(err error) {
	op.mu.Lock()
	if op.failErr == nil {
		op.failErr = err
		close(op.failed)
	}
	op.mu.Unlock()
	op.cancel()
}

// err is what failed op's link, or nil.
func (op *serveOp) err() error {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.failErr
}

// next waits for the target's next served frame; nil when it died, or
// when sent (the serve frame's write) failed. ok is false when the link
// failed first.
func (op *serveOp) next(sent error) (s *proto.Served, ok bool) {
	if sent != nil {
		return nil, true
	}
	select {
	case s = <-op.done:
		return s, true
	case <-op.failed:
		return nil, false
	case <-op.target.exited:
		return op.answer(), true
	}
}

// firstAnswer is next for a file's serve, whose first answer (ready, or
// a refusal) a worker gives at once: it opens the file. None within
// relayStall means that the worker does not read (stopped, or stuck in C
// code), and the link fails so; it fails too when gone is closed (the
// client went away; nil: never). ok is false when the link failed.
// what names the transfer ("push", "pull").
func (op *serveOp) firstAnswer(sent error, what string, gone <-chan struct{}) (first *proto.Served, ok bool) {
	if sent != nil {
		return nil, true
	}
	t := time.NewTimer(relayStall)
	defer t.Stop()
	select {
	case first = <-op.done:
		return first, true
	case <-op.failed:
	case <-op.target.exited:
		return op.answer(), true
	case <-gone:
		op.fail(errors.New("the client went away"))
	case <-t.C:
		op.fail(fmt.Errorf("session '%s' did not answer the %s for %s: is it stopped (SIGSTOP), stuck in C code, or blocked opening the file (a FIFO, a hung mount)? interrupt or kill it",
			op.target.name, what, wire.Duration(relayStall.Seconds())))
	}
	return nil, false
}

// answer waits for the target's next served frame; nil once it died and
// said nothing more. Its death may not say so on op.done (sessionExited).
func (op *serveOp) answer() *proto.Served {
	select {
	case s := <-op.done:
		return s
	case <-op.target.exited:
		select {
		case s := <-op.done:
			return s
		default:
			return nil
		}
	}
}

// cancel tells the target to stop serving op, once: now if the serve
// frame has gone, else as soon as it goes (sent), since a worker drops a
// cancel of a sid it does not know yet. The cancel follows any relayed
// frame stalled on its way there.
func (op *serveOp) cancel() {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.asked = true
	op.tellLocked()
}

// sent records that the serve frame went to the target.
func (op *serveOp) sent() {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.served = true
	op.tellLocked()
}

func (op *serveOp) tellLocked() {
	if op.asked && op.served && !op.told {
		op.told = true
		go op.target.relayLater(&proto.Cancel{Sid: op.sid})
	}
}

// finishLater frees target of op, whose link failed, once the target has
// said its last word (isLast) or died: until then it is still serving,
// and no cell may go to it. got and ok are what op.next returned last.
func (h *Hub) finishLater(target *Session, op *serveOp, got *proto.Served, ok bool, isLast func(*proto.Served) bool, flush func()) {
	go func() {
		for !ok || (got != nil && !isLast(got)) {
			got, ok = op.answer(), true
		}
		flush()
		h.endServe(target, op)
	}()
}

// linkState is the part of a serveOp that its link to a caller uses. Its
// mu is taken after Session.mu, and nothing is taken under it.
type linkState struct {
	mu sync.Mutex
	// served: the serve frame went; asked: a cancel was asked; told: it
	// was sent.
	served, asked, told bool
	failed              chan struct{} // closed when the link failed
	failErr             error
}
