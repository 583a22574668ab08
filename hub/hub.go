// Package hub is the daemon that owns the sessions: the socket server with
// its peer check, the session table and each session's state machine,
// output buffers and caps, transcripts and death notes.
//
// It does not dial the hub (package client), speak MCP (package mcp) or hold
// the Python that travels (package boot). Its lifetime is a context: Run
// returns when the context ends or a client asks it to stop, after every
// session it owns has ended.
package hub

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replhub/replhub/boot"
	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/internal/lazyre"
	"github.com/replhub/replhub/internal/lean"
	"github.com/replhub/replhub/payload"
	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/pyfind"
	"github.com/replhub/replhub/remote"
	"github.com/replhub/replhub/sudo"
	"github.com/replhub/replhub/wire"
)

// Timeouts for exec and wait, as the command line's -t gives them
// (package lean, which a plain exec reads them from too).
const (
	DefaultTimeout = lean.DefaultTimeout * time.Second
	MaxTimeout     = lean.MaxTimeout * time.Second
)

// Options configure a Hub. The zero value of each field is documented.
type Options struct {
	// Paths are the folders the hub uses; required.
	Paths config.Paths
	// Version is the binary's version, reported by sessions.
	Version string
	// Supervisor says how the hub was started: "systemd" (a transient user
	// unit with a memory ceiling) or "detached"; empty means "detached".
	Supervisor string
	// Log receives the hub's log; nil discards it.
	Log *slog.Logger
	// StartTimeout bounds a worker's start; zero means 30 s.
	StartTimeout time.Duration
	// FrameStall is how long a local worker may leave a frame half sent
	// before its session is ended; zero means 10 s. A remote worker gets
	// twelve times as long: there a stall is more often the link's, and
	// keepalives catch a dead link first.
	FrameStall time.Duration
}

// Hub is the daemon. Create it with New and serve with Run.
type Hub struct {
	paths        config.Paths
	version      string
	supervisor   string
	log          *slog.Logger
	startTimeout time.Duration
	frameStall   time.Duration
	workerPath   string

	// behind is the sessions whose last cells' records are written
	// behind (behind.go).
	behind behindSet

	stop chan struct{} // closed by a client's stop request
	once sync.Once
	// held counts the bytes of requests' objects on their way to their
	// targets (held.go); heldBy, under heldMu, the part of it each
	// remote host's sessions brought.
	held   atomic.Int64
	heldMu sync.Mutex
	heldBy map[string]int64
	// restarting is set by a restart request: shutdown then hands the
	// durable sessions over instead of ending them.
	restarting atomic.Bool
	// served counts the requests begun since trimLoop last looked
	// (trim.go).
	served atomic.Int64
	// readers counts the connection readers ever started (see serveConn):
	// a connection's quick requests, one after another, need one.
	readers atomic.Int64
	// readAhead is how long a quick request is answered before another
	// reader starts (see conn.read); zero means readAheadAfter.
	readAhead time.Duration
	aheads    aheads
	// plainStreams (REPLHUB_PLAIN_STREAMS, for tests) gives local workers
	// pipes and clients and workers' sockets ordinary calls, as on a
	// kernel that cannot make a socket refuse descriptors (startLocal,
	// serveConn, dialer).
	plainStreams bool
	// floods tells trimLoop of a flood of output let go (trim.go).
	floods chan struct{}

	pool    *remote.Pool
	pythons *pyfind.Cache // what interpreters said of themselves
	// memory is the hub's cgroup memory ceiling (memory.go).
	memory *ceiling

	mu       sync.Mutex
	sessions map[string]*Session
	groups   map[string]groupRecord // the groups the hub remembers, by name (fanout.go)
	fanCells map[string]*fanCells   // a group's cell numbers, by its name (fancells.go)
	dead     map[string]bool        // names with a death note on disk
	told     toldDeaths             // which deaths each client has heard of (notes.go)
	warnings []string               // for the next reply: ssh_config lines skipped
	live     liveSet                // the records of running sessions (live.go)
	swap     swapState              // swaps and restores under way (swap.go)
	swapList swapListing            // the list's lines of the swaps on disk (swaplist.go)
	opening  map[string]int         // sessions that a host's sessions are opening, by host (relay.go)
	closing  bool
	conns    sync.WaitGroup
}

// New makes a Hub and installs the worker it starts sessions with.
func New(o Options) (*Hub, error) {
	if o.Log == nil {
		o.Log = slog.New(slog.NewTextHandler(discard{}, nil))
	}
	if o.Supervisor == "" {
		o.Supervisor = "detached"
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.FrameStall == 0 {
		o.FrameStall = 10 * time.Second
	}
	setRelayStall()
	wp, err := boot.Install(o.Paths.Runtime)
	if err != nil {
		return nil, fmt.Errorf("hub: %w", err)
	}
	for _, d := range []string{o.Paths.State, o.Paths.DeadDir(), o.Paths.LiveDir(), o.Paths.WorkerDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("hub: %w", err)
		}
	}
	h := &Hub{
		paths: o.Paths, version: o.Version, supervisor: o.Supervisor, log: o.Log,
		startTimeout: o.StartTimeout, frameStall: o.FrameStall, workerPath: wp,
		stop: make(chan struct{}), floods: make(chan struct{}, 1), sessions: map[string]*Session{}, groups: map[string]groupRecord{}, fanCells: map[string]*fanCells{},
		dead: loadDeadNames(o.Paths.DeadDir()), memory: findCeiling(),
		plainStreams: os.Getenv("REPLHUB_PLAIN_STREAMS") != "",
	}
	h.pythons = &pyfind.Cache{File: o.Paths.PythonCache()}
	payload.UseCache(h.pythons)
	payload.UseKeyFile(o.Paths.BytecodeKey())
	// Find this machine's cloudpickle now, not at the first session start.
	go payload.CloudpickleDir()
	h.pool = &remote.Pool{Logf: func(format string, args ...any) { h.log.Info(fmt.Sprintf(format, args...)) }}
	remote.Warnf = func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		h.log.Warn(msg)
		h.mu.Lock()
		h.warnings = append(h.warnings, msg)
		h.mu.Unlock()
	}
	h.reclaimLive()
	return h, nil
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// validName is a session's name: NAME, or NAME@HOST for the session a
// group NAME has on HOST (fanout.go).
var validName = lazyre.New(`^[A-Za-z0-9._-]{1,64}(@[A-Za-z0-9._-]{1,128})?$`)

// checkName refuses names that are not letters, digits and ._- up to 64
// (with an optional @HOST), and the two that would be folders.
func checkName(name string) error {
	base, host, _ := strings.Cut(name, "@")
	if !validName.MatchString(name) || base == "." || base == ".." || host == "." || host == ".." {
		return &wire.Error{Code: wire.CodeBadRequest,
			Message: fmt.Sprintf("bad session name %q: use letters, digits and ._- (at most 64), or NAME@HOST for a group's session on HOST", name)}
	}
	return nil
}

// Exec runs req.Code in session req.Name, creating the session first when
// no live session has that name.
func (h *Hub) Exec(ctx context.Context, req wire.Request, progress func(*wire.Progress)) (*wire.Result, error) {
	if err := checkName(req.Name); err != nil {
		return nil, err
	}
	if req.Timeout < 0 || req.Timeout > MaxTimeout.Seconds() {
		return nil, &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf("timeout must be between 0 and %d seconds", int(MaxTimeout.Seconds()))}
	}
	if err := checkMaxOutput(req.MaxOutput); err != nil {
		return nil, err
	}
	if req.Private {
		return h.run(ctx, req, progress)
	}
	if req.Hosts != "" {
		return h.fanExec(ctx, req, nil, progress)
	}
	if req.Host == "" {
		if hosts := h.groupOf(req.Name); hosts != nil {
			return h.fanExec(ctx, req, hosts, progress)
		}
	}
	s, created, previous, err := h.ensure(ctx, req)
	if err != nil {
		return nil, err
	}
	if startedHere(created, previous) {
		defer s.forgetStartInterrupt()
	}
	res, err := h.runCell(ctx, s, req, created, previous, progress)
	if err != nil {
		return nil, err
	}
	res.Others = h.othersLine(req)
	res.Notes = append(h.takeWarnings(), res.Notes...)
	if !created {
		if n := pythonNote(s, req.Python, wire.AdviceFor(req.Surface)); n != "" {
			res.Notes = append(res.Notes, n)
		}
	}
	return res, nil
}

// runCell runs req.Code in s, which ensure returned (queues it, with
// req.Queue).
func (h *Hub) runCell(ctx context.Context, s *Session, req wire.Request, created bool, previous string, progress func(*wire.Progress)) (*wire.Result, error) {
	announced := announce(ctx, s, created, previous)
	ctx = withSurface(ctx, req.Surface)
	if req.InterruptIfGone {
		if ctx.Err() != nil {
			return nil, ctx.Err() // gone already: start nothing
		}
		ctx = context.WithValue(ctx, ifGoneKey{}, true)
	}
	exec := s.exec
	if req.Queue {
		exec = s.enqueue
	}
	res, err := exec(ctx, req.Code, timeoutOf(req.Timeout), req.NoWait, capOf(req.MaxOutput), progress, wire.AdviceFor(req.Surface))
	if err != nil {
		return nil, err
	}
	if res == nil {
		if ctx.Err() != nil {
			return nil, unanswered(ctx, s.name, req.Surface)
		}
		return nil, &wire.Error{Code: wire.CodeInternal, Message: "the client cancelled this call"}
	}
	if created {
		info := s.startedInfo()
		res.Created = &info
	}
	res.Previous = previous
	if announced {
		res.Created, res.Previous = nil, ""
	}
	if n := s.unreadNote(wire.AdviceFor(req.Surface)); n != "" {
		res.Notes = append(res.Notes, n)
	}
	if n := s.personNote(); n != "" {
		res.Notes = append(res.Notes, n)
	}
	return res, nil
}

// unanswered is why a call waiting on session name's cell ended without
// its result, ctx having ended: its client went away (nobody reads the
// answer), or the hub is stopping, which the client hears of.
func unanswered(ctx context.Context, name, surface string) error {
	if clientGone(ctx) {
		return ctx.Err()
	}
	adv := wire.AdviceFor(surface)
	return &wire.Error{Code: wire.CodeShutdown, Message: fmt.Sprintf(
		"the hub stopped while this call waited on session '%s': %s (which starts a hub) shows what became of its cell", name, adv.Wait(name))}
}

// takeWarnings returns the ssh_config warnings for the next reply.
func (h *Hub) takeWarnings() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	w := h.warnings
	h.warnings = nil
	return w
}

// ensure returns the live session req.Name, starting it first when there
// is none (created), with the death note of its predecessor (previous). A
// live session is refused when req insists on another host or on root.
func (h *Hub) ensure(ctx context.Context, req wire.Request) (s *Session, created bool, previous string, err error) {
	h.mu.Lock()
	if h.closing {
		h.mu.Unlock()
		return nil, false, "", &wire.Error{Code: wire.CodeShutdown, Message: "hub: stopping; try again in a moment"}
	}
	if err := impliedHost(&req); err != nil {
		h.mu.Unlock()
		return nil, false, "", err
	}
	s = h.sessions[req.Name]
	created = s == nil
	adv := wire.AdviceFor(req.Surface)
	if !created && req.Sudo && !s.isRoot() {
		h.mu.Unlock()
		return nil, false, "", &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf(
			"session '%s' runs as your user, not as root: %s %s reaches it; kill it to reuse the name for a root session",
			req.Name, adv.Exec(req.Name), adv.Without("sudo"))}
	}
	if !created && req.Host != "" && s.host() != req.Host {
		h.mu.Unlock()
		return nil, false, "", &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf(
			"session '%s' runs on %s, not %s: %s %s reaches it; kill it to reuse the name elsewhere",
			req.Name, s.host(), req.Host, adv.Exec(req.Name), adv.Without("host"))}
	}
	if created && req.Env == nil {
		h.mu.Unlock()
		return nil, false, "", &wire.Error{Code: wire.CodeNeedEnv, Message: "hub: a new session needs the caller's environment; send it with the request"}
	}
	if req.Private && !created {
		h.mu.Unlock()
		return nil, false, "", &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf("session '%s' exists: a private run needs a new name", req.Name)}
	}
	if created {
		s = newSession(h, req.Name)
		s.private, s.transcribe = req.Private, req.Transcript
		s.origin = wire.Request{Cwd: req.Cwd, Env: req.Env, Jump: req.Jump}
		h.sessions[req.Name] = s
	}
	h.mu.Unlock()

	if req.Host == config.Local {
		// "local" names this machine, as in sessions and "reach": a live
		// session was held to it above; a new one starts here.
		req.Host = ""
	}
	if created {
		var restored string
		err = h.checkTie(req)
		if err == nil {
			restored, err = h.startOrRestore(ctx, s, &req)
		} else {
			close(s.ready)
			s.markStartFailed()
		}
		sudo.Zero(req.Password)
		if err != nil {
			h.mu.Lock()
			if h.sessions[req.Name] == s {
				delete(h.sessions, req.Name)
			}
			h.mu.Unlock()
			return nil, false, "", h.startFailure(req, err)
		}
		h.recordLive(s)
		if s.sock != "" {
			// The worker's first frame: it is on record now. A durable
			// worker whose first hub ends before any frame came ends too,
			// for no hub could know of it.
			s.relaySend(&proto.Ping{}, nil)
		}
		if !s.private {
			previous = h.takeDeathNote(req.Name)
		}
		if restored != "" {
			previous, created = restored, false
		}
		h.log.Info("session started", "session", s.name, "pid", s.info.Pid, "python", s.info.Python, "host", s.info.Host, "root", s.info.Root)
	} else {
		<-s.ready
		// Used from here, before the look for a swap: the sweep's swap
		// looks again under s.mu (swapOut), so it either sees this use
		// and keeps the session, or has its job in place to wait for.
		s.mu.Lock()
		s.lastActive = time.Now()
		s.mu.Unlock()
		if h.waitSwapOf(ctx, s) {
			return h.ensure(ctx, req) // it went to disk meanwhile
		}
		if s.startErr == nil && s.isDead() {
			// It died and its end is being handled (sessionExited): then
			// its note is written and the name is free.
			select {
			case <-s.exited:
			case <-ctx.Done():
				return nil, false, "", ctx.Err()
			}
			return h.ensure(ctx, req)
		}
		if s.startErr != nil {
			if errors.Is(s.startErr, context.Canceled) && ctx.Err() == nil {
				// The call that started it went away, and its start with
				// it: that failure is not this call's, which starts the
				// session itself. The name is freed as the other call
				// returns, or here, whichever comes first.
				h.mu.Lock()
				if h.sessions[req.Name] == s {
					delete(h.sessions, req.Name)
				}
				h.mu.Unlock()
				return h.ensure(ctx, req)
			}
			return nil, false, "", &wire.Error{Code: wire.CodeStart, Message: s.startErr.Error()}
		}
	}
	return s, created, previous, nil
}

// Wait collects the running or unread cell of session req.Name, waiting up
// to req.Timeout.
func (h *Hub) Wait(ctx context.Context, req wire.Request, progress func(*wire.Progress)) (*wire.Result, error) {
	if err := checkCell(req.Cell); err != nil {
		return nil, err
	}
	if err := checkMaxOutput(req.MaxOutput); err != nil {
		return nil, err
	}
	// Every wait for a swap under way, the lookups' too, keeps to the
	// wait's own timeout.
	deadline := time.Now().Add(timeoutOf(req.Timeout))
	s, err := h.lookupWithin(req.Name, wire.AdviceFor(req.Surface), time.Until(deadline))
	var we *wire.Error
	if errors.As(err, &we) && we.Code == wire.CodeDead {
		if res := h.diedQueued(req.Name, req.Cell); res != nil {
			return res, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return h.waitOn(ctx, s, req, deadline, progress)
}

// waitOn is Wait once req.Name is found: s. A swap or restore of s under
// way (past lookup's wait) is waited for until deadline, then the name
// looked up again: gone to disk, kept, restored, or dead. A restore that
// fails never ends its op: its session's exit ends the wait.
func (h *Hub) waitOn(ctx context.Context, s *Session, req wire.Request, deadline time.Time, progress func(*wire.Progress)) (*wire.Result, error) {
	res, err := s.wait(ctx, time.Until(deadline), req.Cell, capOf(req.MaxOutput), progress)
	for sw := (swapUnderWay{}); errors.As(err, &sw); {
		t := time.NewTimer(time.Until(deadline))
		select {
		case <-sw.op.ended:
		case <-s.exited:
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		if ctx.Err() != nil {
			return nil, unanswered(ctx, s.name, req.Surface)
		}
		if !isClosed(sw.op.ended) && !isClosed(s.exited) {
			return nil, &wire.Error{Code: wire.CodeBusy, Message: sw.message(wire.AdviceFor(req.Surface))}
		}
		if s, err = h.lookupWithin(req.Name, wire.AdviceFor(req.Surface), time.Until(deadline)); err != nil {
			return nil, err
		}
		res, err = s.wait(ctx, time.Until(deadline), req.Cell, capOf(req.MaxOutput), progress)
	}
	if err != nil {
		// The session died between the lookup and the wait: its queue
		// went, and its note (written with it) says what never ran.
		if s.isDead() {
			if res := h.diedQueued(req.Name, req.Cell); res != nil {
				return res, nil
			}
		}
		return nil, err
	}
	if res == nil {
		return nil, unanswered(ctx, s.name, req.Surface)
	}
	res.Others = h.othersLine(req)
	if n := s.personNote(); n != "" {
		res.Notes = append(res.Notes, n)
	}
	return res, nil
}

// diedQueued is the result of cell of session name, which died with the
// cell queued, as its waiter heard it then: a wait that comes after the
// death hears the same. Nil if the session's death note does not list the
// cell; name is a valid name.
func (h *Hub) diedQueued(name string, cell int) *wire.Result {
	if cell <= 0 {
		return nil
	}
	n := h.readDeathNote(name)
	if n == nil || !slices.Contains(n.NeverRan, cell) {
		return nil
	}
	return &wire.Result{Session: name, Cell: cell, Status: wire.StatusDead,
		Death: fmt.Sprintf("session '%s' died before cell %d ran (it was queued): %s", name, cell, n.How)}
}

// lookupSwapWait bounds lookup's wait for a swap under way.
var lookupSwapWait = 10 * time.Second

// lookup finds a live session, or explains that it died or never was, with
// advice worded by adv.
func (h *Hub) lookup(name string, adv wire.Advice) (*Session, error) {
	return h.lookupWithin(name, adv, lookupSwapWait)
}

// lookupWithin is lookup with its wait for a swap under way bounded by
// swapWait, where that is less than lookupSwapWait.
func (h *Hub) lookupWithin(name string, adv wire.Advice, swapWait time.Duration) (*Session, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	h.mu.Lock()
	s := h.sessions[name]
	h.mu.Unlock()
	if s != nil {
		<-s.ready
		// A swap under way ends (gone to disk, or kept) before the name is
		// answered for, but within lookupSwapWait: a worker that takes its
		// time must not hold an interrupt; past it, s is busy with its swap.
		ctx, cancel := context.WithTimeout(context.Background(), min(swapWait, lookupSwapWait))
		gone := h.waitSwapOf(ctx, s)
		cancel()
		if gone {
			s = nil
		}
	}
	if s != nil && s.startErr == nil {
		return s, nil
	}
	if err := h.swappedError(name, adv); err != nil {
		return nil, err
	}
	if note := h.peekDeathNote(name); note != "" {
		return nil, &wire.Error{Code: wire.CodeDead, Message: note}
	}
	return nil, &wire.Error{Code: wire.CodeNoSession, Message: fmt.Sprintf("no session '%s': %s creates it; %s lists them", name, adv.Exec(name), adv.Sessions())}
}

// Interrupt raises KeyboardInterrupt in session req.Name's running cell.
func (h *Hub) Interrupt(req wire.Request) (string, error) {
	adv := wire.AdviceFor(req.Surface)
	if msg := h.stillStarting(req.Name); msg != "" {
		return msg, nil
	}
	s, err := h.lookup(req.Name, adv)
	if err != nil {
		return "", err
	}
	if err := checkCell(req.Cell); err != nil {
		return "", err
	}
	if req.Cell > 0 {
		return s.interruptCell(adv, req.Cell)
	}
	return s.interrupt(adv, false, 0)
}

// stillStarting is what an interrupt of session name says while the
// session starts (lookup would wait for the start, up to its bound), ""
// once it has started, or where there is no such session. No cell runs
// yet, but one is on its way: the exec that starts the session, a run's
// above all, whose Ctrl-C comes here. The interrupt is kept for it: the
// first cell ends as interrupted without running (takeStartInterruptLocked).
// The look at ready and the mark are made under s.mu, which the first
// cell takes once ready is closed: the mark is never left for a later one.
func (h *Hub) stillStarting(name string) string {
	h.mu.Lock()
	s := h.sessions[name]
	h.mu.Unlock()
	if s == nil {
		return ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.ready:
		return ""
	default:
	}
	s.startInterrupted = true
	d := wire.Duration(h.startTimeout.Seconds())
	return fmt.Sprintf("session '%s' is still starting (its start may take up to %s): its first cell will end as interrupted, without running, once the session is up",
		name, d)
}

// Kill ends session name and frees its name. No death note is written: the
// user asked for this.
func (h *Hub) Kill(name string) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	h.mu.Lock()
	s := h.sessions[name]
	h.mu.Unlock()
	if s == nil {
		if msg, ok := h.killSwap(name); ok {
			return msg, nil
		}
		if h.takeDeathNote(name) != "" {
			return fmt.Sprintf("session '%s' was already dead; its name is free", name), nil
		}
		return "", &wire.Error{Code: wire.CodeNoSession, Message: fmt.Sprintf("no session '%s'", name)}
	}
	<-s.ready
	if err := h.end(s); err != nil {
		return "", err
	}
	// A swap or restore under way ends with its worker; then the name's
	// swap, if the swap got as far as writing it or the restore had not
	// yet deleted it, goes too: a killed session does not come back.
	if j := h.jobOf(s); j != nil {
		select {
		case <-j.done:
		case <-time.After(10 * time.Second):
		}
	}
	if _, ok := h.killSwap(name); ok {
		return fmt.Sprintf("killed session '%s' and deleted its swap; its name is free", name), nil
	}
	return fmt.Sprintf("killed session '%s'", name), nil
}

// sessionExited is called once per worker by its waiter.
func (h *Hub) sessionExited(s *Session, ex Exit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// What is written behind goes before the name is free for another
	// session, whose transcript has the same path (behind.go).
	h.flushBehindLocked(s)
	defer h.dropLive(s) // after the death note, with s.mu held
	// Last, after the death note: a list sees the name live or dead,
	// never neither (list takes both in one hold of h.mu).
	defer func() {
		h.mu.Lock()
		if h.sessions[s.name] == s {
			delete(h.sessions, s.name)
		}
		h.mu.Unlock()
	}()
	if s.sock != "" {
		os.Remove(s.sock)
	}
	s.state = stateDead
	how := ex.String()
	// A local worker's SIGKILL nobody here sent, near the cgroup's
	// ceiling: the OOM killer's, most likely.
	if !s.killed && s.death == "" && ex.Signal == "SIGKILL" && s.info.Host == config.Local && h.memory.nearAt() {
		how += "; " + h.memory.deathAdvice()
	}
	if s.death != "" {
		how = s.death + " (" + how + ")"
	}
	if s.killed {
		s.death = "killed on request"
	} else {
		s.death = how
	}
	s.flushPendingLocked()
	raw := s.out.takeOut()
	last := raw.render(ReplyCap)
	if op := s.serving; op != nil {
		op.gone()
	}
	s.cancelWaitsLocked()
	for _, stop := range s.running {
		stop() // its sh(cmd, host=...) commands end with it
	}
	if r := s.cur; r != nil && !r.isFinished() {
		if r.fenceTimer != nil {
			r.fenceTimer.Stop()
		}
		res := &wire.Result{Session: s.name, Cell: r.cell, Status: wire.StatusDead,
			DurationMS: time.Since(r.start).Milliseconds()}
		applyOutput(res, last)
		res.Death = fmt.Sprintf("session '%s' died while running cell %d: %s", s.name, r.cell, s.death)
		if len(s.queue) > 0 {
			res.Death += fmt.Sprintf("; %s, queued after it, will not run", cellList(queuedCells(s.queue)))
		}
		r.result, r.raw = res, raw
		close(r.finished)
	} else {
		s.out.letGo(raw)
	}
	never, unread := s.queueDiedLocked()
	if s.killed || s.private {
		h.log.Info("session ended", "session", s.name, "how", s.death)
		return
	}
	note := deathNote{
		Name: s.name, When: time.Now(), How: how, Cells: s.cells,
		LastOutput: tailLines(strings.TrimSpace(last.all.text), 10),
		Transcript: h.paths.Transcript(s.name), Host: s.info.Host, Root: s.info.Root,
		NeverRan: never, Unread: unread,
	}
	h.log.Warn("session died", "session", s.name, "how", how, "cells", s.cells)
	if err := h.writeDeathNote(note); err != nil {
		h.log.Error("death note not written", "session", s.name, "err", err)
	}
}

// othersLine names the sessions other than req.Name with runs going or
// unread results, and those that died, each death once per client
// (deathsToTell).
func (h *Hub) othersLine(req wire.Request) string {
	self, adv := req.Name, wire.AdviceFor(req.Surface)
	h.mu.Lock()
	all := make([]*Session, 0, len(h.sessions))
	for name, s := range h.sessions {
		if name != self && !s.private && !strings.HasPrefix(name, self+"@") { // a group's own sessions are in its reply
			all = append(all, s)
		}
	}
	h.mu.Unlock()
	var parts []string
	for _, s := range all {
		s.mu.Lock()
		if r := s.cur; r != nil {
			if !r.isFinished() {
				parts = append(parts, fmt.Sprintf("%s running cell %d for %s%s", s.name, r.cell, wire.Duration(time.Since(r.start).Seconds()), s.queuedLocked()))
			} else if !r.collected || len(s.kept) > 0 {
				parts = append(parts, fmt.Sprintf("%s has an unread result (%s)", s.name, adv.Wait(s.name)))
			}
		}
		s.mu.Unlock()
	}
	sort.Strings(parts)
	if len(parts) > maxOthers {
		// Every reply carries this line: a fan-out's many sessions, busy
		// in another call, must not make it long.
		parts = append(parts[:maxOthers], fmt.Sprintf("%d more running or unread: %s shows them", len(parts)-maxOthers, adv.Sessions()))
	}
	if dead := h.deathsToTell(req.Client, self); len(dead) > 0 {
		parts = append(parts, deathsLine(dead, adv))
	}
	if len(parts) == 0 {
		return ""
	}
	return "other sessions: " + strings.Join(parts, "; ")
}

// maxOthers is how many other sessions, running or with a result unread,
// a reply names.
const maxOthers = 4

// deathsLine tells of deaths in one short line: a few names and a count.
func deathsLine(dead []string, adv wire.Advice) string {
	const show = 4
	names := strings.Join(dead[:min(len(dead), show)], ", ")
	if len(dead) > show {
		names += fmt.Sprintf(" and %d more", len(dead)-show)
	}
	verb := "died"
	if len(dead) > 1 {
		verb = fmt.Sprintf("died (%d)", len(dead))
	}
	return fmt.Sprintf("%s %s: %s shows how", names, verb, adv.Sessions())
}

// List describes the hub and every session.
func (h *Hub) List() *wire.SessionList { return h.list(false) }

// list is List; brief leaves out each session's memory, which takes a
// few reads of /proc a session to measure.
func (h *Hub) list(brief bool) *wire.SessionList {
	h.mu.Lock()
	all := make([]*Session, 0, len(h.sessions))
	for _, s := range h.sessions {
		if !s.private {
			all = append(all, s)
		}
	}
	dead := h.deadNamesLocked("")
	h.mu.Unlock()
	l := &wire.SessionList{Hub: wire.HubInfo{
		Pid: os.Getpid(), Version: h.version, Supervisor: h.supervisor,
		MemoryLimit: "none", Socket: h.paths.Socket(), Log: h.paths.Log(), RSS: procRSS(os.Getpid()),
	}, Sessions: make([]wire.SessionInfo, 0, len(all))} // [] in JSON, not null
	if h.supervisor == "systemd" {
		l.Hub.MemoryLimit = "MemoryHigh=2G MemoryMax=3G over the hub and all its sessions"
	}
	h.memory.describe(&l.Hub)
	for _, s := range all {
		if brief {
			l.Sessions = append(l.Sessions, s.snapshotOf())
		} else {
			l.Sessions = append(l.Sessions, s.snapshot())
		}
	}
	sort.Slice(l.Sessions, func(i, j int) bool { return l.Sessions[i].Name < l.Sessions[j].Name })
	for _, d := range dead {
		l.Dead = append(l.Dead, wire.DeadInfo{Name: d, Note: h.peekDeathNote(d)})
	}
	l.Swapped = h.listSwapped()
	return l
}
