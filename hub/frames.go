package hub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// readFrames serves the worker's frames until its stream ends. A frame
// that breaks the protocol ends the session, with a death note naming the
// violation; the hub and every other session go on.
func (s *Session) readFrames() {
	for {
		m, err := s.frames.Read()
		var mf *proto.Malformed
		if errors.As(err, &mf) {
			s.malformedFrame(mf)
			continue
		}
		if err != nil {
			var v *proto.Violation
			if errors.As(err, &v) {
				s.endForViolation(v.Error())
				return
			}
			if lp, ok := s.proc.(*linkProc); ok && lp.awaitLink() {
				s.frames.Reset()
				continue
			}
			go s.framesEnded(false)
			return
		}
		if _, ok := m.(*proto.Closed); ok {
			// The worker's word that its code closed the channel: the
			// stream's end may never come (sudo holds a copy of a root
			// worker's, a host's reaper one of its worker's output).
			go s.framesEnded(true)
			return
		}
		s.takeFrame(m)
	}
}

// maxNotes bounds the notes a worker's frames leave for the next reply,
// and maxNoteLen each one's text: a worker that sends malformed or error
// frames in a loop must not grow the hub, nor its swap and hand-over
// records, which carry the notes.
const (
	maxNotes   = 32
	maxNoteLen = 2000
)

// workerNoteLocked adds a note that the worker's frames are the cause of:
// clipped, and past maxNotes counted in the last one instead.
func (s *Session) workerNoteLocked(text string) {
	if len(text) > maxNoteLen {
		text = strings.ToValidUTF8(text[:maxNoteLen], "") + " …"
	}
	switch {
	case len(s.notes) < maxNotes-1:
		s.notes = append(s.notes, text)
		return
	case len(s.notes) == maxNotes-1:
		s.notesDropped = 0 // the first past the bound since the notes were taken
	}
	s.notesDropped++
	s.notes = append(s.notes[:maxNotes-1], fmt.Sprintf("%d more notes from the worker were dropped (it sent malformed or error frames in a loop)", s.notesDropped))
}

// takeFrame handles one frame from the worker, on its reader.
func (s *Session) takeFrame(m proto.Msg) {
	switch f := m.(type) {
	case *proto.Done:
		s.onDone(f)
	case *proto.Interrupted:
		select {
		case s.interrupted <- f:
		default:
		}
	case *proto.Error:
		s.mu.Lock()
		s.workerNoteLocked("the worker reported: " + f.Error)
		s.mu.Unlock()
	case *proto.Req:
		s.takeRequest(f)
	case *proto.Served:
		s.onServed(f)
	case *proto.Chunk:
		s.onChunk(f)
	case *proto.Ack:
		s.onAck(f)
	case *proto.Swapped:
		s.hub.onSwapped(s, f)
	case *proto.Restored:
		s.hub.onRestored(s, f)
	case *proto.Answer:
		s.onAnswer(f)
	case *proto.Out:
		s.mu.Lock()
		s.takeOutputLocked(f.Data, true)
		s.mu.Unlock()
	case *proto.Detached:
		s.mu.Lock()
		if s.detachedFrames != nil {
			close(s.detachedFrames)
			s.detachedFrames = nil
		}
		s.mu.Unlock()
	case *proto.Pong, *proto.Ready, *proto.Cells, *proto.Closed:
	}
}

// onDone takes the done frame of the running cell. Its images are
// decoded and scaled here, on the frame reader, not under mu, and only
// for the cell that waits for them: a done frame for another cell is
// dropped undecoded. A reattached worker sends its last done frame again,
// which the old link may have lost: one already had is ignored.
func (s *Session) onDone(f *proto.Done) {
	s.mu.Lock()
	r := s.cur
	if r == nil || r.cell != f.Cell || r.done != nil || r.isFinished() {
		s.namesLost = s.namesLost || f.Names != nil
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	display, dnotes := displayItems(f)
	f.Data = nil
	s.mu.Lock()
	defer s.mu.Unlock()
	// The cell may have ended otherwise (killed, the fence timed out)
	// while its images were scaled.
	if s.cur != r || r.done != nil || r.isFinished() {
		s.namesLost = s.namesLost || f.Names != nil
		return
	}
	r.done, r.display, r.dnotes = f, display, dnotes
	if f.Quiet && r.sealed == nil {
		s.sealLocked(r) // no fence comes: nothing was written since the last
	}
	if f.Names != nil { // nil: they did not change
		s.names = f.Names
	}
	if f.RSS > 0 {
		s.rss = f.RSS
	}
	s.maybeFinishLocked(r)
}

// watchFrames ends, once a second, every session whose worker has left a
// frame half sent for longer than the hub's FrameStall: its stream can
// never be read in step again, and a session stuck that way would hang
// every caller.
func (h *Hub) watchFrames(ctx context.Context) {
	t := time.NewTicker(min(time.Second, h.frameStall/4))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, s := range h.allSessions() {
			s.mu.Lock()
			frames, state, remote := s.frames, s.state, s.info.Host != "local"
			s.mu.Unlock()
			if frames == nil || state == stateStarting || state == stateDead {
				continue
			}
			limit := h.frameStall
			if remote {
				limit *= 12
			}
			if d := frames.Stalled(); d > limit {
				s.endForViolation(fmt.Sprintf("half a frame, then nothing for %s", d.Round(100*time.Millisecond)))
			}
		}
	}
}

// framesEnded is called when the worker's frames have ended: it exits,
// or it is being handed over, or its code closed its end of the stream
// (an os.close or os.closerange of a descriptor it did not open), which
// it never reopens. Then the worker lives on, with the session's state,
// but nothing it does reaches this hub: its cell would look running for
// good, and the next ones queue behind it. A local worker that has not
// exited after a moment ends its cell, and refuses the next, saying what
// to do: a restart adopts it again on its socket, its state whole (it
// keeps the cell's end for the next hub).
//
// closed: the worker said so (proto.Closed), which a remote one does too:
// then its link is not lost, and the worker is not ending.
func (s *Session) framesEnded(closed bool) {
	select {
	case <-s.exited:
		return
	case <-time.After(framesEndedWait):
	}
	h := s.hub
	h.mu.Lock()
	closing := h.closing
	h.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if closing || (s.sock == "" && !closed) || s.state == stateDead || s.detachFence != nil || s.channelLost != "" {
		return
	}
	kill := wire.AdviceFor(wire.SurfaceCLI).Kill(s.name)
	if s.sock != "" {
		s.channelLost = fmt.Sprintf("the worker of session '%s' lives, but its channel to the hub was closed by its own code (an os.close or os.closerange of a descriptor it did not open): `replhub restart` takes it up again with its state, %s ends it",
			s.name, kill)
	} else {
		// A host's worker: no later hub reaches it either.
		s.channelLost = fmt.Sprintf("the worker of session '%s' on %s lives, but its channel to the hub was closed by its own code (an os.close or os.closerange of a descriptor it did not open), and its state cannot be reached again: %s ends it",
			s.name, s.info.Host, kill)
	}
	if s.channelGone != nil {
		close(s.channelGone) // a query waiting for its answer
	}
	if r := s.cur; r != nil && !r.isFinished() {
		s.abandonLocked(r, "ChannelClosed", s.channelLost)
	}
	s.hub.log.Warn("worker's channel closed while it lives", "session", s.name)
}

// framesEndedWait is how long a worker whose frames ended has to be seen
// exit before framesEnded takes its channel for closed by its code.
const framesEndedWait = 2 * time.Second

// malformedFrame drops a frame the worker sent that the hub cannot read,
// with a note for the next reply. The first malformedTold are logged and
// answered; past them, a worker that sends them in a loop (a host's, a
// cell's writes to the frame channel: two bytes a frame) has a log line
// at each power of ten and no answer, where each cost a line of the hub's
// log, in the runtime folder, some fifty times its size, and a write.
func (s *Session) malformedFrame(mf *proto.Malformed) {
	s.mu.Lock()
	s.workerNoteLocked("the worker sent a " + mf.Error() + "; it was dropped")
	s.namesLost = true // it may have been a done frame
	s.malformed++
	n := s.malformed
	s.mu.Unlock()
	if n > malformedTold {
		if isPowerOfTen(n) {
			s.hub.log.Warn("malformed frames", "session", s.name, "count", n, "logged", malformedTold)
		}
		return
	}
	s.hub.log.Warn("malformed frame", "session", s.name, "err", mf.Error())
	// Told aside: a worker that reads nothing must not stop its frames
	// being read (sendAside refuses once it lags).
	s.sendAside(&proto.Error{Error: "hub: " + mf.Error()})
}

// malformedTold is how many of a session's malformed frames are logged
// and answered one by one.
const malformedTold = 10

// isPowerOfTen reports whether n is 10, 100, 1000 …
func isPowerOfTen(n int) bool {
	for n >= 10 && n%10 == 0 {
		n /= 10
	}
	return n == 1
}

// endForViolation ends a session whose worker broke the protocol.
func (s *Session) endForViolation(why string) {
	s.hub.log.Error("worker broke the protocol", "session", s.name, "err", why)
	s.mu.Lock()
	if s.death == "" {
		s.death = "the worker broke the frame protocol (" + why + "), so the hub ended it"
	}
	s.mu.Unlock()
	s.proc.Kill()
}

// send writes one frame to the worker: an exec frame on its cell pipe or
// cell link (cw), which its main thread reads while idle; any other on
// its stdin, which its reader thread reads.
func (s *Session) send(m proto.Msg) error {
	if e, ok := m.(*proto.Exec); ok {
		if lp, ok := s.proc.(*linkProc); ok {
			// A channel on an ssh link: no EPIPE, but io.EOF once the
			// server closed it, and any error when the link goes; and a
			// frame written as the server closes it is lost (cellsLost).
			s.cellsMu.Lock()
			if cw := s.cw.Load(); cw != nil {
				s.cellsExec = e
				err := cw.Write(m)
				s.cellsMu.Unlock()
				if err == nil || !lp.cellsFailed(cw) {
					return err
				}
			} else {
				s.cellsMu.Unlock()
			}
		} else if cw := s.cw.Load(); cw != nil {
			if err := cw.Write(m); !errors.Is(err, syscall.EPIPE) {
				return err
			}
			// The pipe or link ended alone (a worker closed its end, as
			// none does; a server closed the channel): the frame goes with
			// the rest, which the worker reads too.
		}
	}
	return s.w.Write(m)
}

// cellsLost is a session on a host whose cell link ended alone (the
// server closed its channel, sshd's ChannelTimeout): an exec frame
// written as the server closed it is dropped unread there. The last one
// written on it goes again on the session's channel while its cell has
// not ended; the worker takes a frame it has already (the same fence)
// once. Only on link gen: on a later one, the reattach said whether the
// worker had it (linkUp).
func (s *Session) cellsLost(gen int) {
	s.cellsMu.Lock() // a write on the link under way ends first
	m := s.cellsExec
	s.cellsExec = nil
	s.cellsMu.Unlock()
	lp, ok := s.proc.(*linkProc)
	if m == nil || !ok {
		return
	}
	s.imu <- struct{}{} // after an interrupt sent before, as the first went
	defer func() { <-s.imu }()
	s.sendMu.Lock() // not after a reattach's look (linkUp)
	defer s.sendMu.Unlock()
	s.mu.Lock()
	r := s.cur
	live := r != nil && r.cell == m.Cell && !r.isFinished()
	s.mu.Unlock()
	if !live || !lp.linkUp(gen) {
		return
	}
	if err := s.w.Write(m); err != nil {
		s.hub.log.Warn("exec frame not sent again", "session", s.name, "err", err)
	}
}

// forgetCellsExecLocked lets the exec frame kept for cellsLost go once
// its cell r ended (a cell's code may be megabytes). Never waits: a write
// on the cell link under way holds it, and the next exec replaces it.
func (s *Session) forgetCellsExecLocked(r *run) {
	if s.cellsMu.TryLock() {
		if s.cellsExec != nil && s.cellsExec.Cell == r.cell {
			s.cellsExec = nil
		}
		s.cellsMu.Unlock()
	}
}

// maxRequestID bounds a request's id: the links of a group's parts
// (fanLinkID) are then negative, and meet no request's own id nor the
// parts of another request. A cancel may name a part.
const maxRequestID = 1<<50 - 1

// maxRequests bounds the requests one worker has in flight: each holds a
// goroutine, and a put's or call's blob, in the hub.
const maxRequests = 16

// maxRefusals bounds the refusals (a bad id, too many requests) waiting
// to reach a worker that does not read its stdin: each holds a goroutine.
// Past it, a refusal is dropped: only a worker that floods requests and
// reads no answer meets it, and it then waits on itself alone.
const maxRefusals = 64

// takeRequest serves a req frame of s's worker on a goroutine of its own,
// so that the frame reader never blocks, or, past maxRequests in flight,
// answers it at once with an error. A cancel is served here: it ends a
// request in flight, takes no time and sends nothing.
func (s *Session) takeRequest(f *proto.Req) {
	if f.Kind == "cancel" {
		s.cancelRequest(f.ID)
		return
	}
	if f.ID <= 0 || f.ID > maxRequestID {
		s.refuse(f.ID, fmt.Sprintf("bad request id %d: a worker numbers its requests 1, 2, …", f.ID))
		return
	}
	if s.requests.Add(1) > maxRequests {
		s.requests.Add(-1)
		s.refuse(f.ID, fmt.Sprintf(
			"too many requests at once: session '%s' has %d waiting on the hub; wait for one to end", s.name, maxRequests))
		return
	}
	// Recorded as running here, before its goroutine starts, so that a
	// cancel right behind it (taken by this reader before that goroutine
	// runs) finds it and cancels it.
	ctx, stop, err := s.runningAs(f.ID)
	if err != nil {
		s.requests.Add(-1)
		s.refuse(f.ID, err.Error())
		return
	}
	// A put's or a call's object, and an sh's input, count toward the
	// hub's bound (held.go) for as long as the request holds them; no
	// other request takes bytes, and what one brings is let go at once:
	// a request that waits (an sh that runs, an open that starts a
	// session) must not keep a blob of up to maxBlob each.
	var hold *objectHold
	if f.Kind != "put" && f.Kind != "call" && f.Kind != "sh" {
		f.Data = nil
	}
	if len(f.Data) > 0 {
		if hold, err = s.hub.holdObject(s, f.Kind, int64(len(f.Data))); err != nil {
			stop()
			s.requests.Add(-1)
			s.refuse(f.ID, err.Error())
			return
		}
		hold.req = f
		ctx = withHold(ctx, hold)
	}
	go func() {
		defer s.requests.Add(-1)
		defer stop()
		defer hold.letRequest()
		s.hub.serve(ctx, s, f)
	}()
}

// refuse answers request id with an error, on a goroutine (the worker may
// be slow to read its stdin), at most maxRefusals at once.
func (s *Session) refuse(id int64, msg string) {
	if s.refusals.Add(1) > maxRefusals {
		s.refusals.Add(-1)
		return
	}
	go func() {
		defer s.refusals.Add(-1)
		s.send(&proto.Reply{ID: id, Error: msg})
	}()
}

// maxBlob is the largest object s's worker may send: its reader's MaxBlob,
// or proto.DefaultMaxBlob.
func (s *Session) maxBlob() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frames != nil && s.frames.MaxBlob > 0 {
		return s.frames.MaxBlob
	}
	return proto.DefaultMaxBlob
}
