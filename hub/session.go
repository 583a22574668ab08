package hub

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/internal/procstat"
	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/sudo"
	"github.com/replhub/replhub/wire"
)

// Session states.
const (
	stateStarting = "starting"
	stateIdle     = "idle"
	stateRunning  = "running"
	stateDead     = "dead"
)

// isDead reports whether s is dead: its worker exited (sessionExited may
// still be handling its end; s.exited closes after) or never started.
func (s *Session) isDead() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.state == stateDead
}

// fenceWait is how long a finished cell waits for its fence after its done
// frame, before it is reported with a note that output may be incomplete
// (user code that closed or redirected fd 1 never writes the fence).
const fenceWait = 2 * time.Second

// Session is one named worker and its state machine:
//
//	starting → idle ⇄ running → dead
//
// Its output reader, frame reader and waiter goroutines end when the worker
// ends, and so does its relay writer (stall.go); the waiter is the one that
// marks the session dead.
//
// Lock order: Hub.mu before Session.mu. The Writer's own lock guards
// writes to the worker's stdin and is never held while taking another.
type Session struct {
	hub  *Hub
	name string
	proc Proc

	ready     chan struct{} // closed when the start succeeded or failed
	startErr  error
	exited    chan struct{} // closed when the worker is gone and its death handled
	outClosed chan struct{} // closed when the output reader reached EOF

	w      *proto.Writer // frames to the worker
	frames *proto.Reader // frames from the worker
	// interrupted receives the worker's answers to interrupts; imu, a
	// lock an interrupt can give up on, keeps one interrupt at a time
	// waiting for its answer, and orders it with a cell's exec frame.
	interrupted chan *proto.Interrupted
	imu         chan struct{}
	// interrupting is the interrupt (or cancel) sent and waiting for its
	// answer, for a second one that finds imu held.
	interrupting atomic.Pointer[heldReader]

	mu         sync.Mutex
	state      string
	info       wire.SessionInfo // python, pid, cwd, executable, host
	started    time.Time
	lastActive time.Time
	cells      int  // cells started; the next is cells+1
	cur        *run // the running cell, or the last one while unread
	// queue holds the cells waiting their turn, kept the finished ones
	// nobody has read, gone why a cell's result cannot be (queue.go).
	queue   []*run
	kept    []*run
	gone    map[int]string
	out     outputs
	pending []byte // stdout bytes that may be the start of a fence
	// The worker marks its stdout runs with a token its ready frame tells
	// (see proto.Splitter); each source of output (output.go) has a
	// Splitter of its own, nil until then.
	rawSplit       *proto.Splitter
	frameSplit     *proto.Splitter
	early          []byte   // the output before the ready frame (output.go)
	notes          []string // remarks for the next reply (malformed frames …)
	names          []string
	namesLost      bool // a done frame not taken may have had the names: the next exec asks for them
	rss            int64
	killed         bool // a deliberate kill: no death note
	death          string
	noise          bytes.Buffer                 // what came before ready
	transcript     *os.File                     // opened at the first cell, closed at exit
	transcriptShut bool                         // the worker exited: a late write opens the file and closes it
	serving        *serveOp                     // a put/get/call served for another session
	waitingOn      map[int64]*relayLink         // this session's requests by id, to cancel them
	running        map[int64]context.CancelFunc // its sh, put/get/call, push/pull and group requests, by id
	origin         wire.Request                 // the creator's cwd and environment
	watch          *sudo.Watcher                // sudo's stderr while a root worker starts
	// private is a run's session (private.go): never listed nor named in
	// another reply, no death note, a transcript only with transcribe.
	private, transcribe bool
	// sock is a durable worker's socket (see adopt.go), workerStart its
	// process's start time, so that a pid reused later is never signalled.
	sock        string
	workerStart string
	verdict     chan error // the watcher's verdict
	// requests counts the worker's requests being served, refusals the
	// refusals being sent (takeRequest).
	requests, refusals atomic.Int32
	// asides counts the frames sendAside has on their way.
	asides atomic.Int32
	// relaying is the request a frame from the worker is relayed for
	// while its reader relays it (one of its own, or a group's part that
	// it serves): a session that takes none of it holds the reader, and
	// what comes after (dropStalled).
	relaying atomic.Pointer[relayLink]
	// queries waits for the worker's answers by query id (query.go).
	queries map[int64]chan *proto.Answer
	// lingering is a remote worker that outlives its link (linger.go).
	lingering *linkProc
	// A hand-over in progress (adopt.go, detach): the fence that ends the
	// worker's output to this hub, a prefix of it held back, and the
	// channels closed when the fence, and the detached frame, came.
	detachFence    []byte
	detachCarry    []byte
	detachedOut    chan struct{}
	detachedFrames chan struct{}
	// attached holds the consoles and streaming execs that see this
	// session's cells and output as they happen (watch.go).
	attached attachState
	// relayq feeds the relay writer, started at the first frame relayed
	// to s for another session (stall.go).
	relayq    chan *relayFrame
	relayOnce sync.Once
}

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
	// code until it starts (start is zero until then); sent is set once
	// its exec frame went.
	queued   bool
	queuedAt time.Time
	code     string
	sent     bool
	// parked is set by an interrupt that came before the frame went.
	parked bool
	// stream is the console or streaming exec that runs the cell and takes
	// its output as it comes (watch.go); nil for a plain exec. by says
	// who queued a queued cell, for the consoles that see it start; a
	// queued cell's stream is who queued it until it starts.
	stream *watcher
	by     string
}

func (r *run) isFinished() bool {
	select {
	case <-r.finished:
		return true
	default:
		return false
	}
}

func newSession(h *Hub, name string) *Session {
	now := time.Now()
	return &Session{
		hub: h, name: name, state: stateStarting,
		ready: make(chan struct{}), exited: make(chan struct{}), outClosed: make(chan struct{}),
		interrupted: make(chan *proto.Interrupted, 4), imu: make(chan struct{}, 1),
		started: now, lastActive: now,
		out: outputs{let: h.floodLetGo},
	}
}

// startOpts say how a worker starts.
type startOpts struct {
	// launch starts the process (locally, under sudo, or on a channel).
	launch func() (Proc, error)
	// timeout bounds the start until the ready frame.
	timeout time.Duration
	// watch, when set, reads sudo's stderr until ready; its verdict (a
	// wrong password, a refusal) ends the start at once.
	watch *sudo.Watcher
	// password, when set, is the first line of the worker's stdin (for a
	// local `sudo -k -S`), newline included; it is written and then zeroed.
	password []byte
	// onStub, when set, is called when the remote stub says it runs (sudo
	// accepted): the payload may now follow without being read as a
	// second password attempt.
	onStub func() error
	// maxBlob bounds an object the worker sends; zero means
	// proto.DefaultMaxBlob.
	maxBlob int64
}

// frameWriter writes frames to p's worker: over an ssh link (a remote
// worker, durable or not) in the link's finer pieces, so that a slow link
// still shows progress (proto.NewLinkWriter).
func frameWriter(p Proc) *proto.Writer {
	switch p.(type) {
	case *linkProc, *remoteProc:
		return proto.NewLinkWriter(p.Stdin())
	}
	return proto.NewWriter(p.Stdin())
}

// StartError is a worker that did not start; Err is the cause (a
// *sudo.Error, a *remote.HostKeyError …) for callers that branch on it.
type StartError struct {
	Msg string
	Err error
}

func (e *StartError) Error() string { return e.Msg }
func (e *StartError) Unwrap() error { return e.Err }

// start launches the worker and waits for its ready frame. On failure the
// error says what the worker printed before it died.
func (s *Session) start(ctx context.Context, o startOpts) error {
	defer close(s.ready)
	p, err := o.launch()
	if err != nil {
		sudo.Zero(o.password)
		s.startErr = err
		s.markStartFailed()
		return s.startErr
	}
	s.proc = p
	s.w = frameWriter(p)
	if lp, ok := p.(*linkProc); ok {
		lp.frames = s.w
	}
	verdict := make(chan error, 1)
	s.mu.Lock()
	s.info.Pid = p.Pid()
	if o.watch != nil {
		s.watch, s.verdict = o.watch, verdict
	}
	s.mu.Unlock()
	go s.readOutput()
	if o.password != nil {
		_, werr := p.Stdin().Write(o.password)
		sudo.Zero(o.password)
		if werr != nil {
			s.hub.log.Warn("sudo password not delivered", "session", s.name, "err", werr)
		}
	}
	frames := proto.NewReader(p.Stdout())
	frames.MaxBlob = o.maxBlob
	s.mu.Lock()
	s.frames = frames
	s.mu.Unlock()
	readyCh := make(chan error, 1)
	go func() { readyCh <- s.awaitReady(o.onStub) }()
	timer := time.NewTimer(o.timeout)
	defer timer.Stop()
	var cause error
	select {
	case err = <-readyCh:
	case err = <-verdict:
		cause = err
	case <-timer.C:
		err = fmt.Errorf("no ready frame within %s", o.timeout)
		if o.watch != nil {
			err = &sudo.Error{Kind: sudo.KindNoAnswer, Msg: fmt.Sprintf("no answer from sudo within %s", o.timeout)}
			cause = err
		}
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil && cause == nil && o.watch != nil {
		// The worker ended: sudo's last words may still be on their way.
		select {
		case <-s.outClosed:
		case <-time.After(time.Second):
		}
		select {
		case v := <-verdict:
			err, cause = v, v
		default:
		}
	}
	s.mu.Lock()
	s.watch = nil
	s.mu.Unlock()
	if err != nil {
		// A worker that is exiting on its own gets a moment, so that its
		// own exit status is the one reported.
		exited := make(chan Exit, 1)
		go func() { exited <- p.Wait() }()
		var ex Exit
		wait := time.Second
		if cause != nil {
			wait = 0
		}
		select {
		case ex = <-exited:
		case <-time.After(wait):
			p.Kill()
			ex = <-exited
		}
		select {
		case <-s.outClosed:
		case <-time.After(time.Second):
		}
		p.Close()
		s.mu.Lock()
		s.endEarlyLocked()
		said := strings.TrimSpace(s.noise.String() + s.out.take().all.text)
		s.mu.Unlock()
		msg := fmt.Sprintf("session '%s' did not start: %v (worker %s)", s.name, err, ex)
		if cause != nil {
			msg = fmt.Sprintf("session '%s' did not start: %v", s.name, err)
		} else if said != "" {
			msg += "; it said:\n" + tailLines(said, 20)
		}
		s.startErr = &StartError{Msg: msg, Err: cause}
		s.markStartFailed()
		return s.startErr
	}
	s.mu.Lock()
	s.state = stateIdle
	s.lastActive = time.Now()
	// What came before ready (rc files, interpreter warnings, sudo's
	// prompt) is noise once the start succeeded.
	s.out.take()
	s.mu.Unlock()
	go s.readFrames()
	go s.waitExit()
	return nil
}

func (s *Session) markStartFailed() {
	s.mu.Lock()
	s.state = stateDead
	s.mu.Unlock()
	close(s.exited)
}

// stubLine is what the remote stub writes when it runs.
const stubLine = "REPLHUB-STUB\n"

// awaitReady reads until the ready frame; lines before it are noise (rc
// files, banners), kept only to explain a failed start. The stub's line
// calls onStub.
func (s *Session) awaitReady(onStub func() error) error {
	for i := 0; i < 10000; i++ {
		m, err := s.frames.Read()
		var mf *proto.Malformed
		if errors.As(err, &mf) && string(mf.Line) == stubLine {
			if onStub != nil {
				if err := onStub(); err != nil {
					return err
				}
			}
			continue
		}
		if errors.As(err, &mf) {
			s.mu.Lock()
			if s.noise.Len() < 64<<10 {
				s.noise.Write(mf.Line)
			}
			s.mu.Unlock()
			continue
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("the worker exited before it was ready")
			}
			return err
		}
		f, ok := m.(*proto.Ready)
		if !ok {
			continue
		}
		if f.Proto != proto.Version {
			return fmt.Errorf("the worker speaks protocol %d, the hub %d", f.Proto, proto.Version)
		}
		s.mu.Lock()
		s.setStreamsLocked(f.Streams)
		s.info.Python = f.Python
		s.info.Pid = f.Pid
		s.info.Cwd = f.Cwd
		s.info.Executable = f.Executable
		s.info.Cloudpickle = f.Cloudpickle
		if lp, ok := s.proc.(*localProc); ok && lp.sock != "" {
			s.sock = lp.sock
			_, s.workerStart, _ = procstat.Stat(f.Pid)
		}
		if lp, ok := s.proc.(*linkProc); ok {
			s.lingering = lp
			lp.setSocket(f.Sock, f.SockAlt)
			if f.LingerError != "" {
				s.notes = append(s.notes, "this session ends if its link drops: "+f.LingerError)
			}
		}
		s.mu.Unlock()
		return nil
	}
	return errors.New("too much noise before the ready frame")
}

// readFrames serves the worker's frames until its stream ends. A frame
// that breaks the protocol ends the session, with a death note naming the
// violation; the hub and every other session go on.
func (s *Session) readFrames() {
	for {
		m, err := s.frames.Read()
		var mf *proto.Malformed
		if errors.As(err, &mf) {
			s.hub.log.Warn("malformed frame", "session", s.name, "err", mf.Error())
			s.mu.Lock()
			s.notes = append(s.notes, "the worker sent a "+mf.Error()+"; it was dropped")
			s.namesLost = true // it may have been a done frame
			s.mu.Unlock()
			s.send(&proto.Error{Error: "hub: " + mf.Error()})
			continue
		}
		if err != nil {
			var v *proto.Violation
			if errors.As(err, &v) {
				s.endForViolation(v.Error())
				return
			}
			if lp, ok := s.proc.(*linkProc); ok && lp.awaitLink() {
				s.frames.Reset()
				continue
			}
			return
		}
		s.takeFrame(m)
	}
}

// takeFrame handles one frame from the worker, on its reader.
func (s *Session) takeFrame(m proto.Msg) {
	switch f := m.(type) {
	case *proto.Done:
		s.onDone(f)
	case *proto.Interrupted:
		select {
		case s.interrupted <- f:
		default:
		}
	case *proto.Error:
		s.mu.Lock()
		s.notes = append(s.notes, "the worker reported: "+f.Error)
		s.mu.Unlock()
	case *proto.Req:
		s.takeRequest(f)
	case *proto.Served:
		s.onServed(f)
	case *proto.Chunk:
		s.onChunk(f)
	case *proto.Ack:
		s.onAck(f)
	case *proto.Swapped:
		s.hub.onSwapped(s, f)
	case *proto.Restored:
		s.hub.onRestored(s, f)
	case *proto.Answer:
		s.onAnswer(f)
	case *proto.Out:
		s.mu.Lock()
		s.takeOutputLocked(f.Data, true)
		s.mu.Unlock()
	case *proto.Detached:
		s.mu.Lock()
		if s.detachedFrames != nil {
			close(s.detachedFrames)
			s.detachedFrames = nil
		}
		s.mu.Unlock()
	case *proto.Pong, *proto.Ready:
	}
}

// onDone takes the done frame of the running cell. Its images are
// decoded and scaled here, on the frame reader, not under mu, and only
// for the cell that waits for them: a done frame for another cell is
// dropped undecoded. A reattached worker sends its last done frame again,
// which the old link may have lost: one already had is ignored.
func (s *Session) onDone(f *proto.Done) {
	s.mu.Lock()
	r := s.cur
	if r == nil || r.cell != f.Cell || r.done != nil || r.isFinished() {
		s.namesLost = s.namesLost || f.Names != nil
		s.mu.Unlock()
		return
	}
	s.mu.Unlock()
	display, dnotes := displayItems(f)
	f.Data = nil
	s.mu.Lock()
	defer s.mu.Unlock()
	// The cell may have ended otherwise (killed, the fence timed out)
	// while its images were scaled.
	if s.cur != r || r.done != nil || r.isFinished() {
		s.namesLost = s.namesLost || f.Names != nil
		return
	}
	r.done, r.display, r.dnotes = f, display, dnotes
	if f.Quiet && r.sealed == nil {
		s.sealLocked(r) // no fence comes: nothing was written since the last
	}
	if f.Names != nil { // nil: they did not change
		s.names = f.Names
	}
	if f.RSS > 0 {
		s.rss = f.RSS
	}
	s.maybeFinishLocked(r)
}

// watchFrames ends, once a second, every session whose worker has left a
// frame half sent for longer than the hub's FrameStall: its stream can
// never be read in step again, and a session stuck that way would hang
// every caller.
func (h *Hub) watchFrames(ctx context.Context) {
	t := time.NewTicker(min(time.Second, h.frameStall/4))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, s := range h.allSessions() {
			s.mu.Lock()
			frames, state, remote := s.frames, s.state, s.info.Host != "local"
			s.mu.Unlock()
			if frames == nil || state == stateStarting || state == stateDead {
				continue
			}
			limit := h.frameStall
			if remote {
				limit *= 12
			}
			if d := frames.Stalled(); d > limit {
				s.endForViolation(fmt.Sprintf("half a frame, then nothing for %s", d.Round(100*time.Millisecond)))
			}
		}
	}
}

// endForViolation ends a session whose worker broke the protocol.
func (s *Session) endForViolation(why string) {
	s.hub.log.Error("worker broke the protocol", "session", s.name, "err", why)
	s.mu.Lock()
	if s.death == "" {
		s.death = "the worker broke the frame protocol (" + why + "), so the hub ended it"
	}
	s.mu.Unlock()
	s.proc.Kill()
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

// waitExit reaps the worker and, unless it was killed on purpose, records
// how it died.
func (s *Session) waitExit() {
	p := s.proc
	ex := p.Wait()
	// Let the output reader take the dying interpreter's last words; a
	// grandchild that still holds the pipe must not keep us here.
	select {
	case <-s.outClosed:
	case <-time.After(500 * time.Millisecond):
	}
	s.hub.sessionExited(s, ex)
	p.Close()
	s.mu.Lock()
	if s.transcript != nil {
		s.transcript.Close()
		s.transcript = nil
	}
	s.transcriptShut = true
	s.mu.Unlock()
	close(s.exited)
}

// send writes one frame to the worker.
func (s *Session) send(m proto.Msg) error { return s.w.Write(m) }

// maxRequestID bounds a request's id: the links of a group's parts
// (fanLinkID) are then negative, and meet no request's own id nor the
// parts of another request. A cancel may name a part.
const maxRequestID = 1<<50 - 1

// maxRequests bounds the requests one worker has in flight: each holds a
// goroutine, and a put's or call's blob, in the hub.
const maxRequests = 16

// maxRefusals bounds the refusals (a bad id, too many requests) waiting
// to reach a worker that does not read its stdin: each holds a goroutine.
// Past it, a refusal is dropped: only a worker that floods requests and
// reads no answer meets it, and it then waits on itself alone.
const maxRefusals = 64

// takeRequest serves a req frame of s's worker on a goroutine of its own,
// so that the frame reader never blocks, or, past maxRequests in flight,
// answers it at once with an error. A cancel is served here: it ends a
// request in flight, takes no time and sends nothing.
func (s *Session) takeRequest(f *proto.Req) {
	if f.Kind == "cancel" {
		s.cancelRequest(f.ID)
		return
	}
	if f.ID <= 0 || f.ID > maxRequestID {
		s.refuse(f.ID, fmt.Sprintf("bad request id %d: a worker numbers its requests 1, 2, …", f.ID))
		return
	}
	if s.requests.Add(1) > maxRequests {
		s.requests.Add(-1)
		s.refuse(f.ID, fmt.Sprintf(
			"too many requests at once: session '%s' has %d waiting on the hub; wait for one to end", s.name, maxRequests))
		return
	}
	go func() {
		defer s.requests.Add(-1)
		s.hub.serveRequest(s, f)
	}()
}

// refuse answers request id with an error, on a goroutine (the worker may
// be slow to read its stdin), at most maxRefusals at once.
func (s *Session) refuse(id int64, msg string) {
	if s.refusals.Add(1) > maxRefusals {
		s.refusals.Add(-1)
		return
	}
	go func() {
		defer s.refusals.Add(-1)
		s.send(&proto.Reply{ID: id, Error: msg})
	}()
}

// maxBlob is the largest object s's worker may send: its reader's MaxBlob,
// or proto.DefaultMaxBlob.
func (s *Session) maxBlob() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.frames != nil && s.frames.MaxBlob > 0 {
		return s.frames.MaxBlob
	}
	return proto.DefaultMaxBlob
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
	s.mu.Unlock()

	if err := s.send(s.execFrame(r, code)); err != nil {
		// The worker is dying; its waiter will finish the run as dead.
		s.hub.log.Warn("exec frame not sent", "session", s.name, "err", err)
	}
	// Recorded while the worker runs the cell, not before: the disk's
	// writes stay off the round trip.
	s.hub.transcribe(s, r, code)
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
		res.Output = strings.TrimRight(earlier.TextFor(adv.Surface()), "\n") + "\n" + res.Output
		res.Stdout, res.Stderr = earlier.Stdout+res.Stdout, earlier.Stderr+res.Stderr
	}
	return res, nil
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
		if r := s.cur; r != nil && !r.collected {
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

// deathText says how the session died.
func (s *Session) deathText() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.death
}

// snapshot describes the session for the sessions op. A local session's
// memory is read from /proc, its worker's and its children's; a remote
// one's is what its last done frame said.
func (s *Session) snapshot() wire.SessionInfo {
	info := s.snapshotOf()
	if info.Host == config.Local && info.State != stateDead {
		if rss := treeRSS(info.Pid); rss > 0 {
			info.RSS = rss
		}
	}
	return info
}

// startedInfo describes a session that has just run its first cell: the
// worker told its memory (its children's too) in the done frame, so /proc
// is not walked again for each of many sessions starting at once.
func (s *Session) startedInfo() wire.SessionInfo {
	if info := s.snapshotOf(); info.RSS > 0 {
		return info
	}
	return s.snapshot()
}

func (s *Session) snapshotOf() wire.SessionInfo {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	info := s.info
	info.Name = s.name
	info.State = s.state
	info.UpS = now.Sub(s.started).Seconds()
	info.IdleS = now.Sub(s.lastActive).Seconds()
	info.Cells = s.cells
	info.Names = s.names
	info.RSS = s.rss
	info.Transcript = s.hub.paths.Transcript(s.name)
	if r := s.cur; r != nil {
		if !r.isFinished() {
			info.RunningCell = r.cell
			info.RunningS = now.Sub(r.start).Seconds()
		} else if !r.collected {
			info.Unread = true
		}
	}
	s.queueInfoLocked(&info, now)
	if op := s.serving; op != nil {
		info.State = stateRunning
		info.Serving = fmt.Sprintf("%s from '%s'", op.kind, op.from)
		info.RunningS = now.Sub(op.start).Seconds()
	}
	if s.lingering != nil {
		if down, at := s.lingering.isDown(); down {
			info.LinkDownS = now.Sub(at).Seconds()
		}
	}
	if info.Host == "" {
		info.Host = config.Local
	}
	return info
}

func newFence() []byte {
	var b [12]byte
	rand.Read(b[:])
	return []byte("\x1e\x1freplhub-fence-" + hex.EncodeToString(b[:]) + "\x1f\x1e")
}

// tailLines keeps the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d earlier lines)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
