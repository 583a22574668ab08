package hub

import (
	"fmt"
	"time"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// interruptWait bounds the wait for the worker's answer to an interrupt.
const interruptWait = 2 * time.Second

// interrupt raises KeyboardInterrupt in the running cell, or stops what the
// session serves for another, and says truthfully what came of it.
// With cell, only that cell: one that has finished is left alone.
func (s *Session) interrupt(adv wire.Advice, cancelled bool, cell int) (string, error) {
	if cancelled {
		// Marked before anything waits: the cancelled exec must not take
		// the result it brings, and its reader hears why, whether or not
		// an interrupt can go.
		s.mu.Lock()
		if r := s.cur; r != nil && !r.collected && !r.isFinished() && (cell == 0 || r.cell == cell) {
			r.cancelled = true
		}
		s.mu.Unlock()
	}
	// A cell's exec frame that a worker does not read (stopped, its
	// stdin full) holds imu, and so does an interrupt that waits for its
	// answer: the interrupt then says which in time.
	wait := time.NewTimer(interruptWait)
	select {
	case s.imu <- struct{}{}:
		wait.Stop()
	case <-wait.C:
		if on := s.interrupting.Load(); on != nil {
			behind := ""
			if link := on.held(); link != nil {
				behind = " (behind " + link.transfer() + ")"
			}
			return fmt.Sprintf("sent no second interrupt to session '%s': the one sent %s ago %s still waits for its answer%s: %s ends the session",
				s.name, on.waited(), on.what, behind, adv.Kill(s.name)), nil
		}
		return fmt.Sprintf("sent no interrupt: session '%s' has not read its input for %s (stopped, or in code that holds the interpreter?), and a cell or another interrupt is still on its way to it: %s shows whether the cell ended, %s ends the session",
			s.name, interruptWait, adv.Wait(s.name), adv.Kill(s.name)), nil
	case <-s.exited:
		return "", &wire.Error{Code: wire.CodeDead, Message: fmt.Sprintf("session '%s' is dead: %s", s.name, s.deathText())}
	}
	defer func() { <-s.imu }()
	s.mu.Lock()
	r := s.cur
	state, death, op := s.state, s.death, s.serving
	s.mu.Unlock()
	if state == stateDead {
		return "", &wire.Error{Code: wire.CodeDead, Message: fmt.Sprintf("session '%s' is dead: %s", s.name, death)}
	}
	if cell != 0 && (r == nil || r.cell != cell || r.isFinished()) {
		return fmt.Sprintf("cell %d of session '%s' has finished: nothing to interrupt", cell, s.name), nil
	}
	if op != nil {
		return s.interruptServe(adv, op)
	}
	if r == nil || r.isFinished() {
		return fmt.Sprintf("session '%s' is idle: nothing to interrupt", s.name), nil
	}
	if s.parkUnsent(r) {
		return fmt.Sprintf("cell %d of session '%s' had not started yet: it ends with KeyboardInterrupt as it starts, without running; %s shows it", r.cell, s.name, adv.WaitCell(s.name, r.cell)), nil
	}
	return s.interruptRunning(adv, r)
}

// interruptServe stops the put, get or call (or file transfer) that s
// serves: it sends the worker a cancel, and waits for the serve to end.
func (s *Session) interruptServe(adv wire.Advice, op *serveOp) (string, error) {
	// What holds the answer up: a frame the reader relays, or a chunk
	// the serve passes its caller off the reader.
	holding := func() *relayLink {
		if link := s.relaying.Load(); link != nil {
			return link
		}
		return op.toCaller.Load()
	}
	held := s.sendWatched(&proto.Cancel{Sid: op.sid}, fmt.Sprintf("to stop the %s it serves for '%s'", op.kind, op.from), holding)
	defer held.stop()
	for {
		select {
		case err := <-held.failed:
			return "", notDelivered(err)
		case <-op.ended:
			return fmt.Sprintf("interrupted the %s session '%s' was serving for '%s'%s", op.kind, s.name, op.from, held.dropped), nil
		case <-s.exited:
			return "", &wire.Error{Code: wire.CodeDead, Message: fmt.Sprintf("session '%s' died while being interrupted: %s", s.name, s.deathText())}
		case <-held.round.C:
			if held.again() {
				continue
			}
			return fmt.Sprintf("asked session '%s' to stop the %s it serves for '%s', but it has not stopped within %s%s%s: %s ends the session",
				s.name, op.kind, op.from, held.waited(), held.why(), held.dropped, adv.Kill(s.name)), nil
		}
	}
}

// interruptRunning sends an interrupt to r, s's running cell, and waits for
// the worker's answer. The caller holds imu.
func (s *Session) interruptRunning(adv wire.Advice, r *run) (string, error) {
	for len(s.interrupted) > 0 {
		<-s.interrupted // answers to interrupts whose callers gave up
	}
	held := s.sendWatched(&proto.Interrupt{Cell: r.cell}, fmt.Sprintf("to cell %d", r.cell), s.relaying.Load)
	defer held.stop()
	for {
		select {
		case err := <-held.failed:
			return "", notDelivered(err)
		case a := <-s.interrupted:
			if a.Cell != r.cell {
				continue
			}
			switch a.How {
			case proto.HowDelivered:
				return fmt.Sprintf("interrupted cell %d of session '%s' (KeyboardInterrupt raised in it)%s; %s shows how it ended%s", r.cell, s.name, held.dropped, adv.WaitCell(s.name, r.cell), s.queuedAfter(adv)), nil
			case proto.HowParked:
				return fmt.Sprintf("cell %d of session '%s' had not started yet: it ends with KeyboardInterrupt as it starts, without running%s; %s shows it", r.cell, s.name, held.dropped, adv.Wait(s.name)), nil
			default:
				s.lostDone(r)
				return fmt.Sprintf("session '%s' had already finished cell %d: nothing to interrupt%s; %s shows its result", s.name, r.cell, held.dropped, adv.Wait(s.name)), nil
			}
		case <-held.round.C:
			if held.again() {
				continue
			}
			return fmt.Sprintf("sent an interrupt to cell %d of session '%s', but it did not answer within %s%s%s: %s shows whether the cell ended, %s ends the session",
				r.cell, s.name, held.waited(), held.why(), held.dropped, adv.Wait(s.name), adv.Kill(s.name)), nil
		case <-s.exited:
			return "", &wire.Error{Code: wire.CodeDead, Message: fmt.Sprintf("session '%s' died while being interrupted: %s", s.name, s.deathText())}
		}
	}
}

// heldReader is a frame sent aside to a worker (an interrupt, a cancel)
// whose answer is awaited in rounds of interruptWait, and the worker's
// frame reader, which a frame relayed for a transfer may hold up, answer
// and all: at the end of a round without the answer, again frees the
// reader from a transfer whose other side takes nothing
// (dropStalled), for at most maxDropRounds more rounds.
//
// While it waits, it is s.interrupting, for a second interrupt that finds
// imu held; what, held and sent never change, so that one may read them.
type heldReader struct {
	s       *Session
	what    string            // "to cell 3", "to stop the get it serves for 'a'"
	held    func() *relayLink // the transfer that holds the answer up now, if any
	sent    time.Time
	failed  <-chan error // from sendAside
	round   *time.Timer  // fires at the end of each round
	probe   relayProbe
	rounds  int
	dropped string // "; the put to 'b' was dropped: …", each one dropped
}

// sendWatched sends m aside and starts watching for its answer; what
// says what it was sent for, after "the one sent", and held what may hold
// the answer up.
func (s *Session) sendWatched(m proto.Msg, what string, held func() *relayLink) *heldReader {
	h := &heldReader{s: s, what: what, held: held, probe: probeLink(held()), sent: time.Now()}
	h.failed = s.sendAside(m)
	h.round = time.NewTimer(interruptWait)
	s.interrupting.Store(h)
	return h
}

func (h *heldReader) stop() {
	h.round.Stop()
	h.s.interrupting.Store(nil)
}

// waited is how long since the frame was sent, for an answer.
func (h *heldReader) waited() string { return wire.Duration(time.Since(h.sent).Seconds()) }

// again, at the end of a round without an answer, drops a stalled
// transfer that holds the reader, if any, and says whether another round
// starts: the answer comes now, or a transfer that moves still holds it.
func (h *heldReader) again() bool {
	if h.rounds >= maxDropRounds {
		return false
	}
	h.rounds++
	d, watch := h.s.dropStalled(h.held(), &h.probe)
	if d != "" {
		h.dropped += "; " + d
	}
	if d == "" && !watch {
		return false
	}
	h.round.Reset(interruptWait)
	return true
}

// why says, in parentheses, why no answer came once the rounds are over.
func (h *heldReader) why() string {
	if link := h.probe.link; link != nil && h.held() == link {
		return fmt.Sprintf(" (its answer waits behind %s, which takes its data slowly)", link.transfer())
	}
	return " (stopped, or in code that holds the interpreter)"
}

// transfer names the link's transfer, as the reader that relays it sees
// it: "the put to 'b'" on the caller's, "the get for 'a'" on the serving
// session's.
func (link *relayLink) transfer() string {
	if link.served {
		return fmt.Sprintf("the %s for '%s'", link.op.what, link.target.name)
	}
	return fmt.Sprintf("the %s to '%s'", link.op.what, link.target.name)
}

// maxDropRounds bounds the rounds of interruptWait that an interrupt
// waits after the first, watching, and maybe freeing, a frame reader held
// up by a relayed frame (dropStalled): a group's put may have a
// stopped session among its members after the first. In all, an
// interrupt waits at most (1+maxDropRounds)*interruptWait, 10 s.
const maxDropRounds = 4

// relayProbe is a link whose frame holds s's reader, how much the link's
// target (where the frame goes) had been written, and when that was seen.
type relayProbe struct {
	link    *relayLink
	written int64
	at      time.Time
}

// probeLink notes link (nil for none), its target's count and the time.
func probeLink(link *relayLink) relayProbe {
	if link == nil {
		return relayProbe{}
	}
	return relayProbe{link, link.target.w.Written(), time.Now()}
}

// dropStalled frees s's frame reader when an interrupt's answer waits
// behind link, what holds it up now (nil for nothing): a frame that the
// reader relays for one of s's requests (or a group's part it serves), or
// a chunk that the serve s does passes its caller from a queue
// (serveOp.toCaller), to a session that has taken no byte since probe saw
// the same, half of interruptWait ago at least (stopped, or in C code
// that holds its interpreter; a frame that went would have moved its
// count): that link fails, which ends the relay (the frame goes whole
// once the session reads again, or not at all), and the answer follows.
// It returns what was dropped, "" for nothing; watch says that a relayed
// frame holds the answer up but is not shown stalled yet (a link probe
// had not seen, a session that took bytes, too short a while): probe,
// updated, is to be looked at again after another round.
func (s *Session) dropStalled(link *relayLink, probe *relayProbe) (dropped string, watch bool) {
	if link == nil || link.op.err() != nil {
		*probe = relayProbe{}
		return "", false
	}
	if written := link.target.w.Written(); link != probe.link || written != probe.written {
		*probe = relayProbe{link, written, time.Now()}
		return "", true
	}
	still := time.Since(probe.at)
	if still < interruptWait/2 {
		return "", true
	}
	waited := wire.Duration(still.Seconds())
	link.op.fail(fmt.Errorf("session '%s' took none of the %s's data for %s when '%s' was interrupted; the %s is dropped",
		link.target.name, link.op.what, waited, s.name, link.op.what))
	*probe = relayProbe{}
	return fmt.Sprintf("%s was dropped: '%s' took none of its data for %s (stopped, or in code that holds the interpreter?)",
		link.transfer(), link.target.name, waited), false
}

// maxAsides bounds the frames sendAside has on their way to one worker:
// each holds a goroutine while the worker does not read.
const maxAsides = 8

// sendAside writes m on a goroutine of its own, and tells if the write
// failed: a worker that stopped reading holds it (behind a relayed frame
// stalled on its stdin, say), and what bounds its wait for an answer (an
// interrupt, a query) answers in time all the same. m goes once the
// worker reads again; past maxAsides still on their way, it fails at once.
func (s *Session) sendAside(m proto.Msg) (failed <-chan error) {
	ch := make(chan error, 1)
	if s.asides.Add(1) > maxAsides {
		s.asides.Add(-1)
		ch <- fmt.Errorf("session '%s' has not read the last %d frames sent to it (stopped?)", s.name, maxAsides)
		return ch
	}
	go func() {
		defer s.asides.Add(-1)
		if err := s.send(m); err != nil {
			ch <- err
		}
	}()
	return ch
}

func notDelivered(err error) error {
	return &wire.Error{Code: wire.CodeInternal, Message: fmt.Sprintf("interrupt not delivered: %v", err)}
}
