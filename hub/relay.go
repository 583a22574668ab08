package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/modules"
	"github.com/replhub/replhub/payload"
	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/sudo"
	"github.com/replhub/replhub/wire"
)

// Relay: code in a session asks the hub (a "req" frame) to open a session,
// list them, kill one, or put/get/call in another. The hub never unpickles:
// blobs pass through untouched with the sender's Python version. A target
// serving put/get/call is busy like a running cell, on its main thread, and
// its transcript records the operation. What the hub relays between the
// two never waits more than relayStall on a worker that stopped reading:
// that request then fails alone (stall.go).

// serveOp is a put/get/call (or a file read or write) that a session
// serves for another session or a client.
type serveOp struct {
	sid   int64
	kind  string
	from  string
	start time.Time
	// done receives the target's served frames (a transfer's first answer,
	// then its last); nil when the target died.
	done chan *proto.Served
	// chunkSink and ackSink forward a transfer's chunks and acks from the
	// target; they are set before the serve frame is sent, with setSinks
	// once op is the target's serving (its reader may find op then).
	chunkSink func(*proto.Chunk)
	ackSink   func(*proto.Ack)
	// ended is closed when the target is free of this serve.
	ended chan struct{}
	// target serves it; what names the request in messages (put, pull …).
	target *Session
	what   string
	linkState
	firsts firstAnswers // under linkState.mu
	// toCaller is set while a single request's chunk, from the queue
	// that passes the target's chunks on, waits to go to the caller:
	// an interrupt of the target sees it held there (streamObject).
	toCaller atomic.Pointer[relayLink]
}

// relayLink is a request a session waits on: where it went, and as what.
// Served, it is the other way: a group's part that a session serves, whose
// target is the part's caller, where what the serving session sends goes.
type relayLink struct {
	target *Session
	op     *serveOp
	served bool
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
	if len(s.queue) > 0 {
		return fmt.Sprintf("%d cells are queued", len(s.queue))
	}
	return ""
}

// serve answers one req frame from session from, which takeRequest
// recorded as running (runningAs): ctx is done once it is cancelled or
// from dies. It runs on its own goroutine, so that the session's frame
// reader is never blocked.
func (h *Hub) serve(ctx context.Context, from *Session, f *proto.Req) {
	reply := &proto.Reply{ID: f.ID}
	fail := func(format string, args ...any) {
		reply.Error = fmt.Sprintf(format, args...)
	}
	if len(f.Targets) > 0 || len(f.Hosts) > 0 {
		h.serveFan(ctx, from, f) // reach is checked for each of its sessions
		return
	}
	if err := h.checkReach(from, f); err != nil {
		reply.Error = err.Error()
		from.send(reply)
		return
	}
	switch f.Kind {
	case "pull", "push":
		h.sessionTransfer(ctx, from, f)
		return
	case "sessions":
		l := h.listFor(from)
		reply.OK, reply.Sessions = true, l.Sessions
	case "open":
		info, previous, err := h.open(context.Background(), from, f)
		if err != nil {
			fail("%s", errorMessage(err))
		} else {
			reply.OK, reply.Info, reply.Message = true, info, previous
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
			reply.OK, reply.Message = true, msg
		}
	case "sh":
		h.runSh(ctx, from, f, reply)
		// Its output (up to 8 MiB of each stream) waits for from to
		// read it, as a get's answer does.
		hold, err := h.holdAnswer(from, f.Kind, reply.Data)
		if err != nil {
			reply.OK, reply.Data = false, nil
			fail("%s", err)
			break
		}
		defer hold.release()
	case "module":
		h.serveModule(f, reply)
	case "modules":
		// The listing of modules(): Data the list, Message its text.
		list := modules.List(h.paths.Modules())
		reply.OK, reply.Message = true, modules.Text(list, h.paths.Modules())
		reply.Data, _ = json.Marshal(list)
	case "put", "get", "call":
		served, err := h.relayServe(ctx, from, f)
		if err != nil {
			fail("%s", errorMessage(err))
			break
		}
		reply.OK, reply.Py, reply.Kept, reply.Error = served.OK, served.Py, served.Kept, served.Error
		if !served.OK && served.Error == "" {
			reply.Error = "refused"
		}
		reply.Data = served.Data
		hold, err := h.holdAnswer(from, f.Kind, reply.Data)
		if err != nil {
			reply.OK, reply.Py, reply.Data = false, "", nil
			fail("%s", err)
			break
		}
		defer hold.release()
	default:
		fail("unknown request %q", f.Kind)
	}
	if err := from.send(reply); err != nil {
		h.log.Warn("reply not delivered", "session", from.name, "err", err)
	}
}

// serveModule answers a session's import: a module of replhub (read anew
// at every import, see package modules), or one the payload sent late.
func (h *Hub) serveModule(f *proto.Req, reply *proto.Reply) {
	if f.Name == "replhub" || strings.HasPrefix(f.Name, modules.Prefix) {
		m, err := modules.Load(h.paths.Modules(), f.Name)
		if err != nil {
			reply.Error = err.Error()
			return
		}
		reply.OK, reply.Data, reply.Message = true, []byte(m.Src), m.File
		return
	}
	if src, ok := payload.Source(f.Name); ok {
		reply.OK, reply.Data = true, []byte(src)
		return
	}
	reply.Error = fmt.Sprintf("no module %q is sent late", f.Name)
}

func errorMessage(err error) string {
	var we *wire.Error
	if errors.As(err, &we) {
		return we.Message
	}
	return err.Error()
}

// beginServe makes target busy serving kind for from, or says why not.
func (h *Hub) beginServe(target *Session, kind, from string) (*serveOp, error) {
	target.mu.Lock()
	defer target.mu.Unlock()
	if target.state == stateDead {
		return nil, fmt.Errorf("session '%s' is dead: %s", target.name, target.death)
	}
	if busy := target.busyWithLocked(); busy != "" {
		return nil, fmt.Errorf("session '%s' is busy: %s", target.name, busy)
	}
	op := &serveOp{sid: sids.Add(1), kind: kind, from: from, start: time.Now(), done: make(chan *proto.Served, 4), ended: make(chan struct{}),
		target: target, what: kind, linkState: linkState{failed: make(chan struct{})}}
	target.serving = op
	target.state = stateRunning
	target.lastActive = op.start
	return op, nil
}

// endServe frees target and returns how it died, if it did.
func (h *Hub) endServe(target *Session, op *serveOp) string {
	target.mu.Lock()
	defer target.mu.Unlock()
	if target.serving == op {
		target.serving = nil
		close(op.ended)
		if target.state == stateRunning {
			target.state = stateIdle
		}
		target.lastActive = time.Now()
		target.nextLocked()
	}
	return target.death
}

// sendServe sends target serve, as a relay (the target may have stopped
// reading); a cancel asked before it follows it (serveOp.cancel). An
// error means the target never gets it: it is gone, or, when op failed,
// the serve was dropped (errUnsent) and no answer will come. hold, when
// not nil, is the object serve carries: sendServe takes over one of its
// refs, let go once the frame is written or dropped.
func sendServe(target *Session, serve *proto.Serve, op *serveOp, hold *objectHold) error {
	err := target.relaySendHeld(serve, nil, hold)
	if errors.Is(err, errStalled) {
		op.stalled(target)
	}
	if err == nil || err == errStalled {
		op.sent() // on its way: what is relayed after it follows it
		return nil
	}
	return err
}

func (h *Hub) diedServing(target *Session, kind, death string) error {
	target.mu.Lock()
	lp, dead := target.lingering, target.state == stateDead
	target.mu.Unlock()
	if !dead && lp != nil {
		if down, _ := lp.isDown(); down {
			return fmt.Errorf("the link to session '%s' on %s dropped while it served the %s; the hub is reconnecting, its names are kept there: try again in a moment",
				target.name, lp.host, kind)
		}
	}
	if death == "" {
		death = "its stream closed"
	}
	return fmt.Errorf("session '%s' died while serving the %s: %s", target.name, kind, death)
}

// relayServe has target serve f for from and waits for its answer.
// cancelled is done once f was cancelled or from died (runningAs): either
// may come before the link that their cancel follows is made, and the
// target is then told at once.
func (h *Hub) relayServe(cancelled context.Context, from *Session, f *proto.Req) (*proto.Served, error) {
	if f.Target == from.name {
		return nil, fmt.Errorf("session '%s' cannot %s from itself: its names are right there", from.name, f.Kind)
	}
	target, err := h.lookup(f.Target, wire.Advice{})
	if err != nil {
		return nil, err
	}
	op, err := h.beginServe(target, f.Kind, from.name)
	if err != nil {
		return nil, err
	}
	from.link(f.ID, target, op, cancelled)
	defer from.unlink(f.ID)

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
	flush := streamObject(from, f.ID, op)
	serve := &proto.Serve{Sid: op.sid, Kind: f.Kind, From: from.name, Py: f.Py,
		Names: f.Names, Into: f.Into, Cells: f.Cells, Bufs: f.Bufs, Kinds: f.Kinds, Oob: f.Oob, Data: f.Data}
	// Once the serve frame is written, its data is the target's: nothing
	// here keeps it while the answer is awaited, which a target may put
	// off for as long as it likes.
	f.Data = nil
	hold := holdOf(cancelled)
	hold.retain() // the frame's, which sendServe hands on
	if hold != nil && hold.req == f {
		hold.letRequest() // the frame has the object alone (a group's parts share it)
	}
	served, ok := op.next(sendServe(target, serve, op, hold))
	for ok && served != nil && served.First {
		passFirst(from, f.ID, served, op)
		served, ok = op.next(nil)
	}
	op.endFirsts()
	if err := op.err(); err != nil {
		h.finishLater(target, op, served, ok, func(s *proto.Served) bool { return !s.First }, flush)
		return nil, err
	}
	flush() // every chunk reaches the caller before the last word
	death := h.endServe(target, op)
	if served == nil {
		return nil, h.diedServing(target, f.Kind, death)
	}
	return served, nil
}

// cancelRequest ends s's request id, and the parts of a group's request
// id, wherever they are: what runs is stopped, each target told. It
// neither blocks nor sends, so the frame reader calls it.
func (s *Session) cancelRequest(id int64) {
	s.mu.Lock()
	links := []*relayLink{s.waitingOn[id]}
	for k, link := range s.waitingOn {
		if lid, ok := fanLinkOf(k); ok && lid == id {
			links = append(links, link)
		}
	}
	if stop := s.running[id]; stop != nil {
		stop()
	}
	s.mu.Unlock()
	for _, link := range links {
		if link != nil {
			link.op.cancel()
		}
	}
}

// runningAs records that s runs request id, which a cancel of id or the
// death of s ends (ctx is then done); stop, once it is over, forgets it.
// An id already running is refused: its links and its cancel would meet
// another request's.
func (s *Session) runningAs(id int64) (ctx context.Context, stop func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[id] != nil {
		return nil, nil, fmt.Errorf("request id %d is in use: a worker numbers its requests 1, 2, … and never reuses one while it runs", id)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if s.state == stateDead {
		cancel() // its death has stopped what ran before
	}
	if s.running == nil {
		s.running = map[int64]context.CancelFunc{}
	}
	s.running[id] = cancel
	return ctx, func() {
		s.mu.Lock()
		delete(s.running, id)
		s.mu.Unlock()
		cancel()
	}, nil
}

// link records that s waits on request id, served by target as op. When
// cancelled is done by then (a cancel of id, or the death of s, that found
// no link to tell the target through) the target is told, once, as soon
// as the serve frame has gone (serveOp.cancel).
func (s *Session) link(id int64, target *Session, op *serveOp, cancelled context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.waitingOn == nil {
		s.waitingOn = map[int64]*relayLink{}
	}
	s.waitingOn[id] = &relayLink{target: target, op: op}
	if cancelled.Err() != nil {
		op.cancel()
	}
}

func (s *Session) unlink(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.waitingOn, id)
}

// onServed routes a target's answer to the relay waiting for it.
func (s *Session) onServed(f *proto.Served) {
	if op := s.servingOp(f.Sid); op != nil {
		if f.First {
			op.sawFirst() // before this reader reads the chunks after it
		}
		// A worker that answers more often than asked must not block its
		// own reader: once the serve has ended, what it says is dropped.
		select {
		case op.done <- f:
		case <-op.ended:
		}
	}
}

// gone tells op's relay that its target will say nothing more (it died,
// or its link dropped and the worker dropped the serve): nil on op.done,
// never dropped nor blocking. op.done is full only of what a worker said
// beyond what it was asked; the oldest of that makes room.
func (op *serveOp) gone() {
	for range cap(op.done) + 1 {
		select {
		case op.done <- nil:
			return
		default:
		}
		select {
		case <-op.done:
		default:
		}
	}
}

// setSinks sets where the chunks and acks of op's target go, under the
// target's lock: op is its serving already, which its reader may find
// (servingSinks) as soon as a worker sends a chunk with op's sid.
func (op *serveOp) setSinks(chunk func(*proto.Chunk), ack func(*proto.Ack)) {
	op.target.mu.Lock()
	defer op.target.mu.Unlock()
	op.chunkSink, op.ackSink = chunk, ack
}

// servingSinks are the sinks of what s serves as sid, if any.
func (s *Session) servingSinks(sid int64) (func(*proto.Chunk), func(*proto.Ack)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if op := s.serving; op != nil && op.sid == sid {
		return op.chunkSink, op.ackSink
	}
	return nil, nil
}

func (s *Session) servingOp(sid int64) *serveOp {
	s.mu.Lock()
	defer s.mu.Unlock()
	if op := s.serving; op != nil && op.sid == sid {
		return op
	}
	return nil
}

// onChunk routes a chunk from this session's worker: with a sid it comes
// from a transfer this session serves; with an id, from one it asked for,
// and goes on to the session serving it.
func (s *Session) onChunk(f *proto.Chunk) {
	if f.Sid != 0 {
		if sink, _ := s.servingSinks(f.Sid); sink != nil {
			sink(f)
			return
		}
		proto.PutChunk(f.Data)
		return
	}
	if link := s.linkOf(f.ID); link != nil {
		s.relayFor(link, &proto.Chunk{Sid: link.op.sid, Seq: f.Seq, EOF: f.EOF, Data: f.Data})
		return
	}
	proto.PutChunk(f.Data)
}

// relayFor relays m, from s's worker, for link (s's request, or a group's
// part that s serves), on s's frame reader, which an interrupt of s may
// free (dropStalled).
func (s *Session) relayFor(link *relayLink, m proto.Msg) {
	s.holdFor(link, func() { link.op.relay(link.target, m) })
}

// holdFor runs relay, which holds s's frame reader for link until it has
// relayed a frame (or waited for what must go before it), with the hold
// recorded in s.relaying for an interrupt of s to see.
func (s *Session) holdFor(link *relayLink, relay func()) {
	s.relaying.Store(link)
	defer s.relaying.Store(nil)
	relay()
}

// onAck routes an ack like onChunk routes a chunk.
func (s *Session) onAck(f *proto.Ack) {
	if f.Sid != 0 {
		if _, sink := s.servingSinks(f.Sid); sink != nil {
			sink(f)
		}
		return
	}
	if link := s.linkOf(f.ID); link != nil {
		s.relayFor(link, &proto.Ack{Sid: link.op.sid, Seq: f.Seq})
	}
}

func (s *Session) linkOf(id int64) *relayLink {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waitingOn[id]
}

// open opens (or attaches to) a session for code in session from. A new
// session starts in from's creator's cwd and environment, and, when f names
// no host, where from runs (openHost); when sudo wants a password, the hub
// runs $SUDO_ASKPASS of that environment, as the CLI would for a command.
//
// previous is the death note of an earlier session of that name, which
// the caller's worker prints (shown once, like an exec's).
func (h *Hub) open(ctx context.Context, from *Session, f *proto.Req) (info *wire.SessionInfo, previous string, err error) {
	from.mu.Lock()
	origin := from.origin
	from.mu.Unlock()
	name, host, err := requestTarget(f)
	if err != nil {
		return nil, "", err
	}
	req := wire.Request{Op: wire.OpExec, Name: name, Host: host, Python: f.Python, Jump: f.Jump,
		Cwd: origin.Cwd, Env: origin.Env}
	if f.Sudo != nil {
		req.Sudo = *f.Sudo
	}
	if err := checkName(req.Name); err != nil {
		return nil, "", err
	}
	if err := h.checkJumps(from, req.Name, f.Jump); err != nil {
		return nil, "", err
	}
	by := openHost(from)
	bound := 0
	if by != "" {
		cfg, err := h.loadConfig(ctx)
		if err != nil {
			return nil, "", err
		}
		bound = cfg.HostOpens()
		ctx = withConfig(ctx, cfg) // the session's start reads it once, here
	}
	h.mu.Lock()
	live := h.sessions[req.Name]
	if live == nil && by != "" {
		if err := h.reserveOpenLocked(by, bound); err != nil {
			h.mu.Unlock()
			return nil, "", err
		}
		defer h.unreserveOpen(by)
	}
	h.mu.Unlock()
	if live == nil && req.Host == "" {
		req.Host = by
	}
	if live != nil && f.Sudo != nil && !*f.Sudo && live.isRoot() {
		return nil, "", fmt.Errorf("session '%s' runs as root, and sudo=False insists on a user session", req.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	s, created, previous, err := h.ensure(ctx, req)
	var we *wire.Error
	if errors.As(err, &we) && we.Code == wire.CodeNeedPassword {
		pw, aerr := sudo.Ask(ctx, config.Getenv(req.Env, "SUDO_ASKPASS"), we.Prompt, req.Env)
		if aerr != nil {
			return nil, "", fmt.Errorf("%s: %w", we.Message, aerr)
		}
		req.Password = pw
		s, created, previous, err = h.ensure(ctx, req)
		sudo.Zero(pw)
	}
	if err != nil {
		return nil, "", err
	}
	if startedHere(created, previous) {
		s.forgetStartInterrupt() // this request runs no cell there
		if by != "" {
			s.mu.Lock()
			s.openedBy = by
			s.mu.Unlock()
		}
	}
	if err := h.reachOf(from).check(s.name, s.host()); err != nil {
		// A session that took the name after checkReach, or one this
		// request started where from may not reach: none is left running
		// on from's behalf.
		if created {
			if eerr := h.end(s); eerr != nil {
				h.log.Warn("refused session not ended", "session", s.name, "err", eerr)
			}
		}
		return nil, "", err
	}
	snap := s.snapshot()
	return &snap, previous, nil
}

// reserveOpenLocked counts a session that a session on host is about to
// open, or says why it may not: host's sessions have opened bound
// sessions that live or are opening (config.json's max_host_opens). A
// host, whoever controls it, must not have the hub start sessions until
// the hub's memory or its own runs out; the user's opens (a local
// session's, the CLI's, MCP's) are not counted. h.mu is held.
func (h *Hub) reserveOpenLocked(host string, bound int) error {
	n := h.opening[host]
	for _, s := range h.sessions {
		s.mu.Lock()
		if s.openedBy == host && s.state != stateDead {
			n++
		}
		s.mu.Unlock()
	}
	if n >= bound {
		return fmt.Errorf("the sessions on %s have opened %d sessions, the most they may have at once (config.json's max_host_opens): end one first (session(NAME).kill(), or `replhub kill NAME`)", host, n)
	}
	if h.opening == nil {
		h.opening = map[string]int{}
	}
	h.opening[host]++
	return nil
}

// unreserveOpen ends the count of reserveOpenLocked: the session is open,
// with its openedBy set, or did not open.
func (h *Hub) unreserveOpen(host string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.opening[host]--; h.opening[host] <= 0 {
		delete(h.opening, host)
	}
}

// transcribeNote records in s's transcript an operation other than a
// cell: a title line and, commented out, a body (a function's source).
func (h *Hub) transcribeNote(s *Session, title, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h.transcribeNoteLocked(s, title, body)
}

// comment makes every line of a note a comment: a title names what
// another session sent (its names, a path), and a line break in it must
// not make code of the rest in this session's transcript.
var comment = strings.NewReplacer("\r\n", "\n# ", "\n", "\n# ", "\r", "\n# ")

// Bounds on a transcript's note: another session's request (a put's
// names, a call's source), which a host may send in a loop, must not
// fill the disk a megabyte at a time.
const (
	maxNoteTitle = 4 << 10
	maxNoteBody  = 64 << 10
)

// transcribeNoteLocked is transcribeNote with s.mu held.
func (h *Hub) transcribeNoteLocked(s *Session, title, body string) {
	h.flushBehindLocked(s)
	if err := s.openTranscriptLocked(); err != nil {
		return
	}
	defer s.releaseTranscriptLocked()
	fmt.Fprintf(s.transcript, "\n# ---- %s · %s\n", comment.Replace(clipText(title, maxNoteTitle)), time.Now().Format(time.RFC3339))
	if body != "" {
		fmt.Fprintf(s.transcript, "# %s\n", comment.Replace(clipText(body, maxNoteBody)))
	}
}
