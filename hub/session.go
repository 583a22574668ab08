package hub

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replhub/replhub/config"
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
	// cw has the exec frames to a worker that has their pipe or a cell
	// link (send); set once the link is up, which may come late.
	cw atomic.Pointer[proto.Writer]
	// cellsMu orders a session on a host's exec frame on its cell link
	// with that link's end (cellsLost); cellsExec is the last one sent
	// there.
	cellsMu   sync.Mutex
	cellsExec *proto.Exec
	// sendMu orders a cell's exec frame, sent only while its cell has not
	// ended, with a reattach's look at whether the worker had it
	// (linkUp), which may end it: a frame sent after that look would run
	// a cell said not to.
	sendMu sync.Mutex
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
	// startInterrupted says that an interrupt came while the session
	// started (stillStarting): its first cell ends as interrupted, without
	// running (takeStartInterruptLocked).
	startInterrupted bool
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
	notesDropped   int      // the worker's notes past maxNotes since the notes were last taken
	names          []string
	namesLost      bool          // a done frame not taken may have had the names: the next exec asks for them
	malformed      int           // frames the worker sent that the hub could not read (malformedFrame)
	channelLost    string        // why a worker that lives cannot reach the hub (framesEnded)
	channelGone    chan struct{} // closed as channelLost is set: for what waits on an answer
	openedBy       string        // the host whose session's code opened this one (relay.go); "" for the user's
	rss            int64
	killed         bool // a deliberate kill: no death note
	death          string
	noise          bytes.Buffer // what came before ready
	transcript     *os.File     // opened at the first cell, closed at exit
	transcriptShut bool         // the worker exited: a late write opens the file and closes it
	// behind is the transcript's lines of cells written behind (behind.go),
	// behindLive whether the live record's rewrite is too; transcribed is
	// when the last cell was recorded.
	behind      []byte
	behindLive  bool
	transcribed time.Time
	serving     *serveOp                     // a put/get/call served for another session
	waitingOn   map[int64]*relayLink         // this session's requests by id, to cancel them
	running     map[int64]context.CancelFunc // its sh, put/get/call, push/pull and group requests, by id
	origin      wire.Request                 // the creator's cwd and environment
	watch       *sudo.Watcher                // sudo's stderr while a root worker starts
	// handedOver is what a restart's handOver left in the live record;
	// a later rewrite (a cell's count) keeps it.
	handedOver *handover
	// private is a run's session (private.go): never listed nor named in
	// another reply, no death note, a transcript only with transcribe.
	private, transcribe bool
	// sock is a durable worker's socket (see adopt.go), workerStart its
	// process's start time, so that a pid reused later is never signalled.
	sock        string
	workerStart string
	// restored is the count of cells the session had run when its swap
	// was restored into this worker (swaprestore.go): the worker has not
	// had them, and a hub that adopts it after a kill must not count
	// them lost from a queue.
	restored int
	verdict  chan error // the watcher's verdict
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
	// relinking is a reattach's look at what the worker had (linkUp): a
	// cell it ends starts no queued one until the link is marked up.
	relinking bool
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

func newSession(h *Hub, name string) *Session {
	now := time.Now()
	return &Session{
		hub: h, name: name, state: stateStarting,
		ready: make(chan struct{}), exited: make(chan struct{}), outClosed: make(chan struct{}),
		channelGone: make(chan struct{}),
		interrupted: make(chan *proto.Interrupted, 4), imu: make(chan struct{}, 1),
		started: now, lastActive: now,
		out: outputs{let: h.floodLetGo},
	}
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
	s.hub.flushBehindLocked(s) // a cell written after the exit (transcribe)
	if s.transcript != nil {
		s.transcript.Close()
		s.transcript = nil
	}
	s.transcriptShut = true
	s.mu.Unlock()
	close(s.exited)
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

// fencePrefix and fenceSuffix begin and end every fence (newFence).
const fencePrefix, fenceSuffix = "\x1e\x1freplhub-fence-", "\x1f\x1e"

// isFence reports whether f is a fence as newFence makes them (one read
// from a record on disk is taken only then).
func isFence(f string) bool {
	hexPart, ok := strings.CutPrefix(f, fencePrefix)
	if !ok {
		return false
	}
	hexPart, ok = strings.CutSuffix(hexPart, fenceSuffix)
	if !ok || len(hexPart) != 24 {
		return false
	}
	_, err := hex.DecodeString(hexPart)
	return err == nil
}

func newFence() []byte {
	var b [12]byte
	rand.Read(b[:])
	return []byte(fencePrefix + hex.EncodeToString(b[:]) + fenceSuffix)
}

// tailLines keeps the last n lines of s.
func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d earlier lines)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
