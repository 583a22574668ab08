package hub

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/replhub/replhub/internal/procstat"
	"github.com/replhub/replhub/internal/rawio"
	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/sudo"
)

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
		lp.frames, lp.cw = s.w, &s.cw
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
		if cause == nil && errors.Is(err, context.Canceled) {
			cause = err // the call that started it went away (startGone)
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

// takeCellLink opens the cell link (dialCells) of a local worker on
// s.sock, whose ready frame gave token, and keeps it in l for the
// worker's end to close: a worker under sudo, which passes it no cell
// pipe, at its start, before its first cell; a worker a new hub adopted
// (adopt). Its exec frames then wake the thread that runs them. Without
// it they go with the rest.
func (s *Session) takeCellLink(l *heldLink, root bool, token string) {
	conn, err := dialCells(s.sock, root, token, s.hub.plainStreams)
	if err != nil {
		s.hub.log.Warn("no cell link: exec frames go with the rest", "session", s.name, "err", err)
		return
	}
	if l.set(conn) {
		s.cw.Store(proto.NewWriter(rawio.Unix(conn))) // refuses descriptors from its dial on
	}
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
		if lp, ok := s.proc.(*localProc); ok && lp.cells != nil {
			if f.Cells {
				s.cw.Store(proto.NewWriter(lp.cells))
			} else {
				lp.cells.Close() // a worker that does not know of it
			}
		}
		if lp, ok := s.proc.(*linkProc); ok {
			s.lingering = lp
			lp.setSocket(f.Sock, f.SockAlt)
			if f.LingerError != "" {
				s.notes = append(s.notes, "this session ends if its link drops: "+f.LingerError)
			}
		}
		s.mu.Unlock()
		if lp, ok := s.proc.(*localProc); ok && f.CellsToken != "" && s.sock != "" {
			s.takeCellLink(&lp.link, lp.root, f.CellsToken)
		}
		if lp, ok := s.proc.(*linkProc); ok && f.CellsToken != "" {
			// After the ready frame, beside the first cell: a channel's
			// open is a round trip on the link.
			go lp.takeCells(f.CellsToken, 0)
		}
		return nil
	}
	return errors.New("too much noise before the ready frame")
}
