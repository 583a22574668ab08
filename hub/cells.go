package hub

import (
	"context"
	"fmt"
	"time"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// run is one cell from exec to collection.
type run struct {
	cell     int
	fence    []byte
	start    time.Time
	done     *proto.Done
	display  []wire.Display // the done frame's items, bounded
	dnotes   []string       // what became of the others
	sealed   *output        // output up to the fence, under ReplyCap
	raw      *outBuf        // the same, kept for a reply under another cap
	finished chan struct{}
	result   *wire.Result
	// collecting counts the callers inside collect for this run (its own
	// exec, waits), under Session.mu. A finished run that somebody is
	// collecting is theirs: the next exec does not take it as one that
	// finished while nobody waited.
	collecting int
	// collected is set once a reply has carried the result; it goes to
	// exactly one reply.
	collected bool
	// cancelled is set when the client cancelled the call that ran the
	// cell (an interrupt with Cancelled): the reply that shows it says so.
	cancelled  bool
	fenceTimer *time.Timer
	// queued marks a cell that came through the queue: its code waits in
	// code until it starts (start is zero until then), and an unsent
	// exec's until its frame went; sent is set once its exec frame went.
	queued   bool
	queuedAt time.Time
	code     string
	sent     bool
	// unsent marks a cell of an exec whose frame goes on a goroutine of
	// its own (sendCell, as a queued cell's), until sent is set.
	unsent bool
	// parked is set by an interrupt that came before the frame went.
	parked bool
	// stream is the console or streaming exec that runs the cell and takes
	// its output as it comes (watch.go); nil for a plain exec. by says
	// who queued a queued cell, for the consoles that see it start; a
	// queued cell's stream is who queued it until it starts.
	stream *watcher
	by     string
}

func (r *run) isFinished() bool { return isClosed(r.finished) }

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// maybeFinishLocked finishes r once it has both its done frame and its
// fence; with the done frame alone it waits fenceWait for the fence.
func (s *Session) maybeFinishLocked(r *run) {
	if r.done == nil || r.isFinished() {
		return
	}
	if r.sealed == nil {
		if r.fenceTimer == nil {
			r.fenceTimer = time.AfterFunc(fenceWait, func() {
				s.mu.Lock()
				defer s.mu.Unlock()
				if r.sealed == nil && !r.isFinished() {
					s.notes = append(s.notes, fmt.Sprintf("cell %d's end-of-output marker never arrived (was fd 1 closed or redirected?); its output may continue in the next reply", r.cell))
					s.sealLocked(r)
					s.finishLocked(r)
				}
			})
		}
		return
	}
	if r.fenceTimer != nil {
		r.fenceTimer.Stop()
	}
	s.finishLocked(r)
}

func (s *Session) finishLocked(r *run) {
	f := r.done
	res := &wire.Result{
		Session:    s.name,
		Cell:       r.cell,
		Status:     f.Status,
		Value:      f.Value,
		Error:      f.Error,
		DurationMS: int64(f.Duration * 1000),
		Display:    r.display,
		Notes:      r.dnotes,
	}
	if res.Status != wire.StatusOK && res.Status != wire.StatusError {
		res.Status = wire.StatusError
	}
	applyOutput(res, *r.sealed)
	r.result = res
	s.state = stateIdle
	s.lastActive = time.Now()
	close(r.finished)
	s.forgetCellsExecLocked(r)
	s.cellFinishedLocked(r)
	s.nextLocked()
}

// sealLocked takes the unread output as r's own, rendered under ReplyCap
// and kept raw for a reply under another cap.
func (s *Session) sealLocked(r *run) {
	o := s.out.takeOut()
	sealed := o.render(ReplyCap)
	r.sealed, r.raw = &sealed, o
}

// applyOutput puts out in res: merged, and each stream apart (whose notes
// would only repeat the merged output's).
func applyOutput(res *wire.Result, out output) {
	res.Output = out.all.text
	res.Stdout, res.Stderr = out.stdout.text, out.stderr.text
	res.Truncated = res.Truncated || out.all.truncated
	res.TruncatedChars += out.all.truncatedChars
	res.StdoutTruncated = res.StdoutTruncated || out.stdout.truncated
	res.StderrTruncated = res.StderrTruncated || out.stderr.truncated
	res.Notes = append(res.Notes, out.all.notes...)
}

// BusyError reports a session running a cell.
type BusyError struct {
	Name    string
	Cell    int
	Running time.Duration
	// Advice words the next steps; the zero value, for the CLI.
	Advice wire.Advice
}

func (e *BusyError) Error() string {
	return fmt.Sprintf("session '%s' is busy: cell %d has run for %s; %s waits for it, %s stops it, %s runs yours after it",
		e.Name, e.Cell, wire.Duration(e.Running.Seconds()), e.Advice.Wait(e.Name), e.Advice.Interrupt(e.Name), e.Advice.ExecWith(e.Name, "queue"))
}

// lockLive waits up to timeout for a remote session's link and takes s.mu,
// unless the session is dead: then the error says how it died.
func (s *Session) lockLive(ctx context.Context, timeout time.Duration) error {
	if err := s.awaitLink(ctx, timeout); err != nil {
		return err
	}
	s.mu.Lock()
	if s.state == stateDead {
		s.mu.Unlock()
		return &wire.Error{Code: wire.CodeDead, Message: fmt.Sprintf("session '%s' is dead: %s", s.name, s.death)}
	}
	if s.channelLost != "" {
		s.mu.Unlock()
		return &wire.Error{Code: wire.CodeBusy, Message: s.channelLost}
	}
	return nil
}

// exec runs code as the next cell and waits up to timeout for it.
// limit caps the reply's output (capOf).
func (s *Session) exec(ctx context.Context, code string, timeout time.Duration, noWait bool, limit int, progress func(*wire.Progress), adv wire.Advice) (*wire.Result, error) {
	if err := s.lockLive(ctx, timeout); err != nil {
		return nil, err
	}
	if r := s.cur; r != nil && !r.isFinished() {
		s.mu.Unlock()
		return nil, &wire.Error{Code: wire.CodeBusy, Message: (&BusyError{s.name, r.cell, time.Since(r.start), adv}).Error()}
	}

	if s.serving != nil {
		busy := s.busyWithLocked()
		s.mu.Unlock()
		return nil, &wire.Error{Code: wire.CodeBusy, Message: fmt.Sprintf("session '%s' is busy: %s; try again when it is done", s.name, busy)}
	}
	// A finished result that nobody has collected or is collecting (its
	// exec gave up) comes first in this reply.
	var earlier *wire.Result
	earlierNote := ""
	if r := s.cur; r != nil && !r.collected && r.collecting == 0 && !r.queued {
		raw := r.raw
		earlier = r.resultUnder(limit)
		s.out.letGo(raw)
		r.collected = true
		earlierNote = fmt.Sprintf("cell %d finished while nobody waited; its reply comes first", r.cell)
		if r.cancelled {
			earlierNote = cancelledNote(r.cell) + "; its reply comes first"
		}
	}
	s.cells++
	// This exec collects the run: counted before it can finish (unless
	// it returns at once, and a wait collects it).
	r := &run{cell: s.cells, fence: newFence(), start: time.Now(), finished: make(chan struct{}), collecting: 1}
	if noWait {
		r.collecting = 0
	}
	s.keepLocked(s.cur)
	s.cur = r
	s.state = stateRunning
	s.lastActive = r.start
	s.cellStartedLocked(ctx, r, code)
	// More than a pipe holds, or a frame on the worker's stdin, which
	// carries relayed objects and files too (a session without a cell
	// pipe or link): a worker that reads nothing (stopped, or busy in code
	// that holds the interpreter) would hold this call past its timeout,
	// in the write, behind a frame being written or a stdin full of whole
	// ones. The cell is the session's already; its frame goes as a queued
	// cell's does, when the worker reads, and an interrupt before that
	// parks it (parkUnsent). A cell pipe or link carries one cell's frame
	// at a time, and the last was read before its cell ended.
	r.unsent = len(code) > asyncExecAt || s.cw.Load() == nil
	if s.takeStartInterruptLocked(r) {
		r.unsent = true // sendCell ends it
	}
	if r.unsent {
		r.code = code // until sent: a hand-over meanwhile carries it
	}
	s.mu.Unlock()

	if r.unsent {
		go s.sendCell(r, code)
	} else {
		s.sendExec(r, code)
		// Recorded while the worker runs the cell, not before: the
		// disk's writes stay off the round trip.
		s.hub.transcribe(s, r, code)
	}
	var res *wire.Result
	if noWait {
		res = &wire.Result{Session: s.name, Cell: r.cell, Status: wire.StatusStarted}
	} else {
		res = s.collect(ctx, r, timeout, limit, progress, true)
	}
	if res == nil {
		// The client went away; so did the earlier result it would have shown.
		return nil, nil
	}
	if earlier != nil {
		res.Notes = append([]string{earlierNote}, res.Notes...)
		res.Earlier = earlier
	}
	return res, nil
}

// asyncExecAt is the size of a cell's code past which exec writes its
// frame on a goroutine of its own: a pipe holds 64 KiB.
const asyncExecAt = 48 << 10

// sendExec sends r's exec frame, unless r has ended: a reattach found the
// worker without it and said it did not run (linkUp).
func (s *Session) sendExec(r *run, code string) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if r.isFinished() {
		return
	}
	if err := s.send(s.execFrame(r, code)); err != nil {
		// The worker is dying (its waiter will finish the run as dead),
		// or its link is down (the reattach ends the run).
		s.hub.log.Warn("exec frame not sent", "session", s.name, "err", err)
	}
}

// execFrame is r's exec frame, which asks for the session's names when
// the hub may have missed them (namesLost).
func (s *Session) execFrame(r *run, code string) *proto.Exec {
	s.mu.Lock()
	lost := s.namesLost
	s.namesLost = false
	s.mu.Unlock()
	return &proto.Exec{Cell: r.cell, Code: code, Fence: string(r.fence), Names: lost}
}

// wait collects the running or unread cell, waiting up to timeout; with
// cell, that cell only (an error says why it cannot be).
func (s *Session) wait(ctx context.Context, timeout time.Duration, cell, limit int, progress func(*wire.Progress)) (*wire.Result, error) {
	s.mu.Lock()
	if op := s.serving; op != nil && (op.kind == "swap" || op.kind == "restore") && s.state != stateDead {
		// What nobody has read goes into the swap's record: taken here
		// as well, it would come again on restore. A restore has not yet
		// put back the session's cells: idle now would be a guess. A
		// dead session's is over (a failed restore leaves its op).
		s.mu.Unlock()
		return nil, swapUnderWay{op, s.name}
	}
	r, err := s.toCollectLocked(cell)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	if r == nil || r.collected {
		res := &wire.Result{Session: s.name, Cell: s.cells, Status: wire.StatusIdle}
		if s.state == stateDead {
			res.Status, res.Death = wire.StatusDead, s.death
		}
		applyOutput(res, s.out.takeCap(limit))
		res.Notes = append(s.notes, res.Notes...)
		s.notes = nil
		s.mu.Unlock()
		return res, nil
	}
	r.collecting++
	s.mu.Unlock()
	return s.collect(ctx, r, timeout, limit, progress, false), nil
}

// swapUnderWay is why a wait took nothing: session name is being swapped
// to disk, with what nobody has read, or restored from its swap (op's
// kind); Hub.waitOn waits for the end.
type swapUnderWay struct {
	op   *serveOp
	name string
}

func (e swapUnderWay) Error() string { return e.message(wire.Advice{}) }

// message says so, with advice worded by adv.
func (e swapUnderWay) message(adv wire.Advice) string {
	if e.op.kind == "restore" {
		return fmt.Sprintf("session '%s' is being restored from its swap (what nobody had read comes with the reply of the call that restores it): try %s again in a moment",
			e.name, adv.Wait(e.name))
	}
	return fmt.Sprintf("session '%s' is being swapped to disk (its unread output goes with it): try %s again in a moment",
		e.name, adv.Wait(e.name))
}

// ifGoneKey marks the context of an exec whose client asked that its cell
// end if it goes away before the reply (wire.Request.InterruptIfGone).
type ifGoneKey struct{}

// endsIfGone reports whether ctx is such an exec's, and ended because its
// client went away (not because the hub stops).
func endsIfGone(ctx context.Context) bool {
	on, _ := ctx.Value(ifGoneKey{}).(bool)
	return on && clientGone(ctx)
}

// cancelledNote says that the client cancelled the call that ran a cell.
func cancelledNote(cell int) string {
	return fmt.Sprintf("the client cancelled the call that ran cell %d, so it was interrupted; here is its output", cell)
}

// collect waits for r up to timeout and builds the reply: the finished
// result, or what the cell has written so far with status running. The
// caller has counted itself in r.collecting under s.mu; collect counts it
// out. Of the callers collecting one run, the first to take it finished
// gets its result and the others a reply that says so, never a copy. own
// is set for the exec that started r: once its client has cancelled the
// call (interrupt with Cancelled), it takes nothing, even if it has not
// yet seen its connection close, so the result waits for the next reader.
func (s *Session) collect(ctx context.Context, r *run, timeout time.Duration, limit int, progress func(*wire.Progress), own bool) *wire.Result {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var tick <-chan time.Time
	if progress != nil {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-r.finished:
			s.mu.Lock()
			defer s.mu.Unlock()
			if own && r.cancelled {
				r.collecting--
				return nil
			}
			return s.takeLocked(r, limit)
		case <-tick:
			s.mu.Lock()
			p := &wire.Progress{Session: s.name, Cell: r.cell}
			if !r.start.IsZero() {
				p.ElapsedMS, p.OutputChars = time.Since(r.start).Milliseconds(), s.out.len()
			}
			s.mu.Unlock()
			progress(p)
			continue
		case <-timer.C:
		case <-ctx.Done():
			// Nobody is listening: leave the output for the next reader.
			s.mu.Lock()
			r.collecting--
			s.mu.Unlock()
			if own && endsIfGone(ctx) {
				// Its client asked for that: r is interrupted, and no
				// other cell, its output left for the next reply with a
				// note (cancelledNote); a finished one is left alone. (A
				// queued exec is answered at once, with its cell's
				// number: a call cancelled after that ends nothing.)
				go s.interrupt(wire.AdviceFor(surfaceOf(ctx)), true, r.cell)
			}
			return nil
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.isFinished() {
			return s.takeLocked(r, limit)
		}
		r.collecting--
		if r.start.IsZero() {
			return s.queuedResultLocked(r) // its output, if any, is another cell's
		}
		res := &wire.Result{Session: s.name, Cell: r.cell, Status: wire.StatusRunning,
			DurationMS: time.Since(r.start).Milliseconds()}
		applyOutput(res, s.out.takeCap(limit))
		res.Notes = append(s.notes, res.Notes...)
		s.notes = nil
		return res
	}
}

// takeLocked counts a collector of the finished run r out and gives it r's
// result, unless another collector took it first, its output under limit.
func (s *Session) takeLocked(r *run, limit int) *wire.Result {
	r.collecting--
	if r.collected {
		return &wire.Result{Session: s.name, Cell: r.cell, Status: wire.StatusIdle,
			Notes: []string{fmt.Sprintf("cell %d's output and result went to another reply, which collected them first", r.cell)}}
	}
	r.collected = true
	s.unkeepLocked(r)
	raw := r.raw
	res := r.resultUnder(limit)
	s.out.letGo(raw)
	res.Notes = append(append([]string(nil), s.notes...), res.Notes...)
	if r.cancelled {
		res.Notes = append([]string{cancelledNote(r.cell)}, res.Notes...)
	}
	s.notes = nil
	return res
}

// resultUnder is a copy of r's finished result with its output under
// limit; the raw output it was rendered from is let go, for a result goes
// to one reply.
func (r *run) resultUnder(limit int) *wire.Result {
	res := *r.result
	switch o := r.raw; {
	case o != nil && limit != ReplyCap:
		out := o.render(limit)
		res.Output, res.Truncated, res.TruncatedChars = out.all.text, out.all.truncated, out.all.truncatedChars
		res.Stdout, res.StdoutTruncated = out.stdout.text, out.stdout.truncated
		res.Stderr, res.StderrTruncated = out.stderr.text, out.stderr.truncated
	case o == nil && limit < ReplyCap:
		// Its raw output is gone (a restart, the kept results' budget):
		// the text rendered under ReplyCap is cut again under limit.
		all := recut(res.Output, limit)
		res.Output, res.Truncated, res.TruncatedChars = all.text, res.Truncated || all.truncated, res.TruncatedChars+all.truncatedChars
		out, err := recut(res.Stdout, limit), recut(res.Stderr, limit)
		res.Stdout, res.StdoutTruncated = out.text, res.StdoutTruncated || out.truncated
		res.Stderr, res.StderrTruncated = err.text, res.StderrTruncated || err.truncated
	}
	r.raw = nil
	return &res
}

// recut renders text, already rendered under a larger cap, under limit.
func recut(text string, limit int) rendered {
	var b outBuf
	b.write(true, []byte(text))
	return b.renderAll(limit)
}

// lostDone finishes r when the worker says it is over but its done frame
// never came whole (code in the cell wrote to the frame pipe, and the done
// frame was read as part of a malformed line): every caller would
// otherwise wait on it for ever. Frames arrive in order, so a done frame
// sent before the worker's answer has been read by now.
func (s *Session) lostDone(r *run) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.abandonLocked(r, "ResultLost", fmt.Sprintf(
		"cell %d ended, but its done frame was lost in a malformed frame (did the cell write to the worker's frame pipe?); its value and any exception are unknown", r.cell))
}

// abandonLocked finishes r, whose done frame will not come, with an error
// of type typ saying why.
func (s *Session) abandonLocked(r *run, typ, msg string) {
	if r.done != nil || r.isFinished() {
		return
	}
	s.namesLost = true // its done frame, should it come, is not taken
	r.done = &proto.Done{Cell: r.cell, Status: wire.StatusError, Error: &wire.CellError{Type: typ, Message: msg},
		Duration: time.Since(r.start).Seconds()}
	if r.fenceTimer != nil {
		r.fenceTimer.Stop()
	}
	if r.sealed == nil {
		s.sealLocked(r)
	}
	s.finishLocked(r)
}
