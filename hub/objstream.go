package hub

import (
	"github.com/replhub/replhub/proto"
)

// Streamed objects: a put, get or call between two sessions of the same
// Python (3.8 and later) pickles its object with protocol 5 and sends the
// big buffers (bytes, bytearray, memoryview, anything that exposes a
// PickleBuffer, such as a numpy array) out of band, as chunks, like a file:
// only the small pickle that holds the rest goes in the req or served
// frame, with Bufs, the buffers' sizes (boot/replhub_toolkit/objstream.py).
//
// The hub forwards, as for a file, one chunk at a time and at most
// wire.Window unacknowledged, so it never holds the object:
//
//	put, call's arguments: req{bufs} → serve{bufs} → served{first} (the
//	    target is ready) → reply{first} → chunks from the caller, acks from
//	    the target → served → reply (the last word).
//	get, call's value: req{oob} → serve{oob} → served{first, bufs} (the
//	    value's pickle) → reply{first, bufs} → chunks from the target, acks
//	    from the caller → served → reply (the last word).
//
// A call may do both. Every First answer reaches the caller as a reply
// with First set; the request ends with the one reply without it. A
// session of another version, or of 3.6 or 3.7, gets neither bufs nor
// oob from its peer and answers as before: one served, one reply.
//
// A group's put, get or call with bufs or oob (fanServe) is one such
// transfer per session, each under an id of its own: the caller pickles
// once and sends every part the chunks of the same buffers, at that
// part's pace (group.py, objstream.fan).

// streamObject forwards the chunks and acks of the object that op serves
// for request id of from, in both directions; flush waits until every
// chunk from the target has been passed on (and drops any after it).
//
// A single request's chunks from the target are queued, so that reading
// the next overlaps writing this one. A group's part (fanLinkID) writes
// each on the target's reader instead: the hub then holds at most one
// chunk a part, not a queue of them, however many parts are under way
// (the bound is at fanStreams).
//
// Every frame goes through op.relay, both ways: a session that stops
// reading holds the other's reader up for at most relayStall, and then
// its link fails alone (stall.go); a group's other parts go on.
//
// A chunk from the target goes only once the First answers the target
// gave before it have gone (awaitFirsts): the caller's worker reads a
// value's chunks into the buffers that its First answer announces, and
// one that comes before it fits none. The relay passes a First answer on
// from its own goroutine (passFirst), which may run later than the
// target's reader and this queue. (A queued chunk waits for those given
// before it is forwarded; a target that keeps to the protocol gives none
// after its value's chunks.)
func streamObject(from *Session, id int64, op *serveOp) (flush func()) {
	// Every relay to the caller is recorded where an interrupt of the
	// target sees what holds it up, to free it from a caller that stopped
	// reading (dropStalled): on the target's reader (acks, and a part's
	// chunks), or on the op (a single request's chunks, from their queue).
	link := &relayLink{target: from, op: op, served: true}
	onReader := func(relay func()) { op.target.holdFor(link, relay) }
	hold := onReader
	_, part := fanLinkOf(id)
	if !part {
		hold = func(relay func()) {
			op.toCaller.Store(link)
			defer op.toCaller.Store(nil)
			relay()
		}
	}
	forward := func(c *proto.Chunk) {
		if c.EOF {
			proto.PutChunk(c.Data)
			return
		}
		hold(func() {
			op.awaitFirsts() // behind a First answer the caller has not taken
			op.relay(from, &proto.Chunk{ID: id, Seq: c.Seq, Data: c.Data})
		})
	}
	ack := func(a *proto.Ack) { onReader(func() { op.relay(from, &proto.Ack{ID: id, Seq: a.Seq}) }) }
	if part {
		op.setSinks(forward, ack)
		return func() {}
	}
	chunk, flush := queued(forward, op.overrun)
	op.setSinks(chunk, ack)
	return flush
}

// passFirst passes a target's First answer on to the caller: the target
// is ready for the caller's buffers, or its value's buffers follow. Once
// it returns, the answer is with the caller's relay writer, which writes
// it before what is relayed after it, or it was dropped with the link.
func passFirst(from *Session, id int64, s *proto.Served, op *serveOp) {
	op.relay(from, &proto.Reply{ID: id, OK: s.OK, Py: s.Py, First: true, Bufs: s.Bufs, Kinds: s.Kinds, Error: s.Error, Data: s.Data})
	op.mu.Lock()
	defer op.mu.Unlock()
	op.firsts.passed++
	op.firsts.movedLocked()
}

// firstAnswers counts the First answers of a serve's target, so that its
// chunks follow them (streamObject). Its fields are guarded by the
// serveOp's linkState.mu.
type firstAnswers struct {
	// seen: given by the target (sawFirst, on its reader, before it reads
	// on); passed: passed on to the caller (passFirst); over: the relay
	// passes none more (endFirsts).
	seen, passed int
	over         bool
	// moved, when made, is closed when passed or over changes.
	moved chan struct{}
}

func (f *firstAnswers) movedLocked() {
	if f.moved != nil {
		close(f.moved)
		f.moved = nil
	}
}

// sawFirst records a First answer of op's target; its reader calls it
// before it reads the target's next frame.
func (op *serveOp) sawFirst() {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.firsts.seen++
}

// endFirsts records that op's relay passes no more First answers on: it
// has the target's last word, or none will come, or the link failed. A
// First answer it never took (gone makes room) holds no chunk up then.
func (op *serveOp) endFirsts() {
	op.mu.Lock()
	defer op.mu.Unlock()
	op.firsts.over = true
	op.firsts.movedLocked()
}

// awaitFirsts waits until every First answer that op's target has given
// so far has gone to the caller, or none more will, or the link failed
// (what is relayed for it is dropped then).
func (op *serveOp) awaitFirsts() {
	op.mu.Lock()
	for op.firsts.passed < op.firsts.seen && !op.firsts.over {
		if op.firsts.moved == nil {
			op.firsts.moved = make(chan struct{})
		}
		moved := op.firsts.moved
		op.mu.Unlock()
		select {
		case <-moved:
		case <-op.failed:
			return
		}
		op.mu.Lock()
	}
	op.mu.Unlock()
}

// cancelWaitsLocked stops what s waits on (a put, get or call, a push or
// pull, a group's) once s can no longer go on with it (it died, or its
// link dropped): a target waiting for chunks from s would wait for ever.
// s.mu is held; the cancels go on their own goroutines, as a target's
// writer may block.
func (s *Session) cancelWaitsLocked() {
	for _, link := range s.waitingOn {
		link.op.cancel()
	}
}
