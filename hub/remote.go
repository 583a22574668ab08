package hub

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"strings"
	"sync"
	"time"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/payload"
	"github.com/replhub/replhub/remote"
	"github.com/replhub/replhub/wire"
)

// host is where the session runs: "local" or the host as the user gave it.
func (s *Session) host() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.info.Host
}

// checkTie refuses to start a session under a name whose last session
// died on its own somewhere else: the user must say the same place again,
// or kill the name, rather than get a quiet local session.
func (h *Hub) checkTie(req wire.Request) error {
	n := h.readDeathNote(req.Name)
	if n == nil {
		return nil
	}
	want := req.Host
	if want == "" {
		want = "local"
	}
	was := n.Host
	if was == "" {
		was = "local"
	}
	if was == want {
		return nil
	}
	hint := fmt.Sprintf("`replhub exec %s CODE --host %s` starts it there again", req.Name, was)
	if was == "local" {
		hint = fmt.Sprintf("`replhub exec %s CODE` without --host starts it here again", req.Name)
	}
	return &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf(
		"%s\nsession '%s' ran on %s, not %s: %s, or `replhub kill %s` frees the name",
		n.text(), req.Name, was, want, hint, req.Name)}
}

// startRemote starts s on req.Host over the route's shared ssh connection.
func (h *Hub) startRemote(ctx context.Context, s *Session, req wire.Request) error {
	s.mu.Lock()
	s.info.Host = req.Host
	s.mu.Unlock()
	return s.start(ctx, func() (Proc, error) {
		cfg, err := config.Load(h.paths.ConfigFile())
		if err != nil {
			return nil, err
		}
		settings := cfg.For(req.Host)
		jumps := settings.Jump
		if req.Jump != nil {
			jumps = req.Jump
		}
		home := envGet(req.Env, "HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		local := envGet(req.Env, "USER")
		if local == "" {
			if u, err := user.Current(); err == nil {
				local = u.Username
			}
		}
		res, err := remote.NewResolver(home, local)
		if err != nil {
			return nil, err
		}
		route, err := res.Resolve(req.Host, jumps)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.info.Route = route.String()
		s.mu.Unlock()
		conn, err := h.pool.Get(ctx, route, remote.Env{Home: home, AgentSocket: envGet(req.Env, "SSH_AUTH_SOCK")})
		if err != nil {
			return nil, err
		}
		pl, err := payload.Default()
		if err != nil {
			conn.Release()
			return nil, err
		}
		w, err := conn.StartWorker(ctx, remote.StartSpec{
			Pythons: append(append([]string(nil), req.Pythons...), settings.Pythons...),
			Python:  req.Python,
			Prefer:  h.localMinor(req),
			Payload: pl,
		})
		if err != nil {
			conn.Release()
			return nil, err
		}
		return &remoteProc{w: w}, nil
	}, h.startTimeout)
}

// remoteProc adapts a remote.Worker to Proc.
type remoteProc struct {
	w *remote.Worker
}

func (p *remoteProc) Stdin() io.WriteCloser { return p.w.Stdin() }
func (p *remoteProc) Stdout() io.Reader     { return p.w.Stdout() }
func (p *remoteProc) Stderr() io.Reader     { return p.w.Stderr() }
func (p *remoteProc) Pid() int              { return 0 }
func (p *remoteProc) Kill() error           { return p.w.Kill() }
func (p *remoteProc) Close() error          { return p.w.Close() }

func (p *remoteProc) Wait() Exit {
	code, sig, err := p.w.Wait()
	return Exit{Code: code, Signal: sig, Err: err}
}

var (
	minorMu    sync.Mutex
	minorCache = map[string]string{}
)

// localMinor is the major.minor a local session of this caller would run,
// which a remote start prefers; "" when it cannot be told.
func (h *Hub) localMinor(req wire.Request) string {
	local := req
	local.Python = ""
	py, err := choosePython(local)
	if err != nil {
		return ""
	}
	minorMu.Lock()
	defer minorMu.Unlock()
	if v, ok := minorCache[py]; ok {
		return v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c", `import sys; print("%d.%d" % sys.version_info[:2])`).Output()
	v := ""
	if err == nil {
		v = strings.TrimSpace(string(out))
	}
	minorCache[py] = v
	return v
}
