// Package client talks to the hub: it dials its socket (starting the hub
// when none answers), sends one request per call and reads the reply. The
// CLI, the MCP server and Go programs use it; it holds no session state of
// its own, so a client that restarts loses nothing.
package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/internal/rawio"
	"github.com/replhub/replhub/safesock"
	"github.com/replhub/replhub/sudo"
	"github.com/replhub/replhub/wire"
)

// Client is safe for concurrent use: each call in flight has a connection
// of its own, and idle connections are kept for the next call.
type Client struct {
	// Paths locate the hub; required.
	Paths config.Paths
	// AutoStart starts a hub when none answers. The zero value (false)
	// makes calls fail with an error wrapping safesock.ErrNoHub instead.
	AutoStart bool
	// Exe is the replhub binary that a started hub runs; empty means the
	// one $REPLHUB_HUB_EXE names in Env, else this process's own
	// executable.
	Exe string
	// Env is the environment a started hub gets; nil means os.Environ().
	Env []string
	// Surface is who reads the replies (wire.SurfaceCLI or
	// wire.SurfaceMCP); the hub words its advice for it. The zero value
	// is the CLI's.
	Surface string

	mu   sync.Mutex
	idle []*conn
}

type conn struct {
	c    net.Conn // read and written with rawio
	r    *bufio.Reader
	used bool // has carried a request before: the hub may have closed it since
	// spent says a cancel may have set the connection's deadline.
	spent bool
}

// New returns a client for the hub at paths that starts it when needed.
func New(paths config.Paths) *Client {
	return &Client{Paths: paths, AutoStart: true}
}

// Close closes idle connections.
func (c *Client) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range c.idle {
		k.c.Close()
	}
	c.idle = nil
}

func (c *Client) get(ctx context.Context) (*conn, error) {
	c.mu.Lock()
	if n := len(c.idle); n > 0 {
		k := c.idle[n-1]
		c.idle = c.idle[:n-1]
		c.mu.Unlock()
		return k, nil
	}
	c.mu.Unlock()
	uc, err := c.dial(ctx)
	if err != nil {
		return nil, err
	}
	hc := rawio.Trusted(uc)
	return &conn{c: hc, r: bufio.NewReaderSize(hc, 1<<16)}, nil
}

func (c *Client) put(k *conn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.idle) < 4 {
		c.idle = append(c.idle, k)
		return
	}
	k.c.Close()
}

func (c *Client) dial(ctx context.Context) (*net.UnixConn, error) {
	if err := safesock.CheckDir(c.Paths.Runtime); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("client: %w", err)
	}
	uc, err := safesock.Dial(ctx, c.Paths.Socket())
	if err == nil || !errors.Is(err, safesock.ErrNoHub) || !c.AutoStart {
		return uc, err
	}
	if err := c.startHub(ctx); err != nil {
		return nil, err
	}
	return safesock.Dial(ctx, c.Paths.Socket())
}

type idKey struct{}

// WithID returns a context whose requests name their client id (see
// wire.Request.Client): the hub takes all requests with one id for one
// client, and tells it of each death once.
func WithID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, idKey{}, id)
}

// ErrHubGone means the hub closed the connection before it replied.
var ErrHubGone = errors.New("client: the hub closed the connection before replying (did it stop or crash? see its log)")

// Do sends req and returns the final reply; progress replies before it go
// to onProgress when that is non-nil. A reply that carries an error is
// returned as a *wire.Error.
func (c *Client) Do(ctx context.Context, req wire.Request, onProgress func(*wire.Progress)) (*wire.Reply, error) {
	return c.do(ctx, req, onProgress, nil)
}

// do is Do with events (a streaming exec's output) going to onEvent.
func (c *Client) do(ctx context.Context, req wire.Request, onProgress func(*wire.Progress), onEvent func(*wire.Event)) (*wire.Reply, error) {
	req.V = wire.Version
	req.Progress = onProgress != nil
	req.Surface = c.Surface
	if id, ok := ctx.Value(idKey{}).(string); ok {
		req.Client = id
	}
	for attempt := 0; ; attempt++ {
		k, err := c.get(ctx)
		if err != nil {
			return nil, err
		}
		rep, reused, err := c.roundTrip(ctx, k, req, onProgress, onEvent)
		if err == nil {
			if k.spent {
				k.c.Close()
			} else {
				c.put(k)
			}
			if rep.Err != nil {
				return nil, rep.Err
			}
			return rep, nil
		}
		k.c.Close()
		// An idle connection the hub closed (it restarted) is retried once
		// on a fresh one, but only when nothing of the request was answered.
		if reused && errors.Is(err, ErrHubGone) && attempt == 0 && req.Op != wire.OpExec {
			continue
		}
		return nil, err
	}
}

func (c *Client) roundTrip(ctx context.Context, k *conn, req wire.Request, onProgress func(*wire.Progress), onEvent func(*wire.Event)) (*wire.Reply, bool, error) {
	reused := k.used
	k.used = true
	stop := context.AfterFunc(ctx, func() { k.c.SetDeadline(time.Unix(1, 0)) })
	// A cancel that came after the reply may have set the deadline
	// meanwhile: such a connection is not kept for the next request.
	defer func() { k.spent = !stop() }()
	if err := wire.WriteRequest(k.c, req); err != nil {
		if ctx.Err() != nil {
			return nil, reused, ctx.Err()
		}
		return nil, reused, ErrHubGone
	}
	for {
		line, err := wire.ReadLine(k.r, wire.MaxLine)
		if err != nil {
			if ctx.Err() != nil {
				return nil, reused, ctx.Err()
			}
			return nil, reused, ErrHubGone
		}
		rep, err := ParseReply(line)
		if err != nil {
			return nil, false, err
		}
		if rep.Progress != nil {
			if onProgress != nil {
				onProgress(rep.Progress)
			}
			continue
		}
		if rep.Event != nil {
			if onEvent != nil {
				onEvent(rep.Event)
			}
			continue
		}
		return rep, false, nil
	}
}

// ExecOptions are exec's optional parts.
type ExecOptions struct {
	// Timeout for the call; zero means the hub's default (30 s).
	Timeout time.Duration
	// NoWait returns as soon as the cell has started (status started):
	// WaitCell collects it.
	NoWait bool
	// InterruptIfGone ends the cell this exec starts if the call is
	// cancelled before its reply (wire.Request.InterruptIfGone); without
	// it, the cell runs on for WaitCell.
	InterruptIfGone bool
	// Queue puts the cell in the session's queue when it is busy, instead
	// of failing: the result (status queued) comes at once, with the
	// cell's number for WaitCell.
	Queue bool
	// Python for a new session; empty means $REPLHUB_PYTHON, else python3.
	Python string
	// Cwd and Env for a new session; empty means this process's own.
	Cwd string
	Env []string
	// Host, Jump and Pythons place a new session on a remote host (see
	// wire.Request).
	Host    string
	Jump    *[]string
	Pythons []string
	// Hosts runs the cell in session NAME@HOST on every host of this
	// node-set expression at once (see wire.Request); Fanout bounds how
	// many connect at once (zero: config.json's, else 16). The Result
	// then has one HostResult per host in Fan.
	Hosts  string
	Fanout int
	// Sudo runs a new session as root. When sudo wants a password, the
	// program named by $SUDO_ASKPASS in Env runs here and the password goes
	// to the hub; it is asked once, never retried.
	Sudo bool
	// OnProgress, when non-nil, is called about once a second while the
	// cell runs.
	OnProgress func(*wire.Progress)
	// MaxOutput caps the reply's output characters (see wire.Request);
	// zero means the hub's default.
	MaxOutput int
	// Private runs the cell in a session of its own that ends with the
	// call (see wire.Request); Transcript keeps its transcript.
	Private, Transcript bool
	// OnOutput, when non-nil, gets the cell's output as it is written; the
	// result then carries only the output OnOutput did not get.
	OnOutput func(string)
}

// Exec runs code in session name, creating it on first use.
func (c *Client) Exec(ctx context.Context, name, code string, o ExecOptions) (*wire.Result, error) {
	req := wire.Request{Op: wire.OpExec, Name: name, Code: code, Timeout: o.Timeout.Seconds(), Python: o.Python,
		Host: o.Host, Jump: o.Jump, Pythons: o.Pythons, Sudo: o.Sudo, NoWait: o.NoWait, Queue: o.Queue,
		MaxOutput: o.MaxOutput, Private: o.Private, Transcript: o.Transcript,
		Hosts: o.Hosts, Fanout: o.Fanout, Stream: o.OnOutput != nil, InterruptIfGone: o.InterruptIfGone}
	var onEvent func(*wire.Event)
	if o.OnOutput != nil {
		onEvent = func(ev *wire.Event) {
			if ev.Kind == wire.EventOut {
				o.OnOutput(ev.Text)
			}
		}
	}
	// The cwd and environment go only where the hub must create the
	// session and asks for them (CodeNeedEnv): a warm exec spares their
	// JSON and this process the stat calls of os.Getwd. A run's session
	// is always new: they go at once.
	withOrigin := func() {
		o.fillOrigin()
		req.Cwd, req.Env = o.Cwd, o.Env
	}
	if o.Private {
		withOrigin()
	}
	rep, err := c.do(ctx, req, o.OnProgress, onEvent)
	if wire.IsCode(err, wire.CodeNeedEnv) {
		withOrigin()
		rep, err = c.do(ctx, req, o.OnProgress, onEvent)
	}
	var we *wire.Error
	if errors.As(err, &we) && we.Code == wire.CodeNeedPassword {
		withOrigin()
		pw, aerr := sudo.Ask(ctx, config.Getenv(o.Env, "SUDO_ASKPASS"), we.Prompt, o.Env)
		if aerr != nil {
			return nil, fmt.Errorf("%s: %w", we.Message, aerr)
		}
		req.Password = pw
		rep, err = c.do(ctx, req, o.OnProgress, onEvent)
		sudo.Zero(pw)
	}
	if err != nil {
		return nil, err
	}
	return rep.Result, nil
}

// fillOrigin gives o this process's cwd and environment where it has
// none of its own.
func (o *ExecOptions) fillOrigin() {
	if o.Cwd == "" {
		o.Cwd, _ = os.Getwd()
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
}

// Wait collects the running or unread cell of session name.
func (c *Client) Wait(ctx context.Context, name string, timeout time.Duration, onProgress func(*wire.Progress)) (*wire.Result, error) {
	return c.WaitCell(ctx, name, 0, timeout, 0, onProgress)
}

// WaitCell is Wait for cell n of session name only (0: whichever), its
// reply's output capped at maxOutput characters (0: the hub's default).
func (c *Client) WaitCell(ctx context.Context, name string, n int, timeout time.Duration, maxOutput int, onProgress func(*wire.Progress)) (*wire.Result, error) {
	rep, err := c.Do(ctx, wire.Request{Op: wire.OpWait, Name: name, Timeout: timeout.Seconds(), Cell: n, MaxOutput: maxOutput}, onProgress)
	if err != nil {
		return nil, err
	}
	return rep.Result, nil
}

// Interrupt raises KeyboardInterrupt in session name's running cell.
func (c *Client) Interrupt(ctx context.Context, name string) (string, error) {
	return c.message(ctx, wire.Request{Op: wire.OpInterrupt, Name: name})
}

// InterruptCell aims an interrupt at cell n of session name: a queued
// cell is taken out of the queue, the running one interrupted, and a cell
// that has finished is left alone (the message says so).
func (c *Client) InterruptCell(ctx context.Context, name string, n int) (string, error) {
	return c.message(ctx, wire.Request{Op: wire.OpInterrupt, Name: name, Cell: n})
}

// Kill ends session name and frees its name.
func (c *Client) Kill(ctx context.Context, name string) (string, error) {
	return c.message(ctx, wire.Request{Op: wire.OpKill, Name: name})
}

// Sessions lists the sessions and describes the hub.
func (c *Client) Sessions(ctx context.Context) (*wire.SessionList, error) {
	return c.sessions(ctx, false)
}

// SessionNames lists the sessions as Sessions does, but for what takes the
// hub time to measure (their memory): enough to complete a name.
func (c *Client) SessionNames(ctx context.Context) (*wire.SessionList, error) {
	return c.sessions(ctx, true)
}

func (c *Client) sessions(ctx context.Context, brief bool) (*wire.SessionList, error) {
	rep, err := c.Do(ctx, wire.Request{Op: wire.OpSessions, Brief: brief}, nil)
	if err != nil {
		return nil, err
	}
	return rep.Sessions, nil
}

// Connect dials the hub (starting it when needed) and keeps the
// connection for the next call, so that a caller can do other work while
// it dials.
func (c *Client) Connect(ctx context.Context) error {
	k, err := c.get(ctx)
	if err != nil {
		return err
	}
	c.put(k)
	return nil
}

// Ping checks that a hub answers (starting one when AutoStart is set).
func (c *Client) Ping(ctx context.Context) error {
	_, err := c.Do(ctx, wire.Request{Op: wire.OpPing}, nil)
	return err
}

// Stop asks the hub to end its sessions and exit, and waits until its
// socket is gone. It returns nil when no hub was running.
func (c *Client) Stop(ctx context.Context) (string, error) {
	saved := c.AutoStart
	c.AutoStart = false
	defer func() { c.AutoStart = saved }()
	msg, err := c.message(ctx, wire.Request{Op: wire.OpStop})
	if errors.Is(err, safesock.ErrNoHub) {
		return "no hub was running", nil
	}
	if err != nil {
		return "", err
	}
	c.Close()
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(c.Paths.Socket()); errors.Is(err, os.ErrNotExist) {
			return msg, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return "", errors.New("client: the hub did not stop within 5s; see its log")
}

// Restart replaces the hub with the binary on disk: the old hub hands its
// local sessions over and exits, a new one starts and adopts them. It
// returns what happened, in one line.
func (c *Client) Restart(ctx context.Context) (string, error) {
	saved := c.AutoStart
	c.AutoStart = false
	l, err := c.Sessions(ctx)
	if errors.Is(err, safesock.ErrNoHub) {
		c.AutoStart = saved
		if err := c.Ping(ctx); err != nil {
			return "", err
		}
		return "no hub was running; started one", nil
	}
	if err == nil {
		_, err = c.message(ctx, wire.Request{Op: wire.OpRestart})
	}
	c.AutoStart = saved
	if err != nil {
		return "", err
	}
	c.Close()
	old := l.Hub.Pid
	gone := syscall.Kill(old, 0) != nil
	for i := 0; i < 1000 && !gone; i++ {
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
		gone = syscall.Kill(old, 0) != nil
	}
	if !gone {
		return "", fmt.Errorf("client: the hub (pid %d) did not exit within 10s of the restart request; see its log", old)
	}
	nl, err := c.Sessions(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("hub restarted: pid %d -> %d; %d of %d sessions live", old, nl.Hub.Pid, len(liveOnly(nl)), len(liveOnly(l))), nil
}

// liveOnly lists the sessions of l that are not dead.
func liveOnly(l *wire.SessionList) []wire.SessionInfo {
	var out []wire.SessionInfo
	for _, s := range l.Sessions {
		if s.State != "dead" {
			out = append(out, s)
		}
	}
	return out
}

func (c *Client) message(ctx context.Context, req wire.Request) (string, error) {
	rep, err := c.Do(ctx, req, nil)
	if err != nil {
		return "", err
	}
	return rep.Message, nil
}
