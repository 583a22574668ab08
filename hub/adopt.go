package hub

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/replhub/replhub/internal/procstat"
	"github.com/replhub/replhub/internal/rawio"
	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/safesock"
	"github.com/replhub/replhub/wire"
)

// Durable local workers (DESIGN.md, "Durable workers"). A local worker is
// started with --durable SOCK: it serves SOCK (0600, in the runtime
// folder's w/, its peer's uid checked) and outlives the end of its frame
// stream, its output kept meanwhile by the worker. A hub that starts finds
// the live records its predecessor left (live.go); where the record names
// a socket and its worker still runs, the hub adopts the worker there: it
// sends adopt, the worker answers with a ready frame that says which cell
// it is on and whether that cell still runs, then the done frame and the
// output that waited for a hub. Frames and output then share the socket
// (output as out frames).
//
// A hub that restarts on request (replhub restart) hands over what only it
// held (unread output, a result nobody collected, notes) in the records;
// a hub that was killed could not, and the adopting hub says so.
//
// Remote workers outlive a dropped link the same way, for their linger
// (linger.go), but not yet the hub: a restart swaps them.

// adoptWait bounds an adoption: the connection and the ready frame.
const adoptWait = 3 * time.Second

// workerSocket is a fresh socket path for a durable worker.
func (h *Hub) workerSocket() string {
	var b [8]byte
	rand.Read(b[:])
	return filepath.Join(h.paths.WorkerDir(), hex.EncodeToString(b[:])+".sock")
}

// handover is what a hub restarting on request leaves in a session's live
// record for the next hub.
type handover struct {
	// Unread is the unread output merged, UnreadRuns the lengths of its
	// runs of one stream in turn (stdout's positive, stderr's negative);
	// UnreadStdout and UnreadStderr each stream of it, for a hub from
	// before the runs (handover.go).
	Unread       string       `json:"unread,omitempty"`
	UnreadRuns   []int        `json:"unread_runs,omitempty"`
	UnreadStdout string       `json:"unread_stdout,omitempty"`
	UnreadStderr string       `json:"unread_stderr,omitempty"`
	Result       *wire.Result `json:"result,omitempty"`
	Notes        []string     `json:"notes,omitempty"`
	At           time.Time    `json:"at"`
	// Running is the cell that ran at the hand-over: a worker that says
	// it has finished it sent its done frame to a hub since, which ended
	// without handing the session over.
	Running int `json:"running,omitempty"`
	// RunningQueued says that cell came through the queue: its result is
	// kept for a wait of its own (--cell), not given to the next exec.
	RunningQueued bool `json:"running_queued,omitempty"`
	// Queue and Kept are the session's queue and the unread results of
	// its earlier cells (queue.go).
	Queue []queuedCode   `json:"queue,omitempty"`
	Kept  []*wire.Result `json:"kept,omitempty"`
	// Gone says why the results of some cells will not come (queue.go).
	Gone map[int]string `json:"gone,omitempty"`
}

// socketProc is an adopted worker: frames and output on its socket. It is
// not this hub's child, so its exit status is not known here.
type socketProc struct {
	conn  *net.UnixConn
	rw    net.Conn // conn, read and written raw where it refuses descriptors (rawio.Unix)
	cells heldLink // the cell link, if the worker took one
	w     *proto.Writer
	pid   int
	start string // the worker's start time (procstat.Stat), "" if unknown
	root  bool
	eof   chan struct{} // closed when the frame stream ended
	once  sync.Once
}

// eofReader reads the socket and closes eof at its end.
type eofReader struct{ p *socketProc }

func (r eofReader) Read(b []byte) (int, error) {
	n, err := r.p.rw.Read(b)
	if err != nil {
		r.p.once.Do(func() { close(r.p.eof) })
	}
	return n, err
}

// outputEnd is the adopted worker's output stream as a Proc has it: the
// output comes in out frames, so it only ends, with the socket.
type outputEnd struct{ eof chan struct{} }

func (o outputEnd) Read([]byte) (int, error) {
	<-o.eof
	return 0, io.EOF
}

func (p *socketProc) Stdin() io.WriteCloser { return p.rw }
func (p *socketProc) Stdout() io.Reader     { return eofReader{p} }
func (p *socketProc) Stderr() io.Reader     { return outputEnd{p.eof} }
func (p *socketProc) Pid() int              { return p.pid }

// Wait waits for the frame stream to end, then (bounded) for the process.
func (p *socketProc) Wait() Exit {
	<-p.eof
	p.cells.close()
	for i := 0; i < 100 && p.alive(); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	return Exit{Code: -1, Err: errors.New("exit status unknown: the session was adopted from an earlier hub")}
}

func (p *socketProc) alive() bool { return procstat.Running(p.pid, p.start) }

// Kill asks the worker to exit; a worker of ours is also sent SIGKILL with
// its process group (it leads it), once it is known to be the same
// process. A root worker can only be asked.
func (p *socketProc) Kill() error {
	go p.w.Write(&proto.Exit{})
	if p.root || !p.alive() {
		return nil
	}
	return syscall.Kill(-p.pid, syscall.SIGKILL)
}

func (p *socketProc) Close() error {
	p.cells.close()
	return p.conn.Close()
}

// dialer dials a worker's socket: one that refuses descriptors from
// before it connects, so that the worker can pass none and the hub reads
// and writes it raw (rawio.Unix), unless plain (Hub.plainStreams); and
// that holds at least what a pipe holds, as a cell socket does
// (cellSendBuffer).
func dialer(plain bool) *net.Dialer {
	return &net.Dialer{Control: func(network, address string, c syscall.RawConn) error {
		c.Control(func(fd uintptr) {
			syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, cellSendBuffer)
		})
		if plain {
			return nil
		}
		return rawio.RefuseRightsOnDial(network, address, c)
	}}
}

// peerOK checks that the worker's socket is served by this user, or by
// root for a root session's.
func peerOK(conn *net.UnixConn, root bool) error {
	uid, err := safesock.PeerUID(conn)
	if err != nil || !(uid == os.Getuid() || (root && uid == 0)) {
		return fmt.Errorf("its socket is served by uid %d, not ours", uid)
	}
	return nil
}

// dialCells makes the cell link of a worker adopted on sock (proto.Cells):
// a second connection, on which its exec frames go, as on the pipe of the
// hub that started it; token is its ready frame's CellsToken. Without it
// (a worker that refuses it), they go with the rest, only slower: its
// reader thread then hands each to the main thread.
func dialCells(sock string, root bool, token string, plain bool) (*net.UnixConn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), adoptWait)
	defer cancel()
	c, err := dialer(plain).DialContext(ctx, "unix", sock)
	if err != nil {
		return nil, err
	}
	conn := c.(*net.UnixConn)
	if err := peerOK(conn, root); err != nil {
		conn.Close()
		return nil, err
	}
	if err := cellsHandshake(conn, token); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// cellsHandshake sends a cell link's Cells frame with token on c and
// reads the worker's answer, within adoptWait (c is closed at its end: a
// channel through ssh has no deadlines).
func cellsHandshake(c net.Conn, token string) error {
	return withinAdoptWait(c, "answer", func() error {
		if err := proto.NewWriter(c).Write(&proto.Cells{Token: token}); err != nil {
			return err
		}
		m, err := readFirstFrame(c)
		if err != nil {
			return err
		}
		if _, ok := m.(*proto.Cells); !ok {
			return fmt.Errorf("the worker answered %s, not cells", m.Op())
		}
		return nil
	})
}

// adoptAll adopts, in parallel, the workers of the records a dead hub
// left; it returns the records it could not adopt, for reclaimLive to turn
// into death notes.
func (h *Hub) adoptAll(recs []liveRecord) []liveRecord {
	var (
		mu     sync.Mutex
		failed []liveRecord
		wg     sync.WaitGroup
	)
	for _, rec := range recs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.adopt(rec); err != nil {
				h.log.Warn("session not adopted", "session", rec.Name, "err", err)
				mu.Lock()
				failed = append(failed, rec)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return failed
}

// adopt connects to rec's worker and makes it a session of this hub.
func (h *Hub) adopt(rec liveRecord) error {
	if rec.Sock == "" || rec.Host != "local" {
		return errors.New("not a durable worker")
	}
	if !procstat.Running(rec.Pid, rec.WorkerStart) {
		return errors.New("its worker is gone")
	}
	ctx, cancel := context.WithTimeout(context.Background(), adoptWait)
	defer cancel()
	c, err := dialer(h.plainStreams).DialContext(ctx, "unix", rec.Sock)
	if err != nil {
		return err
	}
	conn := c.(*net.UnixConn)
	if err := peerOK(conn, rec.Root); err != nil {
		conn.Close()
		return err
	}
	ready, err := handshake(conn, true)
	if err != nil {
		conn.Close()
		return err
	}
	// The pid is signalled at a kill: it must be the worker's, not one a
	// torn or forged record names.
	if ready.Pid != rec.Pid {
		conn.Close()
		return fmt.Errorf("its worker is pid %d, not %d as its record says", ready.Pid, rec.Pid)
	}
	start := rec.WorkerStart
	if start == "" {
		_, start, _ = procstat.Stat(rec.Pid) // pinned now, against the pid's reuse
	}
	p := &socketProc{conn: conn, rw: rawio.Unix(conn), pid: rec.Pid, start: start, root: rec.Root, eof: make(chan struct{})}
	p.w = proto.NewWriter(p.rw)
	frames := proto.NewReader(p.Stdout())

	s := newSession(h, rec.Name)
	s.proc, s.w, s.frames = p, p.w, frames
	s.sock, s.workerStart = rec.Sock, start
	s.started = rec.Started
	s.info = wire.SessionInfo{Host: "local", Root: rec.Root, Python: ready.Python, Pid: ready.Pid,
		Cwd: ready.Cwd, Executable: ready.Executable, Cloudpickle: ready.Cloudpickle}
	s.origin = wire.Request{Cwd: ready.Cwd, Env: os.Environ()}
	// Past the worker's cell, the record counts cells the hub numbered
	// and the worker never ran (queued, taken out, restored from a swap
	// into a new worker): believed up to maxCells, where the numbers
	// cannot wrap.
	rec.Cells = min(rec.Cells, maxCells)
	s.cells = max(rec.Cells, ready.Cell)
	s.restored = min(max(rec.Restored, 0), s.cells)
	s.names = ready.Names
	s.setStreamsLocked(ready.Streams)
	s.state = stateIdle
	now := time.Now()
	if ho := rec.Handover; ho != nil {
		ho.restoreOutput(&s.out.buf)
		s.notes = append(s.notes, ho.Notes...)
		s.notes = append(s.notes, fmt.Sprintf("the hub restarted at %s (replhub restart) and adopted this session", ho.At.Format("15:04:05")))
		if ho.Result != nil && !ready.Running {
			r := &run{cell: ho.Result.Cell, start: now, finished: make(chan struct{}), result: ho.Result}
			close(r.finished)
			s.cur = r
		}
		s.takeQueueOver(ho, ready.Cell)
		if ho.Running > 0 && ho.Running == ready.Cell && !ready.Running {
			s.goneLocked(ready.Cell, fmt.Sprintf("cell %d of session '%s' finished after the restart at %s, in a hub that ended without handing the session over: its result went with that hub",
				ready.Cell, s.name, ho.At.Format("15:04:05")))
		}
	} else {
		s.notes = append(s.notes, fmt.Sprintf("a new hub adopted this session at %s: its names and cells are intact; output the previous hub (pid %d) had read but not shown is lost with it",
			now.Format("15:04:05"), rec.HubPid))
		s.queueLost(max(ready.Cell, s.restored), rec)
		finished := ready.Cell
		if ready.Running {
			finished--
		}
		s.resultsLost(finished, rec)
	}
	if ready.Running {
		start := now.Add(-time.Duration(ready.Elapsed * float64(time.Second)))
		s.cur = &run{cell: ready.Cell, fence: []byte(ready.Fence), start: start, finished: make(chan struct{})}
		if ho := rec.Handover; ho != nil && ho.Running == ready.Cell && ho.RunningQueued {
			// Sent already: not to be handed over again as one to run.
			s.cur.queued, s.cur.sent = true, true
		}
		s.state = stateRunning
	}
	close(s.ready)

	h.mu.Lock()
	if h.sessions[rec.Name] != nil || h.closing {
		h.mu.Unlock()
		conn.Close()
		return errors.New("the name is taken")
	}
	h.sessions[rec.Name] = s
	h.mu.Unlock()
	go s.readOutput()
	go s.readFrames()
	go s.waitExit()
	if ready.CellsToken != "" {
		// Once its frames are read: the worker's thread that answers the
		// link first writes what it kept for a hub (Pump.attach), which
		// may be more than its socket holds. The hub serves no request
		// yet, but a done frame may send a queued cell meanwhile, with
		// the rest.
		s.takeCellLink(&p.cells, rec.Root, ready.CellsToken)
	}
	h.recordLive(s)
	s.mu.Lock()
	s.nextLocked() // the queue goes on where the last hub left it
	s.mu.Unlock()
	h.log.Info("session adopted", "session", s.name, "pid", ready.Pid, "cell", ready.Cell, "running", ready.Running)
	return nil
}

// detachWait bounds a worker's answer to detach at a restart.
const detachWait = 2 * time.Second

// handOver is a hub's last act when it restarts on request: every durable
// session's worker is detached (its output and frames to this hub end,
// what follows waits for the next hub), its record gets what only this
// hub holds, and its worker is left running. It returns the sessions
// that are not durable, which end as at a stop.
func (h *Hub) handOver() []*Session {
	h.mu.Lock()
	h.closing = true
	var all, rest []*Session
	for _, s := range h.sessions {
		all = append(all, s)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range all {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-s.ready
			s.detach()
		}()
	}
	wg.Wait()
	at := time.Now()
	for _, s := range all {
		<-s.ready
		s.mu.Lock()
		if s.sock == "" || s.state == stateDead {
			s.mu.Unlock()
			rest = append(rest, s)
			continue
		}
		ho := &handover{At: at, Notes: slices.Clone(s.notes)} // kept, and written again (handedOver)
		// What was held back (a fence's head, a marker's) is output after all.
		s.endEarlyLocked()
		s.rawSplit.Split(s.detachCarry, s.takeRunLocked)
		s.detachCarry = nil
		s.rawSplit.Flush(s.takeRunLocked)
		s.frameSplit.Flush(s.takeRunLocked)
		s.flushPendingLocked()
		ho.keepOutput(s.out.takeOut())
		if r := s.cur; r != nil && r.isFinished() && !r.collected && r.result != nil {
			ho.Result = r.result
		} else if r != nil && !r.isFinished() {
			ho.Running, ho.RunningQueued = r.cell, r.queued
		}
		s.handQueueOverLocked(ho)
		// Kept for each rewrite after this one: a cell's sent after the
		// hand-over (a queued cell's, which the hand-over carries too), or
		// one's written behind (flushBehind).
		s.handedOver = ho
		h.rewriteLiveLocked(s, h.liveRecordLocked(s))
		s.mu.Unlock()
	}
	return rest
}

// detach ends a durable worker's output and frames to this hub, so that
// what the hand-over holds is all of it: the worker writes a fence to its
// output, then sends detached, and keeps the rest for the next hub.
func (s *Session) detach() {
	s.mu.Lock()
	if s.sock == "" || s.state == stateDead {
		s.mu.Unlock()
		return
	}
	fence := newFence()
	out, frames := make(chan struct{}), make(chan struct{})
	s.detachFence, s.detachedOut, s.detachedFrames = fence, out, frames
	s.mu.Unlock()
	// Stall-bounded: a worker that reads nothing must not hold the restart.
	if err := s.relaySend(&proto.Detach{Fence: string(fence)}, nil); err != nil {
		s.hub.log.Warn("detach not sent", "session", s.name, "err", err)
		return
	}
	timeout := time.After(detachWait)
	for _, ch := range []chan struct{}{out, frames} {
		select {
		case <-ch:
		case <-timeout:
			s.hub.log.Warn("no answer to detach: output written during the restart may be lost", "session", s.name)
			return
		}
	}
}
