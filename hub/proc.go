package hub

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/replhub/replhub/internal/rawio"
)

// A Proc is a running worker: a local child process here; later a root
// child under sudo, or a channel on an ssh connection. The hub writes frames
// to Stdin, reads frames from Stdout and the session's output from Stderr.
type Proc interface {
	Stdin() io.WriteCloser
	Stdout() io.Reader
	Stderr() io.Reader
	// Pid is the worker's pid as the worker's host sees it (0 until known).
	Pid() int
	// Wait blocks until the worker has exited and says how.
	Wait() Exit
	// Kill ends the worker and everything it started in its process group.
	Kill() error
	// Close releases the hub's ends of the worker's streams, after Wait.
	Close() error
}

// Exit says how a worker ended.
type Exit struct {
	Code   int    // exit status, -1 when killed by a signal
	Signal string // e.g. "SIGSEGV", empty when it exited
	Err    error  // a failure to wait, or a lost link
}

func (e Exit) String() string {
	switch {
	case e.Err != nil:
		return e.Err.Error()
	case e.Signal != "":
		return "killed by signal " + e.Signal
	default:
		return fmt.Sprintf("exited with status %d", e.Code)
	}
}

// localProc is a worker started on this machine, in its own process group,
// with its three fds on pipes the hub owns (its stdout, with a cell pipe,
// on a socket: see startLocal).
type localProc struct {
	cmd    *exec.Cmd
	stdin  *os.File
	stdout io.ReadCloser
	stderr *os.File
	// root is set for a worker under sudo: the hub may signal sudo (its
	// real uid is ours) but not the root worker.
	root bool
	// sock is the durable worker's socket, where a later hub adopts it.
	sock string
	// cells, when set, is the pipe (or socket pair: startLocal) of the
	// worker's exec frames (its fd 3, see Session.send); its stdin has
	// the other frames.
	cells io.WriteCloser
	// link is the cell link that takes the place of cells for a worker
	// without it (Session.takeCellLink).
	link heldLink
}

// startLocal starts argv[0] with argv[1:] in dir with env; with cells, a
// fourth pipe is its fd 3 (localProc.cells).
//
// With cells, the two streams of a round trip (the exec frames, and the
// worker's stdout, which brings its done frames) are Unix socket pairs
// instead, where the hub's ends can refuse descriptors (socketPair):
// the hub reads and writes them with raw calls, which do not wake the Go
// runtime's monitor thread at each cell. sockets false keeps them pipes.
func startLocal(argv []string, dir string, env []string, cells, sockets bool) (*localProc, error) {
	var files []*os.File
	var conns []io.Closer
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
		for _, c := range conns {
			c.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return
	}
	inR, inW, err := pipe()
	if err != nil {
		return nil, err
	}
	var stdout io.ReadCloser
	var cellW io.WriteCloser
	var outW, cellR *os.File
	if cells && sockets {
		if hub, worker, ok := socketPair(0); ok {
			conns, files = append(conns, hub), append(files, worker)
			stdout, outW = rawio.Unix(hub), worker
			if hub, worker, ok = socketPair(cellSendBuffer); ok {
				conns, files = append(conns, hub), append(files, worker)
				cellW, cellR = rawio.Unix(hub), worker
			}
		}
	}
	if stdout == nil {
		var outR *os.File
		if outR, outW, err = pipe(); err != nil {
			closeAll()
			return nil, err
		}
		stdout = outR
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	if cells && cellW == nil {
		var w *os.File
		if cellR, w, err = pipe(); err != nil {
			closeAll()
			return nil, err
		}
		cellW = w
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if cells {
		cmd.ExtraFiles = []*os.File{cellR}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, err
	}
	inR.Close()
	outW.Close()
	errW.Close()
	if cells {
		cellR.Close()
	}
	return &localProc{cmd: cmd, stdin: inW, stdout: stdout, stderr: errR, cells: cellW}, nil
}

// cellSendBuffer is the send buffer of the hub's end of a cell socket or
// link: at least what a pipe holds, since a cell's frame up to
// asyncExecAt is written in the exec's call; a socket's default,
// net.core.wmem_default, may be set lower.
const cellSendBuffer = 256 << 10

// socketPair is a Unix socket pair for one of a worker's streams: the
// hub's end, which refuses descriptors, so that raw calls may read and
// write it (rawio.Unix), and the worker's, a blocking file for its fd. ok is
// false, nothing left open, where the kernel cannot refuse descriptors
// (before Linux 6.16): the caller takes a pipe, whose raw calls a worker
// could make sleep. sndbuf, when not 0, is the hub's end's send buffer.
func socketPair(sndbuf int) (hub *net.UnixConn, worker *os.File, ok bool) {
	syscall.ForkLock.RLock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fds[0])
		syscall.CloseOnExec(fds[1])
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		return nil, nil, false
	}
	if sndbuf != 0 {
		syscall.SetsockoptInt(fds[0], syscall.SOL_SOCKET, syscall.SO_SNDBUF, sndbuf)
	}
	hf := os.NewFile(uintptr(fds[0]), "worker socket")
	worker = os.NewFile(uintptr(fds[1]), "worker socket")
	defer hf.Close() // FileConn keeps a copy
	if rawio.RefuseRights(hf) == nil {
		if c, err := net.FileConn(hf); err == nil {
			if hub, ok = c.(*net.UnixConn); ok {
				return hub, worker, true
			}
			c.Close()
		}
	}
	worker.Close()
	return nil, nil, false
}

// heldLink is a cell link (dialCells) that a Proc keeps for its end to
// close: one that comes after the end is closed at once.
type heldLink struct {
	conn  atomic.Pointer[net.UnixConn]
	ended atomic.Bool
}

// set keeps c; false, c closed, when close has run already.
func (l *heldLink) set(c *net.UnixConn) bool {
	l.conn.Store(c)
	if l.ended.Load() {
		l.close()
		return false
	}
	return true
}

func (l *heldLink) close() {
	l.ended.Store(true)
	if c := l.conn.Swap(nil); c != nil {
		c.Close()
	}
}

func (p *localProc) Stdin() io.WriteCloser { return p.stdin }
func (p *localProc) Stdout() io.Reader     { return p.stdout }
func (p *localProc) Stderr() io.Reader     { return p.stderr }
func (p *localProc) Pid() int              { return p.cmd.Process.Pid }

func (p *localProc) Wait() Exit {
	awaitExit(p.cmd.Process.Pid)
	err := p.cmd.Wait()
	p.stdin.Close()
	if p.cells != nil {
		p.cells.Close()
	}
	p.link.close()
	var ee *exec.ExitError
	if err == nil {
		return Exit{Code: 0}
	}
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return Exit{Code: -1, Signal: signalName(ws.Signal())}
		}
		return Exit{Code: ee.ExitCode()}
	}
	return Exit{Code: -1, Err: err}
}

// Kill sends SIGKILL to the worker's process group, so that children it
// started (a subprocess, a background job) end with it. A root worker
// cannot be signalled by the hub: its stdin is closed (the worker exits at
// EOF) and sudo is sent SIGTERM, which it relays, then SIGKILL.
func (p *localProc) Kill() error {
	pid := p.cmd.Process.Pid
	if p.root {
		p.stdin.Close()
		syscall.Kill(pid, syscall.SIGTERM)
		go func() {
			time.Sleep(3 * time.Second)
			syscall.Kill(pid, syscall.SIGKILL)
		}()
		return nil
	}
	err := syscall.Kill(-pid, syscall.SIGKILL)
	if err != nil {
		err = p.cmd.Process.Kill()
	}
	return err
}

func (p *localProc) Close() error {
	p.stdout.Close()
	return p.stderr.Close()
}

func signalName(s syscall.Signal) string {
	names := map[syscall.Signal]string{
		syscall.SIGKILL: "SIGKILL", syscall.SIGSEGV: "SIGSEGV", syscall.SIGABRT: "SIGABRT",
		syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT", syscall.SIGBUS: "SIGBUS",
		syscall.SIGFPE: "SIGFPE", syscall.SIGILL: "SIGILL", syscall.SIGHUP: "SIGHUP",
		syscall.SIGPIPE: "SIGPIPE", syscall.SIGQUIT: "SIGQUIT",
	}
	if n, ok := names[s]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(s))
}
