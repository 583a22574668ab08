package hub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/replhub/replhub/wire"
)

// errNoTranscript says that a run's session keeps no transcript: it was
// not asked to (--transcript).
var errNoTranscript = errors.New("hub: a run keeps no transcript")

// run answers a private exec (replhub run): a new session that nobody else
// sees runs the one cell and ends with the call, however the call ends: a
// result, the timeout (the cell is stopped: StatusTimeout), or a client
// that went away.
func (h *Hub) run(ctx context.Context, req wire.Request, progress func(*wire.Progress)) (*wire.Result, error) {
	if req.NoWait {
		return nil, &wire.Error{Code: wire.CodeBadRequest, Message: "a run waits for its cell: no_wait is for exec"}
	}
	s, _, _, err := h.ensure(ctx, req)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := h.end(s); err != nil {
			h.log.Error("a run's session did not end", "session", s.name, "err", err)
		}
	}()
	res, err := s.exec(ctx, req.Code, timeoutOf(req.Timeout), false, capOf(req.MaxOutput), progress, wire.AdviceFor(req.Surface))
	if err != nil {
		return nil, err
	}
	if res == nil {
		if clientGone(ctx) {
			return nil, ctx.Err()
		}
		return nil, &wire.Error{Code: wire.CodeShutdown, Message: "the hub stopped during the run; the run's session ended with it"}
	}
	if res.Status == wire.StatusRunning {
		res.Status = wire.StatusTimeout
	}
	if e := res.Error; e != nil && e.Type == "SystemExit" {
		// The worker says what it says in any session; a run's does not
		// go on.
		if m, ok := strings.CutSuffix(e.Message, " was caught; the session goes on"); ok {
			e.Message = m + " ended the run"
		}
	}
	res.Notes = append(h.takeWarnings(), res.Notes...)
	return res, nil
}

// endAdoptedRuns ends the runs among the sessions just adopted from
// recs: their callers went with the previous hub, and nobody else may
// reach them. Like any run, they leave no death note. So does a worker
// that a swap took the place of (liveRecord.swapped).
func (h *Hub) endAdoptedRuns(recs []liveRecord) {
	for _, rec := range recs {
		if !rec.ends() {
			continue
		}
		h.mu.Lock()
		s := h.sessions[rec.Name]
		h.mu.Unlock()
		if s == nil {
			continue
		}
		s.mu.Lock()
		s.private = true
		s.mu.Unlock()
		if err := h.end(s); err != nil {
			h.log.Warn("a run left by the previous hub did not end", "session", rec.Name, "err", err)
			continue
		}
		h.log.Info("ended a run left by the previous hub", "session", rec.Name)
	}
}

// dropRunRecord removes the record of a run that could not be adopted: it
// leaves no death note.
func (h *Hub) dropRunRecord(rec liveRecord) {
	os.Remove(h.livePath(rec.Name))
	if rec.Sock != "" {
		os.Remove(rec.Sock)
	}
}

// end kills a started session on purpose (no death note) and waits a
// bounded time for its worker to go.
func (h *Hub) end(s *Session) error {
	s.mu.Lock()
	s.killed = true
	lost := s.channelLost != ""
	s.mu.Unlock()
	if lp, ok := s.proc.(*linkProc); ok && lost {
		// Its code closed the channel, the read end perhaps: the exit
		// frame on the link may never be read. It is told through its
		// socket too, as a new hub would tell it.
		go lp.tellExit()
	}
	if s.proc != nil {
		s.proc.Kill()
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(5 * time.Second):
		return &wire.Error{Code: wire.CodeInternal, Message: fmt.Sprintf("session '%s' did not end within 5s of SIGKILL", s.name)}
	}
}
