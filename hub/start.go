package hub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"strconv"
	"time"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/payload"
	"github.com/replhub/replhub/remote"
	"github.com/replhub/replhub/sudo"
	"github.com/replhub/replhub/wire"
)

// needPassword is returned by startSession when sudo wants a password that
// the request did not carry.
type needPassword struct{ prompt string }

func (e *needPassword) Error() string { return "sudo wants a password" }

// isRoot reports whether the session runs as root.
func (s *Session) isRoot() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info.Root
}

// startSession starts s where req says: here or on req.Host, as the user or
// as root. config.json is read anew for every start but a group's, which
// reads it once for all its hosts (withConfig).
func (h *Hub) startSession(ctx context.Context, s *Session, req wire.Request) error {
	cfg, err := h.loadConfig(ctx)
	if err != nil {
		closeFailed(s)
		return err
	}
	settings := cfg.Top()
	if req.Host != "" {
		settings = cfg.For(req.Host)
	}
	s.mu.Lock()
	s.info.Host = "local"
	if req.Host != "" {
		s.info.Host = req.Host
	}
	s.info.Root = req.Sudo
	s.mu.Unlock()

	o := startOpts{timeout: h.startTimeout, maxBlob: cfg.MaxObject()}
	var prompt string
	withPassword := false
	if req.Sudo {
		mode := sudo.Mode(settings.Sudo)
		withPassword = req.Password != nil && mode != sudo.NoPasswd
		if mode == sudo.AskPass && !withPassword {
			closeFailed(s)
			return &needPassword{h.promptFor(req)}
		}
		if withPassword {
			prompt = sudo.NewPrompt()
		}
		o.watch = sudo.NewWatcher(prompt)
		o.timeout = sudo.DefaultTimeout
		if cfg.SudoTimeout > 0 {
			o.timeout = time.Duration(cfg.SudoTimeout * float64(time.Second))
		}
	}
	// Each holder zeroes its own copy of the password.
	if req.Host == "" {
		if withPassword {
			o.password = sudo.Line(req.Password)
		}
		o.launch = func() (Proc, error) { return h.launchLocal(req, withPassword, prompt) }
		return s.start(ctx, o)
	}
	var rp remoteStarter
	o.launch = func() (Proc, error) {
		var pw []byte
		if withPassword {
			pw = append([]byte(nil), req.Password...)
		}
		p, err := h.launchRemote(ctx, s, req, settings, withPassword, prompt, pw)
		if err != nil {
			return nil, err
		}
		rp = p
		return p, nil
	}
	if req.Sudo {
		o.onStub = func() error { return rp.sendPayload() }
	}
	return s.start(ctx, o)
}

func closeFailed(s *Session) {
	close(s.ready)
	s.markStartFailed()
}

// launchLocal starts python worker.py in the caller's cwd and environment,
// under sudo for a root session.
func (h *Hub) launchLocal(req wire.Request, withPassword bool, prompt string) (Proc, error) {
	python, err := choosePython(req)
	if err != nil {
		return nil, err
	}
	env := req.Env
	if len(python.Env) > 0 {
		env = append(append([]string(nil), req.Env...), python.Env...)
	}
	dir := req.Cwd
	if dir == "" {
		dir = "/"
	}
	sock := h.workerSocket()
	argv := []string{python.Path, "-c", workerLauncher(h.workerPath), "--stdio", "--durable", sock}
	if d := payload.CloudpickleDir(); d != "" {
		argv = append(argv, "--cloudpickle", d)
	}
	if noToolkit(req) {
		argv = append(argv, "--no-tk")
	}
	// A worker under sudo keeps fds 0 to 2 only: its exec frames come on
	// stdin with the rest.
	if !req.Sudo {
		argv = append(argv, "--cells", "3")
	}
	root := false
	if req.Sudo {
		name := config.Getenv(req.Env, "REPLHUB_SUDO")
		if name == "" {
			name = "sudo"
		}
		bin, err := lookPath(name, config.Getenv(req.Env, "PATH"), req.Cwd)
		if err != nil {
			return nil, fmt.Errorf("sudo: %s not found on your PATH", name)
		}
		argv = append(sudo.Args(bin, withPassword, prompt), argv...)
		root = true
	}
	p, err := startLocal(argv, dir, env, !req.Sudo, !h.plainStreams)
	if err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", argv[0], err)
	}
	p.root = root
	p.sock = sock
	return p, nil
}

// routeFor resolves req.Host through the caller's ssh_config (its $HOME
// and $USER) and the jump hosts of req or settings.
func routeFor(req wire.Request, settings config.Settings) (remote.Route, remote.Env, error) {
	jumps := settings.Jump
	if req.Jump != nil {
		jumps = req.Jump
	}
	home := config.Getenv(req.Env, "HOME")
	if home == "" {
		home, _ = os.UserHomeDir()
	}
	local := config.Getenv(req.Env, "USER")
	if local == "" {
		if u, err := user.Current(); err == nil {
			local = u.Username
		}
	}
	env := remote.Env{Home: home, AgentSocket: config.Getenv(req.Env, "SSH_AUTH_SOCK")}
	res, err := remote.NewResolver(home, local)
	if err != nil {
		return remote.Route{}, env, err
	}
	route, err := res.Resolve(req.Host, jumps)
	return route, env, err
}

// workerLauncher is the -c program that runs worker.py as a module: Python
// caches a module's bytecode (beside it, in the hub's own folder, whatever
// the caller's PYTHONDONTWRITEBYTECODE says), never a script's, and
// compiling the worker anew costs every start about 12 ms. It loads it
// through importlib.machinery, not importlib.util, which costs a start 3
// to 4 ms on some Pythons (3.11: contextlib and more).
func workerLauncher(path string) string {
	return fmt.Sprintf("import sys; from importlib.machinery import SourceFileLoader as L; p = %s; "+
		"l = L('replhub_worker', p); m = type(sys)('replhub_worker'); m.__file__, m.__loader__ = p, l; "+
		"sys.modules['replhub_worker'] = m; b = sys.dont_write_bytecode; sys.dont_write_bytecode = False; "+
		"l.exec_module(m); sys.dont_write_bytecode = b; del b, l, p, L; m.main(sys.argv)",
		strconv.Quote(path))
}

// remoteStarter is a remote Proc whose payload a sudo start holds back.
type remoteStarter interface {
	Proc
	sendPayload() error
}

// launchRemote starts a worker on req.Host over the route's shared ssh
// connection; one that lingers after its link drops (settings' linger)
// is a linkProc.
func (h *Hub) launchRemote(ctx context.Context, s *Session, req wire.Request, settings config.Settings, withPassword bool, prompt string, password []byte) (remoteStarter, error) {
	defer sudo.Zero(password)
	route, env, err := routeFor(req, settings)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.info.Route = route.String()
	s.mu.Unlock()
	linger := settings.LingerFor()
	argv := []string{"--stdio"}
	if linger > 0 {
		argv = append(argv, "--linger", strconv.FormatFloat(linger.Seconds(), 'f', -1, 64))
	}
	if noToolkit(req) {
		argv = append(argv, "--no-tk")
	}
	// The payload and the local minor are made while the connection is:
	// each can cost a first start tens of milliseconds.
	type built struct {
		pl  []byte
		err error
	}
	pch, minor := make(chan built, 1), make(chan string, 1)
	go func() {
		pl, err := payload.Build(nil, argv...)
		pch <- built{pl, err}
	}()
	if req.Python == "" {
		go func() { minor <- h.localMinor(req) }()
	} else {
		minor <- ""
	}
	release, err := dialSlot(ctx)
	if err != nil {
		return nil, err
	}
	conn, err := h.pool.Get(ctx, route, env)
	release()
	if err != nil {
		return nil, err
	}
	b := <-pch
	if b.err != nil {
		conn.Release()
		return nil, b.err
	}
	pl := b.pl
	spec := remote.StartSpec{
		Pythons: append(append([]string(nil), req.Pythons...), settings.Pythons...),
		Python:  req.Python,
		Prefer:  <-minor,
		Payload: pl,
	}
	if req.Sudo {
		spec.Sudo = remote.SudoTry
		if withPassword {
			spec.Sudo, spec.Prompt, spec.Password = remote.SudoPassword, prompt, password
		}
	}
	w, err := conn.StartWorker(ctx, spec)
	if err != nil {
		conn.Release()
		return nil, err
	}
	if spec.Prefer != "" && w.Version != spec.Prefer && w.Version != "pinned" {
		s.mu.Lock()
		s.notes = append(s.notes, fmt.Sprintf("%s has no python %s (this machine's); the session runs python %s", req.Host, spec.Prefer, w.Version))
		s.mu.Unlock()
	}
	if linger == 0 {
		return &remoteProc{w: w}, nil
	}
	lp := newLinkProc(w, req.Host, linger)
	lp.redial = func(ctx context.Context) (*remote.Conn, error) {
		h.mu.Lock()
		closing := h.closing
		h.mu.Unlock()
		if closing {
			return nil, errHubStopping
		}
		return h.pool.Get(ctx, route, env)
	}
	lp.onDown, lp.onUp, lp.onCellsLost = s.linkDown, s.linkUp, s.cellsLost
	lp.logf = func(msg string, args ...any) { h.log.Info(msg, append([]any{"session", s.name}, args...)...) }
	lp.start()
	return lp, nil
}

// noToolkit says whether the caller asked for sessions without the
// toolkit (REPLHUB_NO_TK=1 in its environment).
func noToolkit(req wire.Request) bool {
	v := config.Getenv(req.Env, "REPLHUB_NO_TK")
	return v != "" && v != "0"
}

// promptFor is what the askpass program shows.
func (h *Hub) promptFor(req wire.Request) string {
	who := config.Getenv(req.Env, "USER")
	if who == "" {
		if u, err := user.Current(); err == nil {
			who = u.Username
		}
	}
	where := "this machine"
	if req.Host != "" {
		where = req.Host
	}
	return fmt.Sprintf("[sudo] password for %s on %s (replhub root session '%s'): ", who, where, req.Name)
}

// startFailure turns a failed start into the reply: a request for a
// password, or one clear error with what came before (an earlier death,
// ssh_config warnings).
func (h *Hub) startFailure(req wire.Request, err error) error {
	var np *needPassword
	if errors.As(err, &np) {
		return &wire.Error{Code: wire.CodeNeedPassword, Prompt: np.prompt,
			Message: fmt.Sprintf("root session '%s' needs sudo's password", req.Name)}
	}
	var we *wire.Error
	if errors.As(err, &we) {
		return we
	}
	if sudo.IsKind(err, sudo.KindPasswordRequired) && req.Password == nil {
		cfg, _ := config.Load(h.paths.ConfigFile())
		mode := sudo.Auto
		if cfg != nil {
			settings := cfg.Top()
			if req.Host != "" {
				settings = cfg.For(req.Host)
			}
			mode = sudo.Mode(settings.Sudo)
		}
		if mode == sudo.NoPasswd {
			where := "this machine"
			if req.Host != "" {
				where = req.Host
			}
			return &wire.Error{Code: wire.CodeStart, Message: fmt.Sprintf(
				"session '%s' did not start: sudo wants a password on %s, and the sudo mode there is nopasswd: allow NOPASSWD in sudoers, or set \"sudo\": \"auto\" in config.json", req.Name, where)}
		}
		return &wire.Error{Code: wire.CodeNeedPassword, Prompt: h.promptFor(req),
			Message: fmt.Sprintf("root session '%s' needs sudo's password", req.Name)}
	}
	msg := err.Error()
	if previous := h.peekDeathNote(req.Name); previous != "" {
		msg = previous + "\n" + msg
	}
	for _, w := range h.takeWarnings() {
		msg = "warning: " + w + "\n" + msg
	}
	return &wire.Error{Code: wire.CodeStart, Message: msg}
}
