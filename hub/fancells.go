package hub

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/replhub/replhub/nodeset"
	"github.com/replhub/replhub/wire"
)

// A group's cells and its slow starts.
//
// Each host numbers its cells on its own (one session may have been
// exec'd alone, or missed a cell it could not run), so a group's exec gets
// a number of its own, the group cell, and the hub records which cell it
// is on each host: wait and interrupt with a cell number on a group take
// the group's number and reach each host's own cell. The first group cell
// the hub numbers follows the highest cell of the group's sessions, so
// that where the hosts agree the two numbers are the same. The record
// lives as long as the hub, for the last maxFanCells cells of a group;
// after a restart a group's cells are numbered anew and the earlier ones
// are reached by NAME@HOST.
//
// A host whose session is still starting when the cell's timeout ends is
// told as still connecting; its start goes on, and once the session is up
// its cell runs as with --no-wait, for wait to collect. A start that fails
// meanwhile is kept for the group's next wait to tell.

// maxFanCells is how many of a group's cells the hub remembers.
const maxFanCells = 256

// minFanCell is the least time a group's cell is given once its session
// is up, however long the start took.
const minFanCell = 500 * time.Millisecond

// fanCells is what the hub knows of a group's cells. Guarded by Hub.mu.
type fanCells struct {
	last  int                    // the last group cell numbered
	hosts map[int]map[string]int // group cell → host → that host's cell
	// starting holds, by host, a start that outlived its exec's timeout.
	starting map[string]*fanStart
}

// fanStart is a group session's start going on in the background.
type fanStart struct {
	since time.Time
	done  chan struct{} // closed when the start and its cell's launch ended
	err   error         // why they failed; written before done is closed
}

// newFanCell numbers the next cell of group, run on hosts.
func (h *Hub) newFanCell(group string, hosts []string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	fc := h.fanCells[group]
	if fc == nil {
		fc = &fanCells{hosts: map[int]map[string]int{}, starting: map[string]*fanStart{}}
		for _, host := range hosts {
			if s := h.sessions[memberName(group, host)]; s != nil {
				s.mu.Lock()
				fc.last = max(fc.last, s.cells)
				s.mu.Unlock()
			}
		}
		h.fanCells[group] = fc
	}
	fc.last++
	fc.hosts[fc.last] = map[string]int{}
	delete(fc.hosts, fc.last-maxFanCells)
	return fc.last
}

// noteFanCell records that group cell g is cell on host.
func (h *Hub) noteFanCell(group string, g int, host string, cell int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if fc := h.fanCells[group]; fc != nil && fc.hosts[g] != nil && cell > 0 {
		fc.hosts[g][host] = cell
	}
}

// checkFanCell refuses a cell number the group never had in this hub.
func (h *Hub) checkFanCell(group string, g int, adv wire.Advice) error {
	if err := checkCell(g); err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	fc := h.fanCells[group]
	if g == 0 || (fc != nil && fc.hosts[g] != nil) {
		return nil
	}
	known := "this hub has numbered none of its cells yet"
	if fc != nil {
		known = fmt.Sprintf("this hub knows its cells %d to %d", max(1, fc.last-maxFanCells+1), fc.last)
	}
	return &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf(
		"group '%s' has no cell %d on record (%s): %s with that host's own cell number reaches it", group, g, known, adv.Wait(memberName(group, "HOST")))}
}

// fanCellOn is the cell that group cell g is on host.
func (h *Hub) fanCellOn(group string, g int, host string) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if fc := h.fanCells[group]; fc != nil {
		if cell := fc.hosts[g][host]; cell > 0 {
			return cell, nil
		}
	}
	return 0, &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf("group cell %d did not run on %s", g, host)}
}

// startingOn returns the start of group's session on host that outlived
// an exec, if one is kept.
func (h *Hub) startingOn(group, host string) *fanStart {
	h.mu.Lock()
	defer h.mu.Unlock()
	if fc := h.fanCells[group]; fc != nil {
		return fc.starting[host]
	}
	return nil
}

// keepStarting keeps st as the start of group's session on host; with
// st nil, it forgets old if that is the one kept, or, with old nil too,
// whichever is kept.
func (h *Hub) keepStarting(group, host string, st, old *fanStart) {
	h.mu.Lock()
	defer h.mu.Unlock()
	fc := h.fanCells[group]
	if fc == nil {
		return
	}
	switch {
	case st != nil:
		fc.starting[host] = st
	case old == nil || fc.starting[host] == old:
		delete(fc.starting, host)
	}
}

// stillConnecting is a host whose session is still starting.
func stillConnecting(member string, since time.Time) wire.HostResult {
	return wire.HostResult{Result: &wire.Result{Session: member, Status: wire.StatusRunning, DurationMS: time.Since(since).Milliseconds()}, Connecting: true}
}

// fanMade is what the start of a group's session told, for the reply
// of the cell that follows: whether it created the session, and the death
// note of the one before.
type fanMade struct {
	created  bool
	previous string
}

// fanExecOn runs group cell g in session sub.Name on host: the session's
// start and the cell together are bounded by limit. A start that outlives
// it goes on in the background (see above). made is what an earlier start
// of this request told (fanStartRoot).
func (h *Hub) fanExecOn(ctx context.Context, sub wire.Request, group string, g int, host string, limit time.Duration, made fanMade) wire.HostResult {
	type ensured struct {
		s *Session
		fanMade
	}
	handoff := make(chan ensured) // to the request, while it waits
	gaveUp := make(chan struct{}) // closed when the request stopped waiting
	late := true                  // whether the cell runs once the session is up; set before gaveUp is closed
	st := &fanStart{since: time.Now(), done: make(chan struct{})}
	// The start outlives the request: one cut short in the middle would
	// leave nothing for wait to tell.
	bg := context.WithoutCancel(ctx)
	go func() {
		defer close(st.done)
		s, created, previous, err := h.ensure(bg, sub)
		if wire.IsCode(err, wire.CodeNeedPassword) {
			// The host answered after fanStartRoot had asked the others:
			// the cell has run elsewhere, so the request cannot come again.
			err = fmt.Errorf("sudo wants a password on %s, which answered too late to be asked with the others: exec the group again to be asked, or allow NOPASSWD there", host)
		}
		if err != nil {
			st.err = err
			return
		}
		select {
		case handoff <- ensured{s, fanMade{created || made.created, previous + made.previous}}:
			return
		case <-gaveUp:
		}
		if startedHere(created, previous) {
			// After its cell, or at once where the request gave up.
			defer s.forgetStartInterrupt()
		}
		if !late {
			return
		}
		bgSub := sub
		bgSub.NoWait = true
		res, err := h.runCell(bg, s, bgSub, created || made.created, previous+made.previous, nil)
		if err != nil {
			st.err = err
			return
		}
		h.noteFanCell(group, g, host, res.Cell)
		h.keepStarting(group, host, nil, st)
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case e := <-handoff:
		// The session is up: what an earlier exec's start told is past.
		h.keepStarting(group, host, nil, nil)
		sub.Timeout = max(limit-time.Since(st.since), minFanCell).Seconds()
		res, err := h.runCell(ctx, e.s, sub, e.created, e.previous, nil)
		if startedHere(e.created, e.previous) {
			e.s.forgetStartInterrupt()
		}
		if err != nil {
			return failedHost(sub.Name, err)
		}
		h.noteFanCell(group, g, host, res.Cell)
		return wire.HostResult{Result: res}
	case <-st.done:
		return failedHost(sub.Name, st.err)
	case <-timer.C:
	case <-ctx.Done():
		late = false
	}
	close(gaveUp)
	h.keepStarting(group, host, st, nil)
	return stillConnecting(sub.Name, st.since)
}

// fanWaitOn collects, on host, the group's running or unread cell (or
// group cell req.Cell): once a start that outlived its exec has ended.
func (h *Hub) fanWaitOn(ctx context.Context, req wire.Request, host string) wire.HostResult {
	sub := req
	sub.Name = memberName(req.Name, host)
	limit := timeoutOf(req.Timeout)
	begin := time.Now()
	if st := h.startingOn(req.Name, host); st != nil {
		timer := time.NewTimer(limit)
		defer timer.Stop()
		select {
		case <-st.done:
		case <-timer.C:
			return stillConnecting(sub.Name, st.since)
		case <-ctx.Done():
			return failedHost(sub.Name, ctx.Err())
		}
		h.keepStarting(req.Name, host, nil, st)
		if st.err != nil {
			return failedHost(sub.Name, st.err)
		}
		sub.Timeout = max(limit-time.Since(begin), minFanCell).Seconds()
	}
	if req.Cell > 0 {
		cell, err := h.fanCellOn(req.Name, req.Cell, host)
		if err != nil {
			return failedHost(sub.Name, err)
		}
		sub.Cell = cell
	}
	res, err := h.Wait(ctx, sub, nil)
	if err != nil {
		return failedHost(sub.Name, err)
	}
	res.Others = ""
	return wire.HostResult{Result: res}
}

// fanStartRoot starts, before any cell runs, the sessions of a root group
// that are not up yet, so that where sudo wants a password the client is
// asked once for the whole group, and no host has run the cell when the
// request comes again with the password (the hub then hands a copy to
// each host that wants one). It returns what each start told, and the
// request for the password, or nil when no host wants one. A start that
// outlives limit goes on; the cell's turn then waits for it as for any.
func (h *Hub) fanStartRoot(ctx context.Context, req wire.Request, hosts []string, limit time.Duration) (map[string]fanMade, error) {
	var mu sync.Mutex
	made := map[string]fanMade{}
	var asking []string
	var prompt wire.Request
	parallel(len(hosts), func(i int) {
		sub := memberRequest(req, hosts[i])
		h.mu.Lock()
		up := h.sessions[sub.Name] != nil
		h.mu.Unlock()
		if up {
			return
		}
		type started struct {
			fanMade
			err error
		}
		done := make(chan started, 1)
		// As in fanExecOn, the start outlives the request.
		go func() {
			_, created, previous, err := h.ensure(context.WithoutCancel(ctx), sub)
			done <- started{fanMade{created, previous}, err}
		}()
		timer := time.NewTimer(limit)
		defer timer.Stop()
		select {
		case st := <-done:
			mu.Lock()
			defer mu.Unlock()
			if wire.IsCode(st.err, wire.CodeNeedPassword) {
				asking = append(asking, hosts[i])
				prompt = sub
			} else if st.err == nil {
				made[hosts[i]] = st.fanMade
			}
		case <-timer.C:
		case <-ctx.Done():
		}
	})
	if len(asking) == 0 {
		return made, nil
	}
	// Fold sorts the hosts itself, whatever order they answered in.
	prompt.Name, prompt.Host = memberName(req.Name, "HOST"), nodeset.Fold(asking)
	return made, &wire.Error{Code: wire.CodeNeedPassword, Prompt: h.promptFor(prompt),
		Message: fmt.Sprintf("root group '%s' needs sudo's password on %s", req.Name, prompt.Host)}
}
