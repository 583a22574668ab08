package hub

import (
	"errors"
	"fmt"
	"strings"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// Reach: whoever controls a host a session runs on controls what code in
// that session asks of the hub. So a session may act only on sessions of
// its own host (its root twin there included) unless config.json grants
// more for that host's pattern ("reach" under "hosts"); a local session
// reaches everything. The decision is config.File.MayReach; the relay asks
// for it in checkReach, at the top of serveRequest, for every request that
// names another session (put, get, call, push, pull, kill, open, and any
// later kind with a target), and open asks once more for the session it
// ended up with, which closes the gap between the check and the start or
// attach; a session open started for the request and then refuses is
// ended; and open refuses jump hosts that the session may not reach
// (checkJumps), for a group's members too. An open's host is the one a
// NAME@HOST name implies when the request names none (requestTarget),
// checked before anything starts. A cancel needs no check: it only
// interrupts a target the same session's request reached. The sessions listing of a remote session
// holds only what it may reach.
//
// A put, get, call, push, pull or kill looks its target up again after
// the check, by name: were the name to pass to a new session elsewhere in
// between (the target ends and the user starts another under its name in
// that moment), the request would reach that one. Only someone who may
// start a session there can bring that about, and not on purpose within
// microseconds; closing it would take the relay's own lookups.
//
// config.json is read anew for each request of a remote session (never for
// a local one): it is a small file, read beside a request that has just
// crossed an ssh link, and so an edit, a revoked reach above all, applies
// at once to sessions already running. A config.json that does not parse
// refuses every request of a remote session that leaves its own host.

// ReachError is a request that a session may not make: its target runs on
// a host the session's host may not reach.
type ReachError struct {
	From, FromHost     string // the asking session and its host
	Target, TargetHost string // the session acted on (or opened) and its host
	// Rule is the "hosts" pattern whose "reach" decided, or "" when no
	// rule sets "reach" for FromHost.
	Rule string
	// Config is config.json's path.
	Config string
	// Err, when set, is why config.json could not be read.
	Err error
	// Jump, when set, is a jump host the session named to open Target
	// through; TargetHost is then that jump host.
	Jump bool
}

func (e *ReachError) Error() string {
	where := "on " + e.TargetHost
	if e.TargetHost == config.Local {
		where = "local"
	}
	head := fmt.Sprintf("session '%s' on %s may not reach '%s' (%s)", e.From, e.FromHost, e.Target, where)
	if e.Target == "" {
		head = fmt.Sprintf("session '%s' on %s may not run commands %s", e.From, e.FromHost, where)
	}
	if e.Jump {
		head = fmt.Sprintf("session '%s' on %s may not open '%s' through %s", e.From, e.FromHost, e.Target, e.TargetHost)
	}
	if e.Err != nil {
		return fmt.Sprintf("%s: %v", head, e.Err)
	}
	if e.Rule == "" {
		return fmt.Sprintf(`%s: add "reach": [%q] for %q under "hosts" in %s`, head, e.TargetHost, e.FromHost, e.Config)
	}
	return fmt.Sprintf(`%s: add %q to the "reach" of %q under "hosts" in %s`, head, e.TargetHost, e.Rule, e.Config)
}

func (e *ReachError) Unwrap() error { return e.Err }

// reach is what one session may reach, per config.json as it is now.
type reach struct {
	from  *Session
	host  string // from's host
	local bool   // from is local: it reaches everything
	cfg   *config.File
	err   error // why config.json could not be read
	path  string
}

// reachOf reads what session from may reach.
func (h *Hub) reachOf(from *Session) *reach {
	r := &reach{from: from, host: from.host(), path: h.paths.ConfigFile()}
	r.local = r.host == config.Local // MayReach says so too; this spares the read
	if !r.local {
		r.cfg, r.err = config.Load(r.path)
	}
	return r
}

// check says whether the session may act on session name on host.
func (r *reach) check(name, host string) error {
	if r.local {
		return nil
	}
	refuse := &ReachError{From: r.from.name, FromHost: r.host, Target: name, TargetHost: host, Config: r.path}
	if r.err != nil {
		if host == r.host {
			return nil
		}
		refuse.Err = r.err
		return refuse
	}
	ok, rule := r.cfg.MayReach(r.host, host)
	if ok {
		return nil
	}
	refuse.Rule = rule
	return refuse
}

// checkReach refuses a request of session from that acts on a session it
// may not reach: the one it names as its target, or, for an open, the
// host it asks for (requestTarget) and the session that already has the
// name.
func (h *Hub) checkReach(from *Session, f *proto.Req) error {
	name, host, err := requestTarget(f)
	if err != nil {
		return err
	}
	if name == "" && host == "" {
		return nil
	}
	r := h.reachOf(from)
	if r.local {
		return nil
	}
	if host != "" {
		if err := r.check(name, host); err != nil {
			return err
		}
	}
	if where, ok := h.whereIs(name); ok {
		return r.check(name, where)
	}
	return nil
}

// checkJumps refuses an open of session name by from through jump hosts
// that from may not reach: the hub logs in to each and dials the next
// from there, with the user's keys, so a jump host is one more host that
// the session reaches (and a hop "HOST:PORT" would let it probe any port
// this machine can reach). Its own host, as the first hop, reaches only
// itself. A local session's jumps are the user's.
func (h *Hub) checkJumps(from *Session, name string, jumps *[]string) error {
	if jumps == nil {
		return nil
	}
	r := h.reachOf(from)
	for _, j := range *jumps {
		hop := strings.TrimSpace(strings.TrimPrefix(j, "ssh://"))
		if hop == "" {
			continue
		}
		if err := r.check(name, hop); err != nil {
			var re *ReachError
			if errors.As(err, &re) {
				re.Jump = true
			}
			return err
		}
	}
	return nil
}

// requestTarget is the session a request acts on and, for an open or an
// sh, the host it asks for: f.Host, else the HOST of a name NAME@HOST
// (impliedHost), which open starts it on; "" is no host asked for (an
// open then starts a new session at openHost). Both checkReach and open
// take the host from here, so that what is checked is where the session
// starts.
func requestTarget(f *proto.Req) (name, host string, err error) {
	if f.Kind != "open" && f.Kind != "sh" {
		return f.Target, "", nil
	}
	req := wire.Request{Name: f.Name, Host: f.Host}
	if err := impliedHost(&req); err != nil {
		return "", "", err
	}
	return req.Name, req.Host, nil
}

// whereIs says on which host the session name runs, or, when none does,
// where its swap restores it (which an open does), or where it ran by its
// death note (which a refused session must not read);
// ok is false for a name nobody has, and for a bad name, which the request
// then reports itself.
func (h *Hub) whereIs(name string) (host string, ok bool) {
	if checkName(name) != nil {
		return "", false
	}
	h.mu.Lock()
	s := h.sessions[name]
	h.mu.Unlock()
	if s != nil {
		<-s.ready
		if s.startErr == nil {
			return s.host(), true
		}
	}
	if rec, _ := h.readSwap(name); rec != nil {
		if rec.Host == "" {
			return config.Local, true
		}
		return rec.Host, true
	}
	if n := h.readDeathNote(name); n != nil {
		if n.Host == "" {
			return config.Local, true
		}
		return n.Host, true
	}
	return "", false
}

// openHost is where open starts a new session when the request names no
// host: where the asking session runs. For a local session that is this
// machine, as always; for a remote one it is its own host, which it always
// reaches, rather than this machine, which it may not: code written on a
// host that opens a helper session gets it beside itself, whatever its
// reach, and never a local session by omission. Jumps then come from the
// request, config.json or ssh_config, as for any host.
func openHost(from *Session) string {
	if h := from.host(); h != config.Local {
		return h
	}
	return ""
}

// listFor is the sessions listing for session from: the sessions it may
// reach.
func (h *Hub) listFor(from *Session) *wire.SessionList {
	l := h.List()
	r := h.reachOf(from)
	if r.local {
		return l
	}
	keep := []wire.SessionInfo{}
	for _, s := range l.Sessions {
		if r.check(s.Name, s.Host) == nil {
			keep = append(keep, s)
		}
	}
	l.Sessions = keep
	var dead []wire.DeadInfo
	for _, d := range l.Dead {
		if where, ok := h.whereIs(d.Name); !ok || r.check(d.Name, where) == nil {
			dead = append(dead, d)
		}
	}
	l.Dead = dead
	return l
}
