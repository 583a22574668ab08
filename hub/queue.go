package hub

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/replhub/replhub/nodeset"
	"github.com/replhub/replhub/wire"
)

// A session's queue. An exec with Queue on a busy session does not refuse
// the cell: it gets the next number at once and waits in a FIFO that the
// hub holds (the worker never sees a queued cell before its turn, so taking
// one out is the hub's business alone). When the running cell finishes
// (finishLocked), the first queued one starts at once, under the same
// lock, so no other request sees the session idle in between.
//
// A finished cell nobody collected moves to kept when the next one starts,
// for wait with its number (or a plain wait, oldest first) to read. The
// queue and kept are bounded; a result dropped past the bound, a cell
// taken out, one lost with a hub: gone says why, for the wait that asks.
//
// A restart on request hands the queue and kept results over (adopt.go);
// a hub that was killed cannot, and the adopting hub names the cells lost.

// Bounds of one session's queue, of the unread results of cells that ran
// from it, and of the reasons kept for results that are gone.
const (
	maxQueue      = 64
	maxQueueBytes = 64 << 20 // the queued cells' code, held by the hub
	maxKept       = 64
	// keptRawBudget bounds the raw output that kept results hold for a
	// reply under another cap (up to UnreadCap each); past it the oldest
	// give theirs up, and answer from their text rendered under ReplyCap.
	keptRawBudget = 2 * UnreadCap
	maxGone       = 256
)

// checkCell refuses a negative cell number; 0 is a request's "no number".
func checkCell(n int) error {
	if n < 0 {
		return &wire.Error{Code: wire.CodeBadRequest, Message: "a cell number is 1 or more"}
	}
	return nil
}

// enqueue puts code at the end of the queue. A cell that can start at
// once does, and the call then collects it as exec does (or, with noWait,
// says it started); one that must wait answers at once with its number.
// Either way it is a queued cell: a later exec never takes its result
// into its own reply, a wait with its number does.
func (s *Session) enqueue(ctx context.Context, code string, timeout time.Duration, noWait bool, limit int, progress func(*wire.Progress), adv wire.Advice) (*wire.Result, error) {
	if err := s.lockLive(ctx, timeout); err != nil {
		return nil, err
	}
	res, err := s.queueLocked(code, adv)
	if err != nil {
		s.mu.Unlock()
		return nil, err
	}
	r := s.queue[len(s.queue)-1]
	// A console's queued cell streams to it when its turn comes. A
	// streaming exec's watcher ends with its request, which a queued cell
	// outlives: it is not kept (nor streamed to when the cell starts at
	// once), so no cell starts on a watcher already closed.
	if w := watcherOf(ctx); w != nil && w.person {
		r.stream = w
	}
	r.by = byOf(ctx, r.stream)
	if !noWait {
		r.collecting = 1 // counted before it can finish, as exec does
	}
	s.nextLocked()
	if r != s.cur {
		r.collecting = 0 // it waits its turn; a wait collects it
		s.mu.Unlock()
		return res, nil
	}
	s.mu.Unlock()
	if noWait {
		return &wire.Result{Session: s.name, Cell: r.cell, Status: wire.StatusStarted}, nil
	}
	return s.collect(ctx, r, timeout, limit, progress, true), nil
}

// queueLocked puts code at the end of the queue; s.mu is held.
func (s *Session) queueLocked(code string, adv wire.Advice) (*wire.Result, error) {
	if len(s.queue) >= maxQueue {
		return nil, &wire.Error{Code: wire.CodeBusy, Message: fmt.Sprintf(
			"session '%s' has %d cells queued, the most it holds: %s collects them as they finish, %s takes one out",
			s.name, maxQueue, adv.Wait(s.name), adv.InterruptCell(s.name, s.queue[0].cell))}
	}
	held := len(code)
	for _, q := range s.queue {
		held += len(q.code)
	}
	if held > maxQueueBytes && len(s.queue) > 0 {
		return nil, &wire.Error{Code: wire.CodeBusy, Message: fmt.Sprintf(
			"session '%s' has %d MB of code queued, and this cell would pass the %d MB it holds: %s collects the queued cells as they finish",
			s.name, (held-len(code))>>20, maxQueueBytes>>20, adv.Wait(s.name))}
	}
	s.cells++
	r := &run{cell: s.cells, code: code, queued: true, queuedAt: time.Now(), finished: make(chan struct{})}
	s.queue = append(s.queue, r)
	// The record counts the queued cell: a hub that dies with the queue
	// lets its successor name the cells it lost.
	s.hub.touchLiveLocked(s)
	return s.queuedResultLocked(r), nil
}

// aheadLocked counts the cells that run before the queued r, the running
// one included.
func (s *Session) aheadLocked(r *run) int {
	n := slices.Index(s.queue, r)
	if c := s.cur; c != nil && !c.isFinished() {
		n++
	}
	return n
}

// nextLocked starts the first queued cell once the session is free; s.mu
// is held. Its frame goes from a goroutine of its own: a big cell must not
// hold the lock while the pipe takes it.
func (s *Session) nextLocked() {
	if len(s.queue) == 0 || s.state == stateDead || s.serving != nil || s.detachFence != nil || s.relinking {
		return
	}
	if c := s.cur; c != nil && !c.isFinished() {
		return
	}
	r := s.queue[0]
	s.queue = slices.Delete(s.queue, 0, 1)
	s.keepLocked(s.cur)
	code := r.code // kept on r until sent: a hand-over meanwhile carries it
	if r.fence == nil {
		r.fence = newFence() // a handed-over cell's is the one its frame had
	}
	r.start = time.Now()
	s.cur = r
	s.state = stateRunning
	s.lastActive = r.start
	s.takeStartInterruptLocked(r)
	s.queuedStartedLocked(r, code)
	go s.sendCell(r, code)
}

// sendCell records and sends a cell that nextLocked started, or a big
// exec's (unsent). imu orders its frame with an interrupt's: an interrupt
// that came first parked the cell (parkUnsent), which then ends without
// running.
func (s *Session) sendCell(r *run, code string) {
	defer s.hub.transcribe(s, r, code)
	s.imu <- struct{}{}
	defer func() { <-s.imu }()
	s.mu.Lock()
	if r.parked {
		s.abandonLocked(r, "KeyboardInterrupt", fmt.Sprintf("cell %d was interrupted before it started, so it did not run", r.cell))
		r.code = ""
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	s.sendExec(r, code)
	s.mu.Lock()
	r.sent, r.code = true, ""
	s.mu.Unlock()
}

// takeStartInterruptLocked parks r, the session's first cell, when an
// interrupt came while the session started (stillStarting), and reports
// whether it did; s.mu is held.
func (s *Session) takeStartInterruptLocked(r *run) bool {
	if !s.startInterrupted {
		return false
	}
	s.startInterrupted = false
	r.parked = true
	return true
}

// startedHere reports whether the ensure that answered created and
// previous started the session, or restored it from its swap (which
// previous then tells of): the call that owns what came during the start.
func startedHere(created bool, previous string) bool { return created || previous != "" }

// forgetStartInterrupt drops an interrupt kept for the session's first
// cell (stillStarting) once the call that started the session is done with
// it: its cell took it, or never started (its client went, the session
// died), or none was to run (a session's own request to open another, a
// group's exec given up). The next cell is not the one it was meant for.
func (s *Session) forgetStartInterrupt() {
	s.mu.Lock()
	s.startInterrupted = false
	s.mu.Unlock()
}

// parkUnsent marks r, when its exec frame has not gone yet (a queued
// cell's, a big exec's), to end as interrupted instead of running; the
// caller holds imu.
func (s *Session) parkUnsent(r *run) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if (r.queued || r.unsent) && !r.sent {
		r.parked = true
	}
	return r.parked
}

// keepLocked keeps the finished, unread r for a later wait, when a new
// cell takes its place; past maxKept the oldest result is dropped.
func (s *Session) keepLocked(r *run) {
	if r == nil || !r.isFinished() || r.collected || slices.Contains(s.kept, r) {
		return
	}
	s.kept = append(s.kept, r)
	held := 0
	for i := len(s.kept) - 1; i >= 0; i-- {
		k := s.kept[i]
		if k.raw == nil {
			continue
		}
		if held += k.raw.size(); held > keptRawBudget {
			s.out.letGo(k.raw)
			k.raw = nil
		}
	}
	if len(s.kept) > maxKept {
		old := s.kept[0]
		s.kept = slices.Delete(s.kept, 0, 1)
		old.collected = true
		s.out.letGo(old.raw)
		old.raw = nil
		why := fmt.Sprintf("cell %d's result was dropped unread: a session keeps at most %d unread results, and later cells finished", old.cell, maxKept)
		s.goneLocked(old.cell, why)
		s.notes = append(s.notes, why)
	}
}

// goneLocked remembers why cell's result cannot be read. Past maxGone an
// older cell's reason goes; cell's own, when it is older than all of them
// (a hand-over's cells may come in any order).
func (s *Session) goneLocked(cell int, why string) {
	if s.gone == nil {
		s.gone = map[int]string{}
	}
	if _, ok := s.gone[cell]; !ok && len(s.gone) >= maxGone {
		older := false
		for c := range s.gone {
			if c < cell {
				delete(s.gone, c)
				older = true
				break
			}
		}
		if !older {
			return
		}
	}
	s.gone[cell] = why
}

// unkeepLocked forgets r once a reply has its result.
func (s *Session) unkeepLocked(r *run) {
	if i := slices.Index(s.kept, r); i >= 0 {
		s.kept = slices.Delete(s.kept, i, i+1)
	}
}

// findLocked returns cell n: running, queued or kept; nil otherwise.
func (s *Session) findLocked(n int) *run {
	if r := s.cur; r != nil && r.cell == n {
		return r
	}
	for _, r := range s.queue {
		if r.cell == n {
			return r
		}
	}
	for _, r := range s.kept {
		if r.cell == n {
			return r
		}
	}
	return nil
}

// toCollectLocked picks the run a wait collects: cell n, or without n the
// oldest unread result, else the running or last cell. An error says why
// cell n cannot be collected.
func (s *Session) toCollectLocked(n int) (*run, error) {
	if n == 0 {
		if len(s.kept) > 0 {
			return s.kept[0], nil
		}
		return s.cur, nil
	}
	r := s.findLocked(n)
	if r != nil && !r.collected {
		return r, nil
	}
	msg := s.notStarted(n, s.cells)
	if why := s.gone[n]; why != "" {
		msg = why
	} else if n <= s.cells {
		msg = fmt.Sprintf("cell %d of session '%s' was collected already: a result goes to one reply", n, s.name)
	}
	return nil, &wire.Error{Code: wire.CodeBadRequest, Message: msg}
}

// notStarted says that cell n has not started, last being the session's
// last cell.
func (s *Session) notStarted(n, last int) string {
	return fmt.Sprintf("cell %d of session '%s' has not started: the last cell is %d", n, s.name, last)
}

// queuedResultLocked is what an exec that queues a cell, or a wait that
// timed out, says of a cell that has not started.
func (s *Session) queuedResultLocked(r *run) *wire.Result {
	return &wire.Result{Session: s.name, Cell: r.cell, Status: wire.StatusQueued, Ahead: s.aheadLocked(r)}
}

// takeOut takes queued cell n out of the queue: it will not run. ok is
// false when n is not queued.
func (s *Session) takeOut(n int) (msg string, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.queue, func(r *run) bool { return r.cell == n })
	if i < 0 {
		return "", false
	}
	r := s.queue[i]
	s.queue = slices.Delete(s.queue, i, i+1)
	r.code = ""
	why := fmt.Sprintf("cell %d of session '%s' was taken out of the queue (interrupt) and never ran", n, s.name)
	r.result = &wire.Result{Session: s.name, Cell: n, Status: wire.StatusError,
		Error: &wire.CellError{Type: "NotRun", Message: why}}
	close(r.finished)
	if r.collecting == 0 {
		// Nobody waits on it: a later wait hears why, in one line.
		r.collected = true
		s.goneLocked(n, why)
	}
	s.hub.transcribeNoteLocked(s, fmt.Sprintf("cell %d taken out of the queue; it never ran", n), "")
	return fmt.Sprintf("took cell %d out of session '%s''s queue: it will not run (%d cells still queued)", n, s.name, len(s.queue)), true
}

// interruptCell aims an interrupt at cell n: a queued cell is taken out,
// the running one interrupted; one that finished is left alone, and the
// answer says so.
func (s *Session) interruptCell(adv wire.Advice, n int) (string, error) {
	if msg, ok := s.takeOut(n); ok {
		return msg, nil
	}
	s.mu.Lock()
	r, dead, last := s.findLocked(n), s.state == stateDead, s.cells
	running := r != nil && r == s.cur && !r.isFinished()
	unread := r != nil && r.isFinished() && !r.collected
	s.mu.Unlock()
	switch {
	case dead || running:
		return s.interrupt(adv, false, n)
	case n > last:
		return "", &wire.Error{Code: wire.CodeBadRequest, Message: s.notStarted(n, last)}
	case unread:
		return fmt.Sprintf("cell %d of session '%s' has finished: nothing to interrupt; %s shows its result", n, s.name, adv.WaitCell(s.name, n)), nil
	}
	return fmt.Sprintf("cell %d of session '%s' has finished: nothing to interrupt", n, s.name), nil
}

// unreadNote tells an exec's reply of the results of earlier cells that
// wait unread, as the line about other sessions tells of theirs.
func (s *Session) unreadNote(adv wire.Advice) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.kept) == 0 {
		return ""
	}
	which := "the first"
	if len(s.kept) == 1 {
		which = "it"
	}
	return fmt.Sprintf("%s finished unread: %s collects %s", cellList(queuedCells(s.kept)), adv.WaitCell(s.name, s.kept[0].cell), which)
}

// queuedLocked says how many cells wait in the queue, for a line about
// the session; s.mu is held.
func (s *Session) queuedLocked() string {
	if len(s.queue) == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d queued)", len(s.queue))
}

// queuedAfter says, after an interrupt, that the queued cells still run.
func (s *Session) queuedAfter(adv wire.Advice) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return ""
	}
	return fmt.Sprintf("; the %d queued after it still run (%s takes one out)", len(s.queue), adv.InterruptCell(s.name, s.queue[0].cell))
}

// queueDiedLocked ends every queued cell of a session that died: each
// waiter hears that its cell never ran. It returns the cells that never
// ran and those whose results nobody had read; s.mu is held.
func (s *Session) queueDiedLocked() (never, unread []int) {
	for _, r := range s.queue {
		never = append(never, r.cell)
		r.code = ""
		r.result = &wire.Result{Session: s.name, Cell: r.cell, Status: wire.StatusDead,
			Death: fmt.Sprintf("session '%s' died before cell %d ran (it was queued): %s", s.name, r.cell, s.death)}
		close(r.finished)
	}
	s.queue = nil
	for _, r := range s.kept {
		unread = append(unread, r.cell)
	}
	return never, unread
}

// cellList renders cell numbers as "cells 3, 5-9", or "cell 4".
func cellList(cells []int) string {
	if len(cells) == 1 {
		return fmt.Sprintf("cell %d", cells[0])
	}
	return "cells " + strings.Join(nodeset.Ranges(cells, 0), ", ")
}

// queueInfoLocked fills what sessions shows of the queue; s.mu is held.
func (s *Session) queueInfoLocked(info *wire.SessionInfo, now time.Time) {
	for _, r := range s.queue {
		line, _, _ := strings.Cut(strings.TrimSpace(r.code), "\n")
		if len(line) > 80 {
			line = strings.ToValidUTF8(line[:77], "") + "..."
		}
		info.Queued = append(info.Queued, wire.QueuedCell{Cell: r.cell, Code: line, WaitedS: now.Sub(r.queuedAt).Seconds()})
	}
	info.UnreadCells = append(info.UnreadCells, queuedCells(s.kept)...)
}

// queuedCells lists the numbers of runs.
func queuedCells(rs []*run) []int {
	cells := make([]int, len(rs))
	for i, r := range rs {
		cells[i] = r.cell
	}
	return cells
}

// queuedCode is a queued cell in a hand-over. Fence is that of a cell
// whose exec frame may have gone (started, not known to be sent).
type queuedCode struct {
	Cell  int       `json:"cell"`
	Code  string    `json:"code"`
	At    time.Time `json:"at"`
	Fence string    `json:"fence,omitempty"`
}

// handQueueOverLocked puts the queue and the unread results in ho, for
// the next hub. A cell started but perhaps not yet sent goes too: the next
// hub skips it if the worker says it has it, and sends it with the fence
// its frame had, so that a worker that reads this hub's frame only after
// it answered the next hub (it read nothing meanwhile: stopped, or in code
// that holds the interpreter) runs it once (its exec fences). s.mu is held.
func (s *Session) handQueueOverLocked(ho *handover) {
	if r := s.cur; r != nil && (r.queued || r.unsent) && !r.sent && !r.parked && !r.isFinished() {
		at := r.queuedAt
		if !r.queued {
			at = r.start
		}
		ho.Queue = append(ho.Queue, queuedCode{Cell: r.cell, Code: r.code, At: at, Fence: string(r.fence)})
	}
	for _, r := range s.queue {
		ho.Queue = append(ho.Queue, queuedCode{Cell: r.cell, Code: r.code, At: r.queuedAt})
	}
	for _, r := range s.kept {
		if !r.collected && r.result != nil {
			ho.Kept = append(ho.Kept, r.result)
		}
	}
	ho.Gone = maps.Clone(s.gone)
}

// takeQueueOver rebuilds the queue and unread results an earlier hub
// handed over; a cell the worker has had already (at most its last cell,
// have) is not queued again. The record is a file on disk, so its lengths
// are held to the hub's own bounds: past maxQueue the later cells are not
// queued, past maxKept the older results are dropped, each with a word
// why its cell's result will not come.
func (s *Session) takeQueueOver(ho *handover, have int) {
	for _, q := range ho.Queue {
		if q.Cell <= have {
			continue
		}
		if len(s.queue) >= maxQueue {
			s.goneLocked(q.Cell, fmt.Sprintf("cell %d of session '%s' never ran: the hub that handed the queue over had more than %d cells queued", q.Cell, s.name, maxQueue))
			continue
		}
		r := &run{cell: q.Cell, code: q.Code, queued: true, queuedAt: q.At, finished: make(chan struct{})}
		if isFence(q.Fence) {
			r.fence = []byte(q.Fence)
		}
		s.queue = append(s.queue, r)
	}
	kept := slices.DeleteFunc(slices.Clone(ho.Kept), func(res *wire.Result) bool { return res == nil })
	if len(kept) > maxKept {
		for _, res := range kept[:len(kept)-maxKept] {
			s.goneLocked(res.Cell, fmt.Sprintf("cell %d's result was dropped unread: a session keeps at most %d unread results", res.Cell, maxKept))
		}
		kept = kept[len(kept)-maxKept:]
	}
	for _, res := range kept {
		r := &run{cell: res.Cell, result: res, queued: true, finished: make(chan struct{})}
		close(r.finished)
		s.kept = append(s.kept, r)
	}
	s.takeGone(ho.Gone)
}

// takeGone takes the reasons an earlier hub, or a swap, kept for cells
// whose results will not come; read from a file, they are held to
// maxGone (goneLocked) and to the session's cells.
func (s *Session) takeGone(gone map[int]string) {
	for c, why := range gone {
		if c >= 1 && c <= s.cells && why != "" {
			s.goneLocked(c, why)
		}
	}
}

// queueLost says which queued cells a hub that was killed took with it:
// the record counted them (queueLocked), the worker never had them; have
// is the last cell the session ran, in this worker or (restored) before
// its swap.
func (s *Session) queueLost(have int, rec liveRecord) {
	if rec.Cells <= have {
		return
	}
	var lost []int
	for c := have + 1; c <= rec.Cells && len(lost) < maxQueue+1; c++ {
		lost = append(lost, c)
	}
	why := fmt.Sprintf("%s of session '%s' never ran: queued in the hub (pid %d) that ended without handing its queue over", cellList(lost), s.name, rec.HubPid)
	for _, c := range lost {
		s.goneLocked(c, why)
	}
	s.notes = append(s.notes, why)
}

// resultsLost says of the cells up to last, which finished in a hub that
// was killed, that their results went with it: that hub held those
// nobody had collected, at most maxKept and its last cell's. s.mu is not
// needed: the session is not yet in the hub's table.
func (s *Session) resultsLost(last int, rec liveRecord) {
	for c := max(1, last-maxKept); c <= last; c++ {
		s.goneLocked(c, fmt.Sprintf("cell %d of session '%s' finished in the hub (pid %d) that ended without handing the session over: its result, unless collected there, went with that hub", c, s.name, rec.HubPid))
	}
}
