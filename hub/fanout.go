package hub

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/internal/lazyre"
	"github.com/replhub/replhub/nodeset"
	"github.com/replhub/replhub/wire"
)

// Fan-out: one cell on many hosts. A group NAME on hosts H1 … Hn is the
// sessions NAME@H1 … NAME@Hn, each an ordinary session on its host: one
// name scheme, so `replhub exec NAME@H3 CODE` reaches one of them (and a
// new NAME@H starts on H, as its name says). The hub remembers a group's
// hosts by its name, so that a later exec, wait, interrupt or kill of NAME
// acts on all of them, hosts that could not be reached the first time
// included; after a hub restart the group is found again from the
// sessions, swaps and death notes named NAME@*.
//
// Each host runs concurrently; at most the request's Fanout (else
// config.json's "fanout", else 16) of them start a session at once, which
// bounds the ssh connections being opened. A host that fails never stops
// the others; a slow one is bounded by the cell's timeout, and wait
// collects it later.

// maxHosts bounds a group: each host is a session with a connection.
const maxHosts = 1024

// maxGroups bounds the groups the hub remembers, counted apart for those
// the user defined and those code in sessions did, so that sessions never
// use up the user's: each is a list of up to maxHosts names, kept until
// the group is killed.
const maxGroups = 256

// Who defines a group. The user's CLI or MCP client (exec with hosts)
// defines a group, or defines it anew, whoever defined it before: the
// user reaches every host. Code in a session (sessions_on) opens its
// sessions all the same, but the hub remembers the group from its request
// only when every host of it passed the reach check, and when the name is
// not somebody else's group: not remembered as the user's or another
// session's, nor, when not remembered, found from the sessions, swaps and
// death notes named NAME@* before the request on a host the request
// leaves out (whoever started those made that group; a request may widen
// it, as its own sessions NAME@HOST would anyway, but not narrow it). A
// session may define anew a group it defined itself. What
// the hub remembers serves only the later exec, wait, interrupt and kill
// of the group by its name, which the user gives; so a session's request
// that the hub does not remember loses that session nothing.

// groupRecord is a group the hub remembers.
type groupRecord struct {
	hosts []string
	// by is the session whose sessions_on defined the group; "" is the
	// user's CLI or MCP client.
	by string
}

// rememberGroupLocked records group name on hosts, defined by by (see
// groupRecord), or says why not: past maxGroups. h.mu is held.
func (h *Hub) rememberGroupLocked(name string, hosts []string, by string) error {
	if old, ok := h.groups[name]; !ok || (old.by == "") != (by == "") {
		n := 0
		for _, g := range h.groups {
			if (g.by == "") == (by == "") {
				n++
			}
		}
		if n >= maxGroups {
			return &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf(
				"hub: it remembers at most %d groups; kill a group no longer needed first", maxGroups)}
		}
	}
	h.groups[name] = groupRecord{hosts: hosts, by: by}
	return nil
}

// sessionMayDefineLocked says whether session from may have the hub
// remember group name on hosts from its request (see groupRecord): found
// is the group as found from sessions, swaps and death notes before the
// request, which the request may widen but not narrow. h.mu is held.
func (h *Hub) sessionMayDefineLocked(from *Session, name string, hosts, found []string) bool {
	if g, ok := h.groups[name]; ok {
		return g.by == from.name
	}
	for _, host := range found {
		if !slices.Contains(hosts, host) {
			return false
		}
	}
	return true
}

// validFanHost is a host of a group: a name or an ssh_config alias (user
// and port come from ssh_config), short enough to name files after.
var validFanHost = lazyre.New(`^[A-Za-z0-9._-]{1,128}$`)

// memberName is the session group name has on host.
func memberName(group, host string) string { return group + "@" + host }

// impliedHost makes a session named NAME@HOST run on HOST, and refuses a
// request that insists on another host.
func impliedHost(req *wire.Request) error {
	_, host, ok := strings.Cut(req.Name, "@")
	if !ok {
		return nil
	}
	if req.Host == "" {
		req.Host = host
		return nil
	}
	if req.Host != host {
		return &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf(
			"session '%s' runs on %s, as its name says, not %s: %s", req.Name, host, req.Host, wire.AdviceFor(req.Surface).Without("host"))}
	}
	return nil
}

// expandHosts reads a node-set expression, with config.json's groups.
func expandHosts(expr string, cfg *config.File) ([]string, error) {
	hosts, err := nodeset.Expand(expr, maxHosts, cfg.Group)
	if err != nil {
		return nil, &wire.Error{Code: wire.CodeBadRequest, Message: strings.TrimPrefix(err.Error(), "nodeset: ") + " (see \"groups\" in config.json)"}
	}
	for _, host := range hosts {
		if !validFanHost.MatchString(host) {
			return nil, &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf(
				"bad host %q in a group: use host names or ssh_config aliases (letters, digits and ._-, at most 128); set User and Port in ~/.ssh/config", host)}
		}
	}
	sort.SliceStable(hosts, func(i, j int) bool { return nodeset.Less(hosts[i], hosts[j]) })
	return hosts, nil
}

// groupOf returns the hosts of group name, or nil when name is no group:
// a live session of that name wins.
func (h *Hub) groupOf(name string) []string {
	if strings.Contains(name, "@") || checkName(name) != nil {
		return nil
	}
	prefix := name + "@"
	seen := map[string]bool{}
	var hosts []string
	add := func(member string) {
		if host, ok := strings.CutPrefix(member, prefix); ok && !seen[host] {
			seen[host] = true
			hosts = append(hosts, host)
		}
	}
	h.mu.Lock()
	if h.sessions[name] != nil {
		h.mu.Unlock()
		return nil
	}
	if g, ok := h.groups[name]; ok {
		h.mu.Unlock()
		return append([]string(nil), g.hosts...)
	}
	for member := range h.sessions {
		add(member)
	}
	h.mu.Unlock()
	if h.swappedError(name, wire.Advice{}) != nil {
		return nil // a single session on disk
	}
	for _, name := range h.swappedNames() {
		add(name)
	}
	for _, d := range h.deadNames("") {
		add(d)
	}
	if len(hosts) == 0 {
		return nil
	}
	sort.Slice(hosts, func(i, j int) bool { return nodeset.Less(hosts[i], hosts[j]) })
	return hosts
}

type configKey struct{}

// withConfig has the sessions started with the returned context take cfg
// as config.json: a group reads it once for all its hosts.
func withConfig(ctx context.Context, cfg *config.File) context.Context {
	return context.WithValue(ctx, configKey{}, cfg)
}

// loadConfig returns the config.json ctx carries (withConfig), else reads
// it anew.
func (h *Hub) loadConfig(ctx context.Context) (*config.File, error) {
	if cfg, _ := ctx.Value(configKey{}).(*config.File); cfg != nil {
		return cfg, nil
	}
	return config.Load(h.paths.ConfigFile())
}

type dialSlotsKey struct{}

// withDialSlots bounds, for the sessions started with the returned
// context, how many ssh connections are being opened at once: a
// fan-out's "fanout". Only the dial and handshake take a slot; a start
// over a connection that is up takes none.
func withDialSlots(ctx context.Context, n int) context.Context {
	return context.WithValue(ctx, dialSlotsKey{}, make(chan struct{}, n))
}

// dialSlot waits for one of ctx's dial slots, if it has any; release
// gives it back.
func dialSlot(ctx context.Context) (release func(), err error) {
	slots, _ := ctx.Value(dialSlotsKey{}).(chan struct{})
	if slots == nil {
		return func() {}, nil
	}
	select {
	case slots <- struct{}{}:
		return func() { <-slots }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fanEach runs do for every host at once and returns the results in the
// hosts' order; report, when set, hears of each host that ends.
func fanEach(hosts []string, report func(done, failed int), do func(host string) wire.HostResult) []wire.HostResult {
	out := make([]wire.HostResult, len(hosts))
	var mu sync.Mutex
	done, failed := 0, 0
	parallel(len(hosts), func(i int) {
		r := do(hosts[i])
		r.Host = hosts[i]
		out[i] = r
		mu.Lock()
		done++
		if wire.Failed(r.Status) {
			failed++
		}
		if report != nil {
			report(done, failed)
		}
		mu.Unlock()
	})
	return out
}

// failedHost is a host where replhub could not do what was asked.
func failedHost(member string, err error) wire.HostResult {
	return wire.HostResult{Result: &wire.Result{Session: member, Status: wire.StatusFailed}, Failure: errorMessage(err)}
}

// fanProgress reports a group's progress to a waiting client.
func fanProgress(name string, n int, progress func(*wire.Progress)) func(done, failed int) {
	if progress == nil {
		return nil
	}
	start := time.Now()
	progress(&wire.Progress{Session: name, Hosts: n})
	return func(done, failed int) {
		progress(&wire.Progress{Session: name, Hosts: n, Done: done, Failed: failed, ElapsedMS: time.Since(start).Milliseconds()})
	}
}

// fanExec runs req.Code in session NAME@HOST on every host of the group:
// hosts, or, when nil, those of req.Hosts, which the hub then remembers
// as the group req.Name. A streaming exec's watcher (a terminal's exec of
// a group's name) is no member's: a watcher follows one session, and the
// members' outputs are grouped in the reply.
func (h *Hub) fanExec(ctx context.Context, req wire.Request, hosts []string, progress func(*wire.Progress)) (*wire.Result, error) {
	ctx = withWatcher(ctx, nil)
	cfg, err := config.Load(h.paths.ConfigFile())
	if err != nil {
		return nil, &wire.Error{Code: wire.CodeBadRequest, Message: err.Error()}
	}
	if strings.Contains(req.Name, "@") {
		return nil, &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf(
			"'%s' names one session on one host; a group's name has no @ (its sessions are NAME@HOST)", req.Name)}
	}
	if hosts == nil {
		if req.Host != "" {
			return nil, &wire.Error{Code: wire.CodeBadRequest, Message: "host and hosts do not go together: a group's hosts are all in hosts"}
		}
		if hosts, err = expandHosts(req.Hosts, cfg); err != nil {
			return nil, err
		}
	}
	h.mu.Lock()
	if h.sessions[req.Name] != nil {
		h.mu.Unlock()
		return nil, &wire.Error{Code: wire.CodeBadRequest, Message: fmt.Sprintf(
			"'%s' is a single session: give the group another name, or %s first", req.Name, wire.AdviceFor(req.Surface).Kill(req.Name))}
	}
	if req.Env == nil {
		for _, host := range hosts {
			if h.sessions[memberName(req.Name, host)] == nil {
				h.mu.Unlock()
				return nil, &wire.Error{Code: wire.CodeNeedEnv, Message: "hub: a new session needs the caller's environment; send it with the request"}
			}
		}
	}
	_, known := h.groups[req.Name]
	if req.Hosts != "" {
		if err := h.rememberGroupLocked(req.Name, hosts, ""); err != nil {
			h.mu.Unlock()
			return nil, err
		}
	}
	h.mu.Unlock()
	if !known && req.Hosts != "" {
		// A group none of whose sessions started is not kept: the next
		// exec under its name would go to those hosts again, and no list
		// would show it.
		defer h.forgetIfEmpty(req.Name, hosts)
	}

	ctx = withDialSlots(withConfig(ctx, cfg), cfg.FanoutOr(req.Fanout))
	limit := timeoutOf(req.Timeout)
	made := map[string]fanMade{}
	if req.Sudo && req.Password == nil {
		begin := time.Now()
		if made, err = h.fanStartRoot(ctx, req, hosts, limit); err != nil {
			return nil, err
		}
		limit = max(limit-time.Since(begin), minFanCell)
	}
	g := h.newFanCell(req.Name, hosts)
	results := fanEach(hosts, fanProgress(req.Name, len(hosts), progress), func(host string) wire.HostResult {
		r := h.fanExecOn(ctx, memberRequest(req, host), req.Name, g, host, limit, made[host])
		r.GroupCell = g
		return r
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	res := &wire.Result{Session: req.Name, Cell: g, Status: wire.Worst(results), Fan: results}
	res.Notes = h.takeWarnings()
	res.Others = h.othersLine(req)
	return res, nil
}

// memberRequest is req as the session of its group on host gets it: with
// a copy of the password of its own, since a start zeroes it. An empty
// password stays empty, not none, as for a single session: sudo is given
// the empty line.
func memberRequest(req wire.Request, host string) wire.Request {
	sub := req
	sub.Name, sub.Host, sub.Hosts = memberName(req.Name, host), host, ""
	sub.Password = slices.Clone(req.Password)
	return sub
}

// fanWait collects the running or unread cell of every session of the
// group.
func (h *Hub) fanWait(ctx context.Context, req wire.Request, hosts []string, progress func(*wire.Progress)) (*wire.Result, error) {
	if err := h.checkFanCell(req.Name, req.Cell, wire.AdviceFor(req.Surface)); err != nil {
		return nil, err
	}
	results := fanEach(hosts, fanProgress(req.Name, len(hosts), progress), func(host string) wire.HostResult {
		r := h.fanWaitOn(ctx, req, host)
		r.GroupCell = req.Cell
		return r
	})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return &wire.Result{Session: req.Name, Cell: req.Cell, Status: wire.Worst(results), Fan: results, Others: h.othersLine(req)}, nil
}

// fanInterrupt interrupts the running cell of every session of the group.
// With req.Cell, it is the group's cell of that number, on each host the
// cell it is there.
func (h *Hub) fanInterrupt(req wire.Request, hosts []string) (string, error) {
	if err := h.checkFanCell(req.Name, req.Cell, wire.AdviceFor(req.Surface)); err != nil {
		return "", err
	}
	return h.fanMessages(req.Name, hosts, func(member string) (string, error) {
		sub := req
		sub.Name = member
		if req.Cell > 0 {
			cell, err := h.fanCellOn(req.Name, req.Cell, strings.TrimPrefix(member, req.Name+"@"))
			if err != nil {
				return "", err
			}
			sub.Cell = cell
		}
		return h.Interrupt(sub)
	})
}

// fanKill ends every session of the group and forgets the group. A group
// with no session left is forgotten all the same, and says so.
func (h *Hub) fanKill(name string, hosts []string) (string, error) {
	msg, err := h.fanMessages(name, hosts, h.Kill)
	h.mu.Lock()
	_, known := h.groups[name]
	delete(h.groups, name)
	delete(h.fanCells, name)
	h.mu.Unlock()
	if err != nil && wire.IsCode(err, wire.CodeNoSession) && known {
		return fmt.Sprintf("group '%s' had no session left (on %s); it is forgotten", name, nodeset.Fold(hosts)), nil
	}
	if err != nil {
		return "", err
	}
	return msg + fmt.Sprintf("\ngroup '%s' is forgotten", name), nil
}

// forgetIfEmpty forgets group name, on hosts, when none of its sessions
// exists.
func (h *Hub) forgetIfEmpty(name string, hosts []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, host := range hosts {
		if h.sessions[memberName(name, host)] != nil {
			return
		}
	}
	delete(h.groups, name)
	delete(h.fanCells, name)
}

// fanMessages does do for every session of the group at once and folds
// the answers: hosts with the same answer share a line. It fails only
// when every host did.
func (h *Hub) fanMessages(name string, hosts []string, do func(member string) (string, error)) (string, error) {
	var mu sync.Mutex
	byText := map[string][]string{}
	var order []string
	failures := 0
	fanEach(hosts, nil, func(host string) wire.HostResult {
		member := memberName(name, host)
		msg, err := do(member)
		if err != nil {
			msg = errorMessage(err)
		}
		// The session is any host's; advice goes to the whole group.
		text := strings.ReplaceAll(msg, "session '"+member+"'", "session '"+name+"@HOST'")
		text = strings.ReplaceAll(text, member, name)
		mu.Lock()
		if err != nil {
			failures++
		}
		if byText[text] == nil {
			order = append(order, text)
		}
		byText[text] = append(byText[text], host)
		mu.Unlock()
		return wire.HostResult{Result: &wire.Result{Status: wire.StatusOK}}
	})
	lines := make([]string, len(order))
	for i, text := range order {
		lines[i] = nodeset.Fold(byText[text]) + ": " + text
	}
	sort.Strings(lines)
	out := strings.Join(lines, "\n")
	if failures == len(hosts) {
		return "", &wire.Error{Code: wire.CodeNoSession, Message: out}
	}
	return out, nil
}
