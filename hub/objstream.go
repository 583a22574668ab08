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
func streamObject(from *Session, id int64, op *serveOp) (flush func()) {
	forward := func(c *proto.Chunk) {
		if c.EOF {
			proto.PutChunk(c.Data)
			return
		}
		op.relay(from, &proto.Chunk{ID: id, Seq: c.Seq, Data: c.Data})
	}
	ack := func(a *proto.Ack) { op.relay(from, &proto.Ack{ID: id, Seq: a.Seq}) }
	if _, part := fanLinkOf(id); part {
		op.setSinks(forward, ack)
		return func() {}
	}
	chunk, flush := queued(forward, op.overrun)
	op.setSinks(chunk, ack)
	return flush
}

// passFirst passes a target's First answer on to the caller: the target
// is ready for the caller's buffers, or its value's buffers follow.
func passFirst(from *Session, id int64, s *proto.Served, op *serveOp) {
	op.relay(from, &proto.Reply{ID: id, OK: s.OK, Py: s.Py, First: true, Bufs: s.Bufs, Kinds: s.Kinds, Error: s.Error, Data: s.Data})
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
