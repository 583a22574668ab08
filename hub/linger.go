package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/remote"
	"github.com/replhub/replhub/wire"
)

// Remote sessions that outlive their link (DESIGN.md, "Durable workers").
// A worker on a host is started with --linger SECS: it serves a unix
// socket in a private folder there and, when its link drops, waits that
// long for a hub, keeping its output and a finished cell's done frame as a
// local durable worker does. The hub, for its part, keeps the session
// (on hold, not dead) and reconnects: a new connection on the same route
// (host keys checked again, the same keys), then the worker's socket
// through it (remote.Conn.DialSocket), then adopt, as a new hub adopts a
// local worker. Frames then travel on the socket, output as out frames.
//
// linkProc is that session's Proc: its frame streams span the links, its
// Wait ends only when the worker has (or is out of reach for good).

// lingerGrace is how long after the worker's own linger the hub still
// tries: the two clocks start at slightly different moments.
const lingerGrace = 15 * time.Second

// relinkDelays are the waits between tries to reconnect, the last one
// repeated; an exec on the session tries at once.
var relinkDelays = []time.Duration{0, 100 * time.Millisecond, 200 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2 * time.Second, 5 * time.Second}

// errHubStopping ends a reconnection when the hub stops.
var errHubStopping = errors.New("the hub is stopping")

// errLinkDown is a frame written while the link is down.
var errLinkDown = errors.New("the link to the session's host is down; the hub is reconnecting")

// linkProc is a remote worker that outlives its link.
type linkProc struct {
	host   string
	linger time.Duration
	first  *remote.Worker
	// redial gets a connection on the session's route (the pool's, or a
	// new one), holding a reference for the caller to release.
	redial func(ctx context.Context) (*remote.Conn, error)
	// onDown and onUp tell the session; onUp runs before any frame of the
	// new link is read, and calls markUp once frames may go on it (once
	// it has looked at what the worker had).
	onDown func(at time.Time, why error)
	onUp   func(ready *proto.Ready, down, up time.Time, markUp func() bool)
	// onCellsLost tells the session that the cell link ended alone, its
	// link gen up (watchCells).
	onCellsLost func(gen int)
	logf        func(msg string, args ...any)
	// frames is the session's frame writer (set before any frame goes),
	// through which Kill sends exit in turn with other frames.
	frames *proto.Writer
	// cw is the session's writer of exec frames (Session.cw), set while a
	// cell link (cells) is up on the current link (takeCells).
	cw *atomic.Pointer[proto.Writer]

	mu sync.Mutex
	// cells is the current link's cell link; cellsW, the last cell link's
	// writer, made on link cellsGen: a failed write on it tells a cell
	// link that ended alone from one that goes with its link (cellsFailed).
	cells    net.Conn
	cellsW   *proto.Writer
	cellsGen int
	sock     string // the worker's socket, and where it moves
	sockAlt  string
	w        io.Writer // the current link's frame streams; nil while down
	r        io.Reader
	pin      io.Writer // the link the frame being written began on
	pinned   bool
	conn     *remote.Conn // the current socket link's connection
	sc       net.Conn     // the current socket link
	linkEnd  chan struct{}
	endOnce  *sync.Once
	gen      int // links made; readerGen is the one the frame reader is on
	readGen  int
	down     bool
	downAt   time.Time
	killed   bool
	ready    bool // the worker sent its ready frame
	over     bool // Wait's answer is known
	exit     Exit
	changed  chan struct{} // closed and replaced at every change above
	kick     chan struct{}
	// ctx ends with Kill: a reattach under way gives up.
	ctx  context.Context
	stop context.CancelFunc
}

// newLinkProc wraps a worker just started; the caller sets the callbacks
// and then calls start.
func newLinkProc(first *remote.Worker, host string, linger time.Duration) *linkProc {
	ctx, stop := context.WithCancel(context.Background())
	return &linkProc{first: first, host: host, linger: linger,
		w: first.Stdin(), r: first.Stdout(),
		changed: make(chan struct{}), kick: make(chan struct{}, 1), ctx: ctx, stop: stop}
}

func (p *linkProc) start() { go p.supervise() }

// setSocket records where the worker serves, from its ready frame; until
// then (or without one) a dropped link ends the session.
func (p *linkProc) setSocket(sock, alt string) {
	p.mu.Lock()
	p.sock, p.sockAlt, p.ready = sock, alt, true
	p.mu.Unlock()
}

// changedLocked wakes everyone waiting for a change.
func (p *linkProc) changedLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// supervise follows the links: on the first one the channel's end says
// how it ended; on a socket link, the connection's loss tells a dropped
// link from a worker that ended.
func (p *linkProc) supervise() {
	code, sig, err := p.first.Wait()
	ex := Exit{Code: code, Signal: sig, Err: err}
	for {
		var lost *remote.LinkError
		p.mu.Lock()
		killed, sock := p.killed, p.sock
		p.mu.Unlock()
		if !errors.As(ex.Err, &lost) || killed || sock == "" {
			if killed && lost != nil && sock != "" {
				// Killed as the link died unseen (a frozen one, before
				// keepalives gave up): the exit went nowhere.
				go p.endWhenBack(time.Now().Add(p.linger + lingerGrace))
			}
			p.finish(ex)
			return
		}
		downAt := time.Now()
		p.mu.Lock()
		p.down, p.downAt, p.w, p.r = true, downAt, nil, nil
		p.dropCellsLocked()
		p.changedLocked()
		p.mu.Unlock()
		p.onDown(downAt, lost)
		ready, err := p.relink(downAt)
		if err != nil {
			p.finish(Exit{Code: -1, Err: err})
			return
		}
		p.mu.Lock()
		killed = p.killed
		sc := p.sc
		p.mu.Unlock()
		up := false
		if !killed {
			var once sync.Once
			markUp := func() bool { once.Do(func() { up = p.markUp() }); return up }
			p.onUp(ready, downAt, time.Now(), markUp)
			markUp()
		}
		if !up {
			// Killed while the reattach was made (Kill saw the link down,
			// and could not tell the worker): it is told now. Nothing else
			// writes on sc: the link is still down.
			proto.NewWriter(sc).Write(&proto.Exit{})
			sc.Close()
			p.finish(Exit{Code: -1, Err: fmt.Errorf("killed while the link to %s was down", p.host)})
			return
		}
		p.mu.Lock()
		conn, end, gen := p.conn, p.linkEnd, p.gen
		p.mu.Unlock()
		if ready.CellsToken != "" {
			go p.takeCells(ready.CellsToken, gen)
		}
		select {
		case <-end:
			// The socket ended; the connection's loss follows a dropped
			// link within moments.
			select {
			case <-conn.Lost():
			case <-time.After(time.Second):
			}
		case <-conn.Lost():
		}
		if lostErr := conn.LostErr(); lostErr != nil {
			ex = Exit{Code: -1, Err: lostErr}
		} else {
			ex = Exit{Code: -1, Err: fmt.Errorf("exit status unknown: the worker on %s ended while reattached through its socket", p.host)}
		}
	}
}

// markUp makes the new link the one frames go on; false, the link left
// down, where the session was killed since the reattach looked.
func (p *linkProc) markUp() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.killed {
		return false
	}
	p.down = false
	p.gen++
	p.changedLocked()
	return true
}

func (p *linkProc) finish(ex Exit) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.over, p.exit = true, ex
	p.dropCellsLocked()
	p.changedLocked()
}

// takeCells opens a cell link to the worker's socket through link gen's
// connection, with the token its ready frame gave: its exec frames then
// go on a channel of their own, which its main thread reads while it
// waits, rather than through its reader thread. Made after the link's
// frames are read (the worker's thread that answers it first writes what
// it kept for a hub), and kept only while link gen is up: a drop closes
// it (dropCellsLocked), and the next link opens its own.
func (p *linkProc) takeCells(token string, gen int) {
	p.mu.Lock()
	conn, sock, ok := p.connLocked(), p.sock, p.linkUpLocked(gen) && p.cw != nil
	p.mu.Unlock()
	if !ok || sock == "" {
		return
	}
	sc, err := conn.DialSocket(sock)
	if err == nil {
		if err = cellsHandshake(sc, token); err != nil {
			sc.Close()
		}
	}
	if err != nil {
		p.logf("no cell link: exec frames go with the rest", "host", p.host, "err", err)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.linkUpLocked(gen) || p.cells != nil {
		sc.Close()
		return
	}
	p.cells, p.cellsW, p.cellsGen = sc, proto.NewLinkWriter(sc), gen
	p.cw.Store(p.cellsW)
	go p.watchCells(sc)
}

// watchCells reads the cell link, on which the worker writes nothing
// after its answer, until it ends: one that the server closes on its own
// while the link is up (sshd's ChannelTimeout on forwarded channels) is
// let go, and exec frames go with the rest. It ends with the channel.
func (p *linkProc) watchCells(sc net.Conn) {
	io.Copy(io.Discard, sc)
	p.mu.Lock()
	// Alone: not with its link (a drop not marked yet, a worker that
	// ends, a kill), which the reattach or the end answers for.
	alone := p.cells == sc && p.linkUpLocked(p.cellsGen)
	if p.cells == sc {
		p.dropCellsLocked()
	}
	lost, gen := p.onCellsLost, p.gen
	p.mu.Unlock()
	if alone && lost != nil {
		lost(gen)
	}
}

// linkUpLocked says whether link gen is the current one and up: not
// down, over or killed, and its connection not lost.
func (p *linkProc) linkUpLocked(gen int) bool {
	if gen != p.gen || p.down || p.over || p.killed {
		return false
	}
	conn := p.connLocked()
	return conn != nil && conn.LostErr() == nil
}

// linkUp is linkUpLocked, taking the lock.
func (p *linkProc) linkUp(gen int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.linkUpLocked(gen)
}

// cellsFailed is an exec frame's write on cell link w failing. True when
// the cell link ended alone, its link still up (the server closed its
// channel): it is let go, and the frame goes on the link, which the
// worker reads too (it dropped what part of the frame reached it on the
// cell link). False when the link itself is going: the frame is lost
// with it, and the reattach's ready frame says so (linkUp); sent on the
// next link, it could run after linkUp called it lost.
func (p *linkProc) cellsFailed(w *proto.Writer) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w != p.cellsW || !p.linkUpLocked(p.cellsGen) {
		return false
	}
	p.dropCellsLocked()
	return true
}

// connLocked is the current link's connection: a reattach's, or the
// first link's.
func (p *linkProc) connLocked() *remote.Conn {
	if p.conn != nil {
		return p.conn
	}
	return p.first.Conn()
}

// dropCellsLocked ends the cell link, with the link it was made on.
func (p *linkProc) dropCellsLocked() {
	if p.cw != nil {
		p.cw.Store(nil)
	}
	if p.cells != nil {
		p.cells.Close()
		p.cells = nil
	}
}

// awaitLink is the frame reader's question when its stream ended: true
// once the next link is in place (read on from it), false when the worker
// is gone.
func (p *linkProc) awaitLink() bool {
	for {
		p.mu.Lock()
		if p.over {
			p.mu.Unlock()
			return false
		}
		if !p.down && p.gen != p.readGen {
			p.readGen = p.gen
			p.mu.Unlock()
			return true
		}
		ch := p.changed
		p.mu.Unlock()
		<-ch
	}
}

// isKilled says whether the session was killed.
func (p *linkProc) isKilled() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.killed
}

// isDown says whether the link is down, and since when.
func (p *linkProc) isDown() (bool, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.down && !p.over, p.downAt
}

// awaitUp tries to reconnect now and waits, at most d, for the link.
func (p *linkProc) awaitUp(ctx context.Context, d time.Duration) bool {
	select {
	case p.kick <- struct{}{}:
	default:
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		p.mu.Lock()
		if !p.down || p.over {
			p.mu.Unlock()
			return true
		}
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// linkWriter writes to the current link; a frame stays on the link it
// began on (proto.FrameWriter), so that a reattach between its pieces
// never sends the rest of it to a worker that did not get its header,
// which would read a payload as frames.
type linkWriter struct{ p *linkProc }

// upLocked is the link frames go to: none while the link is down, the
// new one included until the session heard of it (onUp), which looks at
// what the worker had before any frame of the hub's reaches it.
func (p *linkProc) upLocked() io.Writer {
	if p.down {
		return nil
	}
	return p.w
}

func (w linkWriter) BeginFrame() {
	w.p.mu.Lock()
	w.p.pin, w.p.pinned = w.p.upLocked(), true
	w.p.mu.Unlock()
}

func (w linkWriter) EndFrame() {
	w.p.mu.Lock()
	w.p.pin, w.p.pinned = nil, false
	w.p.mu.Unlock()
}

func (w linkWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	dst := w.p.upLocked()
	if w.p.pinned {
		dst = w.p.pin
	}
	w.p.mu.Unlock()
	if dst == nil {
		return 0, errLinkDown
	}
	return dst.Write(b)
}

func (w linkWriter) Close() error { return nil }

// linkReader reads the current link; its end is the frame reader's cue to
// ask awaitLink.
type linkReader struct{ p *linkProc }

func (r linkReader) Read(b []byte) (int, error) {
	r.p.mu.Lock()
	src, end, once := r.p.r, r.p.linkEnd, r.p.endOnce
	stale := r.p.gen != r.p.readGen
	r.p.mu.Unlock()
	if src == nil || stale {
		// Down, or a new link the frame reader has not started on: what
		// it holds of the old one must go first (awaitLink, Reset).
		return 0, errLinkDown
	}
	n, err := src.Read(b)
	if err != nil && once != nil {
		once.Do(func() { close(end) })
	}
	return n, err
}

func (p *linkProc) Stdin() io.WriteCloser { return linkWriter{p} }
func (p *linkProc) Stdout() io.Reader     { return linkReader{p} }

// Stderr is the first link's output; later links carry it in out frames.
func (p *linkProc) Stderr() io.Reader { return p.first.Stderr() }
func (p *linkProc) Pid() int          { return 0 }

// sendPayload sends the payload that a sudo start held back.
func (p *linkProc) sendPayload() error { return p.first.SendPayload() }

func (p *linkProc) Wait() Exit {
	for {
		p.mu.Lock()
		if p.over {
			defer p.mu.Unlock()
			return p.exit
		}
		ch := p.changed
		p.mu.Unlock()
		<-ch
	}
}

// Kill ends the worker. It is sent exit (a worker that lingers would
// take a closed link for a dropped one), then its link is closed: on the
// first link as any remote worker's, with SIGKILL to its channel. While
// the link is down it cannot be told: it is told once the link is back
// (endWhenBack), or ends when its linger is over.
func (p *linkProc) Kill() error {
	p.stop()
	p.mu.Lock()
	p.killed = true
	sc, down := p.sc, p.down
	p.changedLocked()
	p.mu.Unlock()
	select {
	case p.kick <- struct{}{}:
	default:
	}
	if down {
		return nil
	}
	p.mu.Lock()
	ready := p.ready
	p.mu.Unlock()
	// Before its ready frame the worker is not reading frames yet: sudo
	// may be, and must never take one for a password.
	if ready && p.frames != nil {
		sent := make(chan struct{})
		go func() {
			p.frames.Write(&proto.Exit{})
			close(sent)
		}()
		select {
		case <-sent:
		case <-time.After(time.Second):
		}
	}
	if sc != nil {
		return sc.Close()
	}
	return p.first.Kill()
}

// Close releases the connections held.
func (p *linkProc) Close() error {
	p.first.Close()
	p.mu.Lock()
	conn, sc := p.conn, p.sc
	p.conn, p.sc = nil, nil
	p.mu.Unlock()
	if sc != nil {
		sc.Close()
	}
	if conn != nil {
		conn.Release()
	}
	return nil
}

// linkWait bounds how long an exec waits for a dropped link to come back
// before it says so.
const linkWait = 15 * time.Second

// awaitLink waits, within timeout and linkWait, for a remote session's
// dropped link; an error says the session is on hold.
func (s *Session) awaitLink(ctx context.Context, timeout time.Duration) error {
	s.mu.Lock()
	lp := s.lingering
	s.mu.Unlock()
	if lp == nil {
		return nil
	}
	down, at := lp.isDown()
	if !down {
		return nil
	}
	if lp.awaitUp(ctx, min(timeout, linkWait)) {
		return nil
	}
	return &wire.Error{Code: wire.CodeBusy, Message: fmt.Sprintf(
		"session '%s' is on hold: the link to %s dropped at %s and the hub is reconnecting (until %s, when the worker there gives up); its state is kept there: try again in a moment",
		s.name, lp.host, at.Format("15:04:05"), at.Add(lp.linger).Format("15:04:05"))}
}

// linkDown is a remote session's link dropping: what it served for
// another session ends (the worker drops it too).
func (s *Session) linkDown(at time.Time, why error) {
	s.hub.log.Warn("link dropped; reconnecting", "session", s.name, "err", why)
	s.mu.Lock()
	defer s.mu.Unlock()
	if op := s.serving; op != nil {
		op.gone()
	}
	s.cancelWaitsLocked() // its worker gave up on them (hub_gone)
}

// linkUp is a remote session's link back: a note for the next reply, and
// a cell whose exec frame the old link lost ends (it never ran). Frames go
// on the new link (markUp) once that look is made, and before an exec
// frame that waits for it (sendExec: a queued cell the look started).
func (s *Session) linkUp(ready *proto.Ready, down, up time.Time, markUp func() bool) {
	s.hub.log.Info("session reattached", "session", s.name, "down", up.Sub(down).Round(time.Millisecond), "cell", ready.Cell, "running", ready.Running)
	s.sendMu.Lock() // an exec frame under way ends first (sendExec)
	s.mu.Lock()
	s.notes = append(s.notes, fmt.Sprintf("the link to %s dropped at %s and came back at %s; the session was reattached with its names and cells",
		s.info.Host, down.Format("15:04:05"), up.Format("15:04:05")))
	// A session killed meanwhile ends as killed (markUp declines): its
	// cell is not called never reached, nor the next one started.
	lp, _ := s.proc.(*linkProc)
	killed := lp != nil && lp.isKilled()
	s.relinking = true // a cell ended here starts no queued one yet
	if r := s.cur; r != nil && !killed && !r.isFinished() && r.done == nil && ready.Cell < r.cell {
		s.abandonLocked(r, "LinkDropped", fmt.Sprintf(
			"cell %d never reached the session: the link dropped as it was sent, so it did not run; run it again", r.cell))
	}
	s.mu.Unlock()
	marked := markUp() // with sendMu still held: before a frame that waits for it
	s.mu.Lock()
	s.relinking = false
	if marked {
		s.nextLocked()
	} // else killed: the queue dies with the session, never run
	s.mu.Unlock()
	s.sendMu.Unlock()
}
