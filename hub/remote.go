package hub

import (
	"fmt"
	"io"

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
	if was == want && n.Root == req.Sudo {
		return nil
	}
	if was == want {
		adv := wire.AdviceFor(req.Surface)
		as, flag := "your user", adv.Without("sudo")
		if n.Root {
			as, flag = "root", adv.With("sudo")
		}
		return &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf(
			"%s\nsession '%s' ran as %s: %s %s starts it again, or %s frees the name",
			n.text(), req.Name, as, adv.Exec(req.Name), flag, adv.Kill(req.Name))}
	}
	adv := wire.AdviceFor(req.Surface)
	hint := adv.ExecOn(req.Name, was) + " starts it there again"
	if was == "local" {
		hint = adv.Exec(req.Name) + " " + adv.Without("host") + " starts it here again"
	}
	return &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf(
		"%s\nsession '%s' ran on %s, not %s: %s, or %s frees the name",
		n.text(), req.Name, was, want, hint, adv.Kill(req.Name))}
}

// remoteProc adapts a remote.Worker to Proc.
type remoteProc struct {
	w *remote.Worker
}

func (p *remoteProc) Stdin() io.WriteCloser { return p.w.Stdin() }
func (p *remoteProc) Stdout() io.Reader     { return p.w.Stdout() }
func (p *remoteProc) Stderr() io.Reader     { return p.w.Stderr() }
func (p *remoteProc) Pid() int              { return 0 }

// sendPayload sends the payload that a sudo start held back.
func (p *remoteProc) sendPayload() error { return p.w.SendPayload() }
func (p *remoteProc) Kill() error        { return p.w.Kill() }
func (p *remoteProc) Close() error       { return p.w.Close() }

func (p *remoteProc) Wait() Exit {
	code, sig, err := p.w.Wait()
	return Exit{Code: code, Signal: sig, Err: err}
}
