package hub

import (
	"context"
	"fmt"
	"time"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/internal/lazyre"
	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/remote"
	"github.com/replhub/replhub/wire"
)

// The toolkit's sh(cmd, host="h") runs a command on host h, outside any
// session, over the connection a session there would use: the hub resolves
// the route as for a session of from's creator (its ssh_config, agent and
// jump hosts), opens the connection if none is open, and runs the command
// on a channel of it. Reach rules apply as for opening a session there.

// shMaxTimeout bounds a command's run; its default is the toolkit's.
const shMaxTimeout = 24 * time.Hour

var validEnvName = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]{0,254}$`)

// runSh answers an sh request into reply.
func (h *Hub) runSh(ctx context.Context, from *Session, f *proto.Req, reply *proto.Reply) {
	if f.Host == "" || len(f.Argv) == 0 {
		reply.Error = "sh: a host and a command are needed"
		return
	}
	for k := range f.Env {
		if !validEnvName.MatchString(k) {
			reply.Error = fmt.Sprintf("sh: %q is not an environment variable's name", k)
			return
		}
	}
	timeout := time.Duration(f.Timeout * float64(time.Second))
	if timeout <= 0 || timeout > shMaxTimeout {
		timeout = shMaxTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	from.mu.Lock()
	origin := from.origin
	from.mu.Unlock()
	req := wire.Request{Host: f.Host, Env: origin.Env, Jump: origin.Jump}
	cfg, err := config.Load(h.paths.ConfigFile())
	if err != nil {
		reply.Error = err.Error()
		return
	}
	route, env, err := routeFor(req, cfg.For(f.Host))
	if err != nil {
		reply.Error = err.Error()
		return
	}
	conn, err := h.pool.Get(ctx, route, env)
	if err != nil {
		reply.Error = err.Error()
		return
	}
	defer conn.Release()
	res, err := conn.Run(ctx, remote.RunSpec{Argv: f.Argv, Dir: f.Cwd, Env: f.Env, Stdin: f.Data})
	if err != nil {
		switch ctx.Err() {
		case context.DeadlineExceeded:
			err = fmt.Errorf("no end within %s; the command was killed", wire.Duration(timeout.Seconds()))
		case context.Canceled:
			err = fmt.Errorf("interrupted; the command was killed")
		}
		reply.Error = fmt.Sprintf("sh on %s: %v", f.Host, err)
		return
	}
	reply.OK, reply.Code, reply.Signal = true, res.Code, res.Signal
	reply.Size = int64(len(res.Out))
	reply.Data = append(res.Out, res.Err...)
}
