package hub

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/replhub/replhub/wire"
)

// errNoTranscript is a private session's answer to a transcript it keeps
// no transcript of.
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
		return nil, ctx.Err()
	}
	if res.Status == wire.StatusRunning {
		res.Status = wire.StatusTimeout
	}
	h.mu.Lock()
	res.Notes = append(h.warnings, res.Notes...)
	h.warnings = nil
	h.mu.Unlock()
	return res, nil
}

// end kills a started session on purpose (no death note) and waits a
// bounded time for its worker to go.
func (h *Hub) end(s *Session) error {
	s.mu.Lock()
	s.killed = true
	s.mu.Unlock()
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
