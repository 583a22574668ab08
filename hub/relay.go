package hub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/replhub/replhub/sudo"
	"github.com/replhub/replhub/wire"
)

// Relay: code in a session asks the hub (a "req" frame) to open a session,
// list them, kill one, or put/get/call in another. The hub never unpickles:
// blobs pass through untouched with the sender's Python version. A target
// serving put/get/call is busy like a running cell, on its main thread, and
// its transcript records the operation.

// serveOp is a put/get/call a session serves for another.
type serveOp struct {
	sid   int64
	kind  string
	from  string
	start time.Time
	done  chan *frame // the target's served frame; nil when it died
}

var sids atomic.Int64

// busyWithLocked says what keeps s busy, or "" when it is free.
func (s *Session) busyWithLocked() string {
	if r := s.cur; r != nil && !r.isFinished() {
		return fmt.Sprintf("cell %d has run for %s", r.cell, wire.Duration(time.Since(r.start).Seconds()))
	}
	if op := s.serving; op != nil {
		return fmt.Sprintf("it is serving a %s from '%s' (for %s)", op.kind, op.from, wire.Duration(time.Since(op.start).Seconds()))
	}
	return ""
}

// serveRequest answers one req frame from session from. It runs on its own
// goroutine, so that the session's frame reader is never blocked.
func (h *Hub) serveRequest(from *Session, f *frame) {
	reply := map[string]any{"op": "reply", "id": f.ID, "ok": false}
	var data []byte
	fail := func(format string, args ...any) {
		reply["error"] = fmt.Sprintf(format, args...)
	}
	switch f.Kind {
	case "cancel":
		from.mu.Lock()
		target := from.waitingOn[f.ID]
		from.mu.Unlock()
		if target != nil {
			target.send(map[string]any{"op": "interrupt"}, nil)
		}
		return
	case "sessions":
		l := h.List()
		reply["ok"], reply["sessions"] = true, l.Sessions
	case "open":
		info, err := h.open(from, f)
		if err != nil {
			fail("%s", errorMessage(err))
		} else {
			reply["ok"], reply["info"] = true, info
		}
	case "kill":
		if f.Target == from.name {
			fail("a session cannot kill itself this way: os._exit() ends it")
			break
		}
		msg, err := h.Kill(f.Target)
		if err != nil {
			fail("%s", errorMessage(err))
		} else {
			reply["ok"], reply["message"] = true, msg
		}
	case "put", "get", "call":
		served, err := h.relayServe(from, f)
		if err != nil {
			fail("%s", errorMessage(err))
			break
		}
		reply["ok"] = served.OK
		reply["py"] = served.Py
		if served.Kept != "" {
			reply["kept"] = served.Kept
		}
		if !served.OK {
			reply["error"] = served.errorText()
		}
		data = served.data
	default:
		fail("unknown request %q", f.Kind)
	}
	if err := from.send(reply, data); err != nil {
		h.log.Warn("reply not delivered", "session", from.name, "err", err)
	}
}

func errorMessage(err error) string {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Message
	}
	return err.Error()
}

// relayServe has target serve f for from and waits for its answer.
func (h *Hub) relayServe(from *Session, f *frame) (*frame, error) {
	if f.Target == from.name {
		return nil, fmt.Errorf("session '%s' cannot %s from itself: its names are right there", from.name, f.Kind)
	}
	target, err := h.lookup(f.Target)
	if err != nil {
		return nil, err
	}
	target.mu.Lock()
	if target.state == stateDead {
		target.mu.Unlock()
		return nil, fmt.Errorf("session '%s' is dead: %s", target.name, target.death)
	}
	if busy := target.busyWithLocked(); busy != "" {
		target.mu.Unlock()
		return nil, fmt.Errorf("session '%s' is busy: %s", target.name, busy)
	}
	op := &serveOp{sid: sids.Add(1), kind: f.Kind, from: from.name, start: time.Now(), done: make(chan *frame, 1)}
	target.serving = op
	target.state = stateRunning
	target.lastActive = op.start
	target.mu.Unlock()
	from.mu.Lock()
	if from.waitingOn == nil {
		from.waitingOn = map[int64]*Session{}
	}
	from.waitingOn[f.ID] = target
	from.mu.Unlock()
	defer func() {
		from.mu.Lock()
		delete(from.waitingOn, f.ID)
		from.mu.Unlock()
	}()

	title, body := fmt.Sprintf("%s from '%s'", f.Kind, from.name), ""
	switch f.Kind {
	case "put", "get":
		title += ": " + strings.Join(f.Names, ", ")
	case "call":
		title += ":"
		body = strings.TrimRight(f.Src, "\n")
		if f.Into != nil {
			title = fmt.Sprintf("call from '%s', kept as %s:", from.name, *f.Into)
		}
	}
	h.transcribeNote(target, title, body)
	header := map[string]any{"op": "serve", "sid": op.sid, "kind": f.Kind, "from": from.name, "py": f.Py}
	if f.Names != nil {
		header["names"] = f.Names
	}
	if f.Into != nil {
		header["into"] = *f.Into
	}
	if f.Cells != nil {
		header["cells"] = f.Cells
	}
	var served *frame
	if err := target.send(header, f.data); err != nil {
		served = nil
	} else {
		served = <-op.done
	}
	target.mu.Lock()
	if target.serving == op {
		target.serving = nil
		if target.state == stateRunning {
			target.state = stateIdle
		}
		target.lastActive = time.Now()
	}
	death := target.death
	target.mu.Unlock()
	if served == nil {
		if death == "" {
			death = "its stream closed"
		}
		return nil, fmt.Errorf("session '%s' died while serving the %s: %s", target.name, f.Kind, death)
	}
	return served, nil
}

// onServed routes a target's answer to the relay waiting for it.
func (s *Session) onServed(f *frame) {
	s.mu.Lock()
	op := s.serving
	s.mu.Unlock()
	if op != nil && op.sid == f.Sid {
		op.done <- f
	}
}

// open opens (or attaches to) a session for code in session from. A new
// session starts in from's creator's cwd and environment; when sudo wants a
// password, the hub runs $SUDO_ASKPASS of that environment, as the CLI
// would for a command.
func (h *Hub) open(from *Session, f *frame) (*wire.SessionInfo, error) {
	from.mu.Lock()
	origin := from.origin
	from.mu.Unlock()
	req := wire.Request{Op: wire.OpExec, Name: f.Name, Host: f.Host, Python: f.Python, Jump: f.Jump,
		Cwd: origin.Cwd, Env: origin.Env}
	if f.Sudo != nil {
		req.Sudo = *f.Sudo
	}
	if err := checkName(req.Name); err != nil {
		return nil, err
	}
	h.mu.Lock()
	live := h.sessions[req.Name]
	h.mu.Unlock()
	if live != nil && f.Sudo != nil && !*f.Sudo && live.isRoot() {
		return nil, fmt.Errorf("session '%s' runs as root, and sudo=False insists on a user session", req.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, _, _, err := h.ensure(ctx, req)
	var we *wire.Error
	if errors.As(err, &we) && we.Code == wire.CodeNeedPassword {
		pw, aerr := sudo.Ask(ctx, envGet(req.Env, "SUDO_ASKPASS"), we.Prompt, req.Env)
		if aerr != nil {
			return nil, fmt.Errorf("%s: %w", we.Message, aerr)
		}
		req.Password = pw
		s, _, _, err = h.ensure(ctx, req)
		sudo.Zero(pw)
	}
	if err != nil {
		return nil, err
	}
	info := s.snapshot()
	return &info, nil
}

// transcribeNote records in s's transcript an operation other than a
// cell: a title line and, commented out, a body (a function's source).
func (h *Hub) transcribeNote(s *Session, title, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.openTranscriptLocked(); err != nil {
		return
	}
	fmt.Fprintf(s.transcript, "\n# ---- %s · %s\n", title, time.Now().Format(time.RFC3339))
	if body != "" {
		fmt.Fprintf(s.transcript, "# %s\n", strings.ReplaceAll(body, "\n", "\n# "))
	}
}
