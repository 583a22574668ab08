package hub

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// Queries (vars, inspect, complete, reset) go to the session's worker as a
// query frame and come back as an answer frame; the worker decides when
// it may answer (between cells: boot/replhub_toolkit/query.py). The hub counts no cell
// for them and, but for a reset's note, writes nothing to the transcript.

// queryIDs numbers query frames, hub-wide, from a start that no earlier
// hub's numbers reach: an adopted worker may still answer a query of the
// hub before, and that answer must not pass for one of this hub's.
var queryIDs atomic.Int64

func init() { queryIDs.Store(time.Now().UnixMilli() << 16) }

// queryBudget is how long past its wait a query may take: the worker's
// own budget for it (BUDGET + GRACE in boot/replhub_toolkit/query.py) and a margin for the
// frames' way, over ssh too.
const queryBudget = 15 * time.Second

// maxQueryText bounds an inspect's expression and a completion's text.
const maxQueryText = 64 << 10

func (h *Hub) handleQuery(ctx context.Context, req wire.Request) wire.Reply {
	a, err := h.Query(ctx, req)
	if err != nil {
		return replyErr(err)
	}
	if a == nil {
		return wire.Reply{} // the client went away
	}
	if req.Plain || req.JSON {
		// Package early's call: the text, or the JSON, it prints.
		if p := a.Plain(req.JSON); p != nil {
			return wire.Reply{Plain: p}
		}
	}
	return wire.Reply{Answer: a}
}

// Query asks session req.Name the question req.Op (wire.OpVars, OpInspect,
// OpComplete, OpReset). It returns nil, nil when ctx ends first.
func (h *Hub) Query(ctx context.Context, req wire.Request) (*wire.Answer, error) {
	bad := func(format string, args ...any) error {
		return &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf(format, args...)}
	}
	wait := req.Wait
	switch {
	case wait == 0:
		wait = wire.DefaultQueryWait
	case wait < 0:
		wait = 0
	case wait > MaxTimeout.Seconds():
		return nil, bad("wait must be at most %d seconds", int(MaxTimeout.Seconds()))
	}
	if req.Op == wire.OpReset {
		wait = 0
	}
	if req.Op == wire.OpInspect && strings.TrimSpace(req.Expr) == "" {
		if req.Surface == wire.SurfaceMCP {
			return nil, bad("inspect needs an expression: pass expr, e.g. the name of a variable")
		}
		return nil, bad("inspect needs an expression: `replhub inspect %s EXPR`", req.Name)
	}
	if len(req.Expr) > maxQueryText || len(req.Text) > maxQueryText {
		return nil, bad("the expression or text is over %d KiB", maxQueryText>>10)
	}
	if req.Limit < 0 {
		return nil, bad("limit must not be negative")
	}
	s, err := h.lookup(req.Name, wire.AdviceFor(req.Surface))
	if err != nil {
		return nil, err
	}
	q := &proto.Query{Kind: req.Op, Expr: req.Expr, Text: req.Text, All: req.All,
		KeepImports: req.KeepImports, Limit: req.Limit, Wait: wait}
	a, err := s.query(ctx, q, time.Duration(wait*float64(time.Second)), wire.AdviceFor(req.Surface))
	if err != nil || a == nil {
		return nil, err
	}
	if req.Op == wire.OpReset && a.Error == "" {
		title := "reset: the user's names were cleared"
		if req.KeepImports {
			title += ", modules kept"
		}
		h.transcribeNote(s, title, "")
	}
	return a, nil
}

// maxQueries is how many queries a session's worker answers at once
// (worker.py's QUERIES_MAX).
const maxQueries = 4

// query sends q and waits for its answer: up to wait for a running cell,
// and queryBudget more for the worker to answer.
func (s *Session) query(ctx context.Context, q *proto.Query, wait time.Duration, adv wire.Advice) (*wire.Answer, error) {
	if err := s.lockLive(ctx, max(wait, time.Second)); err != nil {
		return nil, err
	}
	if busy := s.busyWithLocked(); busy != "" && q.Kind == wire.OpReset {
		s.mu.Unlock()
		return nil, s.resetBusy(busy, adv)
	}
	if len(s.queries) >= maxQueries {
		// Refused here, before a frame goes: past the worker's own bound
		// it would refuse them, and past the hub's bound on frames sent
		// aside they would read as a worker that stopped reading.
		s.mu.Unlock()
		return nil, &wire.Error{Code: wire.CodeBusy, Message: fmt.Sprintf(
			"session '%s' is answering %d queries already: ask again in a moment", s.name, maxQueries)}
	}
	q.ID = queryIDs.Add(1)
	if r := s.cur; r != nil && !r.isFinished() && q.Wait > 0 {
		q.Cell = r.cell
	}
	ch := make(chan *proto.Answer, 1)
	if s.queries == nil {
		s.queries = map[int64]chan *proto.Answer{}
	}
	s.queries[q.ID] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.queries, q.ID)
		s.mu.Unlock()
	}()
	failed := s.sendAside(q) // a relay stalled on the worker's stdin may hold it
	timer := time.NewTimer(wait + queryBudget)
	defer timer.Stop()
	select {
	case err := <-failed:
		return nil, &wire.Error{Code: wire.CodeInternal, Message: fmt.Sprintf("%s not delivered to session '%s': %v", q.Kind, s.name, err)}
	case a := <-ch:
		return s.answerOf(q, a, adv)
	case <-s.exited:
		return nil, &wire.Error{Code: wire.CodeDead, Message: fmt.Sprintf("session '%s' died before it answered: %s", s.name, s.deathText())}
	case <-s.channelGone:
		s.mu.Lock()
		defer s.mu.Unlock()
		return nil, &wire.Error{Code: wire.CodeBusy, Message: s.channelLost}
	case <-timer.C:
		return nil, &wire.Error{Code: wire.CodeBusy, Message: fmt.Sprintf(
			"session '%s' did not answer %s within %s (stopped, or stuck in a repr or attribute that holds the interpreter?); its next cell goes ahead all the same",
			s.name, q.Kind, wire.Duration((wait + queryBudget).Seconds()))}
	case <-ctx.Done():
		return nil, nil
	}
}

// onAnswer hands an answer frame to the query waiting for it; one nobody
// waits for (its caller gave up) is dropped. A reset's names are taken
// here, on the frame reader, in their order among the done frames' (a
// cell let go past the reset's budget may end beside it): the worker
// makes and sends each list under one lock (Names.send).
func (s *Session) onAnswer(f *proto.Answer) {
	s.mu.Lock()
	if f.OK && f.Names != nil {
		s.names = f.Names
	}
	ch := s.queries[f.ID]
	s.mu.Unlock()
	if ch != nil {
		select {
		case ch <- f:
		default:
		}
	}
}

func (s *Session) resetBusy(busy string, adv wire.Advice) error {
	return &wire.Error{Code: wire.CodeBusy, Message: fmt.Sprintf(
		"session '%s' is busy (%s), and reset refuses a busy session: %s waits for the cell, %s stops it",
		s.name, busy, adv.Wait(s.name), adv.Interrupt(s.name))}
}

// answerOf turns the worker's answer into the client's.
func (s *Session) answerOf(q *proto.Query, a *proto.Answer, adv wire.Advice) (*wire.Answer, error) {
	if a.Busy {
		what := "it is serving another session or swapping"
		if a.Cell > 0 {
			what = fmt.Sprintf("cell %d is running", a.Cell)
		}
		if q.Kind == wire.OpReset {
			return nil, s.resetBusy(what, adv)
		}
		waited := "did not wait"
		if a.Waited > 0.001 {
			waited = "waited " + wire.Duration(a.Waited)
		}
		return nil, &wire.Error{Code: wire.CodeBusy, Message: fmt.Sprintf(
			"session '%s' is busy: %s (%s); try again, or wait longer for it (%s SECONDS)", s.name, what, waited, adv.Option("wait"))}
	}
	out := &wire.Answer{Session: s.name, Kind: q.Kind}
	if !a.OK {
		out.Error = a.Error
		if out.Error == "" {
			out.Error = "the worker could not answer"
		}
		return out, nil
	}
	if a.Cell > 0 && a.Waited > 0 {
		out.WaitedFor, out.WaitedMS = a.Cell, int64(a.Waited*1000)
	}
	if a.Note != "" {
		out.Notes = append(out.Notes, "the list stopped early: "+a.Note)
	}
	out.Findings = a.Findings
	return out, nil
}
