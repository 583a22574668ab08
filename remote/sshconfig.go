package remote

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/kevinburke/ssh_config"

	"github.com/replhub/replhub/internal/atomicfile"
	"github.com/replhub/replhub/internal/lazyre"
)

// Hop is one ssh connection of a route, resolved from ssh_config.
type Hop struct {
	// Alias is the host as the user (or a ProxyJump list) named it.
	Alias    string
	User     string
	HostName string
	Port     int
	// IdentityFiles are expanded paths; IdentitiesOnly limits agent keys to them.
	IdentityFiles  []string
	IdentitiesOnly bool
	// ProxyCommand, expanded, is used for the route's first hop only.
	ProxyCommand string
	// KnownHosts are the files host keys are checked against; the first is
	// where accept-new records a key.
	KnownHosts []string
	// StrictHostKeyChecking is yes, accept-new or no ("ask" is yes: nobody
	// is there to answer).
	StrictHostKeyChecking string
	ServerAliveInterval   time.Duration
	ServerAliveCountMax   int
	ConnectTimeout        time.Duration
}

// Addr is host:port for dialing and for known_hosts.
func (h Hop) Addr() string {
	return netJoin(h.HostName, h.Port)
}

func (h Hop) String() string {
	return fmt.Sprintf("%s@%s", h.User, h.Addr())
}

// Route is the hops to a host: jump hosts first, the target last.
type Route struct {
	Hops []Hop
}

// Target is the last hop.
func (r Route) Target() Hop { return r.Hops[len(r.Hops)-1] }

// Key identifies the route: one connection is shared per key.
func (r Route) Key() string {
	var parts []string
	for i, h := range r.Hops {
		p := h.String()
		if i == 0 && h.ProxyCommand != "" {
			p += " proxy:" + h.ProxyCommand
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, " > ")
}

// String says where a route goes, as people name it: "lab-7 via gw1".
func (r Route) String() string {
	s := r.Target().Alias
	if len(r.Hops) > 1 {
		var via []string
		for _, h := range r.Hops[:len(r.Hops)-1] {
			via = append(via, h.Alias)
		}
		s += " via " + strings.Join(via, ", ")
	}
	return s
}

// Names must match these before they reach a config lookup, a known_hosts
// line or the remote start script.
var (
	validHost = lazyre.New(`^[A-Za-z0-9._-]{1,253}$|^\[[0-9A-Fa-f:.]{2,45}\]$`)
	validUser = lazyre.New(`^[A-Za-z0-9._][A-Za-z0-9._-]{0,63}$`)
)

// ParseSpec splits "[user@]host[:port]" (IPv6 as [addr]:port).
func ParseSpec(spec string) (user, host string, port int, err error) {
	rest := spec
	if i := strings.LastIndexByte(rest, '@'); i >= 0 {
		user, rest = rest[:i], rest[i+1:]
		if !validUser.MatchString(user) {
			return "", "", 0, fmt.Errorf("remote: bad user %q in %q", user, spec)
		}
	}
	host = rest
	given := false // a port written, which must be one: :0 is not "none"
	if strings.HasPrefix(rest, "[") {
		if i := strings.Index(rest, "]:"); i >= 0 {
			host, given = rest[:i+1], true
			if port, err = strconv.Atoi(rest[i+2:]); err != nil {
				return "", "", 0, fmt.Errorf("remote: bad port in %q", spec)
			}
		}
	} else if i := strings.LastIndexByte(rest, ':'); i >= 0 {
		host, given = rest[:i], true
		if port, err = strconv.Atoi(rest[i+1:]); err != nil {
			return "", "", 0, fmt.Errorf("remote: bad port in %q", spec)
		}
	}
	if port < 0 || port > 65535 || given && port == 0 {
		return "", "", 0, fmt.Errorf("remote: bad port in %q: 1 to 65535", spec)
	}
	if !validHost.MatchString(host) {
		return "", "", 0, fmt.Errorf("remote: bad host %q: use letters, digits and .-_ (or [IPv6])", host)
	}
	return user, host, port, nil
}

// Resolver resolves host names through ~/.ssh/config and /etc/ssh/ssh_config.
// Make one per session start: the files are read anew each time, so edits
// need no restart.
type Resolver struct {
	home      string
	localUser string
	user      *ssh_config.Config
	system    *ssh_config.Config
}

// warned remembers which config lines were reported, so each is said once
// per hub.
var warned sync.Map

// Warnf receives warnings about ssh_config lines that were skipped; the hub
// points it at its log and the next reply's notes.
var Warnf = func(format string, args ...any) {}

// NewResolver reads the ssh configuration; home is $HOME (so a test or a
// user can point it elsewhere). A missing file is empty.
func NewResolver(home, localUser string) (*Resolver, error) {
	r := &Resolver{home: home, localUser: localUser}
	var err error
	if r.user, err = r.load(filepath.Join(home, ".ssh", "config"), false); err != nil {
		return nil, err
	}
	if r.system, err = r.load("/etc/ssh/ssh_config", true); err != nil {
		return nil, err
	}
	return r, nil
}

var errPos = lazyre.New(`^\((\d+), \d+\): (.*)$`)

// load reads one config file with its Includes inlined, then decodes it.
// A line the library cannot parse is neutralised (an unsupported Match
// block never matches; any other line is dropped) with a warning naming it,
// and the rest of the file is used.
func (r *Resolver) load(path string, system bool) (*ssh_config.Config, error) {
	lines, origin, err := r.readInlined(path, system, 0)
	if errors.Is(err, os.ErrNotExist) {
		return &ssh_config.Config{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("remote: %w", err)
	}
	for attempt := 0; attempt < 200; attempt++ {
		cfg, err := ssh_config.DecodeBytes([]byte(strings.Join(lines, "\n") + "\n"))
		if err == nil {
			return cfg, nil
		}
		m := errPos.FindStringSubmatch(err.Error())
		if m == nil {
			return nil, fmt.Errorf("remote: %s: %v", path, err)
		}
		n, _ := strconv.Atoi(m[1])
		if n < 1 || n > len(lines) {
			return nil, fmt.Errorf("remote: %s: %v", path, err)
		}
		where := origin[n-1]
		if _, seen := warned.LoadOrStore(where+lines[n-1], true); !seen {
			Warnf("ssh config %s: %s (%s); that line is skipped, the rest is used", where, strings.TrimSpace(lines[n-1]), m[2])
		}
		if f := strings.Fields(lines[n-1]); len(f) > 0 && strings.EqualFold(f[0], "Match") {
			lines[n-1] = "Host __replhub_unsupported_match__"
		} else {
			lines[n-1] = "# " + lines[n-1]
		}
	}
	return nil, fmt.Errorf("remote: %s: too many lines it cannot parse", path)
}

// maxSSHConfig bounds each ssh_config file read, Includes one by one.
const maxSSHConfig = 4 << 20

// readInlined returns the file's lines with Include directives replaced by
// the files they name, and for each line its "file:line" origin.
func (r *Resolver) readInlined(path string, system bool, depth int) ([]string, []string, error) {
	if depth > 8 {
		return nil, nil, fmt.Errorf("remote: %s: Include nested too deep", path)
	}
	b, err := atomicfile.ReadUserFile(path, maxSSHConfig)
	if err != nil {
		return nil, nil, err
	}
	var lines, origin []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		f := strings.Fields(strings.Replace(line, "=", " ", 1))
		if len(f) >= 2 && strings.EqualFold(f[0], "Include") {
			for _, pat := range f[1:] {
				pat = r.expandTilde(pat)
				if !filepath.IsAbs(pat) {
					if system {
						pat = filepath.Join("/etc/ssh", pat)
					} else {
						pat = filepath.Join(r.home, ".ssh", pat)
					}
				}
				matches, _ := filepath.Glob(pat)
				for _, m := range matches {
					sub, subOrigin, err := r.readInlined(m, system, depth+1)
					if err != nil {
						Warnf("ssh config %s:%d: Include %s: %v", path, n, m, err)
						continue
					}
					lines = append(lines, sub...)
					origin = append(origin, subOrigin...)
				}
			}
			continue
		}
		lines = append(lines, line)
		origin = append(origin, fmt.Sprintf("%s:%d", path, n))
	}
	return lines, origin, sc.Err()
}

func (r *Resolver) expandTilde(p string) string {
	if p == "~" {
		return r.home
	}
	if strings.HasPrefix(p, "~/") {
		return filepath.Join(r.home, p[2:])
	}
	return p
}

// get returns the first value for key: the user's file, then the system's.
func (r *Resolver) get(alias, key string) string {
	for _, c := range []*ssh_config.Config{r.user, r.system} {
		if v, err := c.Get(alias, key); err == nil && v != "" {
			return v
		}
	}
	return ""
}

func (r *Resolver) getAll(alias, key string) []string {
	var out []string
	for _, c := range []*ssh_config.Config{r.user, r.system} {
		if v, err := c.GetAll(alias, key); err == nil {
			out = append(out, v...)
		}
	}
	return out
}

// Resolve builds the route to spec. jumps, when non-nil, replaces the
// target's ProxyJump (an empty list means no jump at all).
func (r *Resolver) Resolve(spec string, jumps *[]string) (Route, error) {
	return r.resolve(spec, jumps, 0)
}

func (r *Resolver) resolve(spec string, jumps *[]string, depth int) (Route, error) {
	if depth > 8 {
		return Route{}, fmt.Errorf("remote: ProxyJump chain through %s is too long (a loop?)", spec)
	}
	target, err := r.hop(spec)
	if err != nil {
		return Route{}, err
	}
	var via []string
	if jumps != nil {
		via = *jumps
	} else if pj := r.get(target.Alias, "ProxyJump"); pj != "" && !strings.EqualFold(pj, "none") {
		via = strings.Split(pj, ",")
	}
	var route Route
	for _, j := range via {
		j = strings.TrimSpace(strings.TrimPrefix(j, "ssh://"))
		if j == "" {
			continue
		}
		sub, err := r.resolve(j, nil, depth+1)
		if err != nil {
			return Route{}, err
		}
		route.Hops = append(route.Hops, sub.Hops...)
	}
	if len(route.Hops) > 0 {
		target.ProxyCommand = ""
	}
	route.Hops = append(route.Hops, target)
	return route, nil
}

// hop resolves one "[user@]host[:port]" through ssh_config.
func (r *Resolver) hop(spec string) (Hop, error) {
	user, alias, port, err := ParseSpec(spec)
	if err != nil {
		return Hop{}, err
	}
	h := Hop{Alias: alias, User: user, Port: port}
	h.HostName = alias
	if hn := r.get(alias, "HostName"); hn != "" {
		h.HostName = strings.ReplaceAll(hn, "%h", alias)
		if !validHost.MatchString(h.HostName) {
			return Hop{}, fmt.Errorf("remote: ssh config gives %s the bad HostName %q", alias, h.HostName)
		}
	}
	if h.User == "" {
		h.User = r.get(alias, "User")
	}
	if h.User == "" {
		h.User = r.localUser
	}
	if !validUser.MatchString(h.User) {
		return Hop{}, fmt.Errorf("remote: bad user %q for %s", h.User, alias)
	}
	if h.Port == 0 {
		if p := r.get(alias, "Port"); p != "" {
			if h.Port, err = strconv.Atoi(p); err != nil || h.Port < 1 || h.Port > 65535 {
				return Hop{}, fmt.Errorf("remote: ssh config gives %s the bad Port %q", alias, p)
			}
		}
	}
	if h.Port == 0 {
		h.Port = 22
	}
	for _, f := range r.getAll(alias, "IdentityFile") {
		h.IdentityFiles = append(h.IdentityFiles, r.expand(f, h))
	}
	h.IdentitiesOnly = strings.EqualFold(r.get(alias, "IdentitiesOnly"), "yes")
	if pc := r.get(alias, "ProxyCommand"); pc != "" && !strings.EqualFold(pc, "none") {
		h.ProxyCommand = r.expand(pc, h)
	}
	for _, f := range append(r.getAll(alias, "UserKnownHostsFile"), r.getAll(alias, "GlobalKnownHostsFile")...) {
		for _, ff := range strings.Fields(f) {
			if ff != "none" {
				h.KnownHosts = append(h.KnownHosts, r.expand(ff, h))
			}
		}
	}
	if len(r.getAll(alias, "UserKnownHostsFile")) == 0 {
		h.KnownHosts = append([]string{filepath.Join(r.home, ".ssh", "known_hosts")}, h.KnownHosts...)
	}
	if len(r.getAll(alias, "GlobalKnownHostsFile")) == 0 {
		h.KnownHosts = append(h.KnownHosts, "/etc/ssh/ssh_known_hosts")
	}
	switch v := strings.ToLower(r.get(alias, "StrictHostKeyChecking")); v {
	case "accept-new", "no", "off":
		h.StrictHostKeyChecking = map[string]string{"accept-new": "accept-new", "no": "no", "off": "no"}[v]
	default:
		h.StrictHostKeyChecking = "yes"
	}
	h.ServerAliveInterval = 15 * time.Second
	if v := r.get(alias, "ServerAliveInterval"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			h.ServerAliveInterval = time.Duration(n) * time.Second
		}
	}
	h.ServerAliveCountMax = 3
	if v := r.get(alias, "ServerAliveCountMax"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			h.ServerAliveCountMax = n
		}
	}
	h.ConnectTimeout = 15 * time.Second
	if v := r.get(alias, "ConnectTimeout"); v != "" {
		if n, err := strconv.Atoi(v); err == nil && n > 0 {
			h.ConnectTimeout = time.Duration(n) * time.Second
		}
	}
	return h, nil
}

// expand does the ~ and % expansions that ssh_config leaves to its caller:
// %h host name, %p port, %r remote user, %u local user, %d local home,
// %n the name as given, %% a percent sign.
func (r *Resolver) expand(s string, h Hop) string {
	s = r.expandTilde(s)
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch s[i] {
		case 'h':
			b.WriteString(strings.Trim(h.HostName, "[]"))
		case 'p':
			b.WriteString(strconv.Itoa(h.Port))
		case 'r':
			b.WriteString(h.User)
		case 'u':
			b.WriteString(r.localUser)
		case 'd':
			b.WriteString(r.home)
		case 'n':
			b.WriteString(h.Alias)
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(s[i])
		}
	}
	return b.String()
}

func netJoin(host string, port int) string {
	if strings.HasPrefix(host, "[") {
		return fmt.Sprintf("%s:%d", host, port)
	}
	if strings.Contains(host, ":") {
		return fmt.Sprintf("[%s]:%d", host, port)
	}
	return fmt.Sprintf("%s:%d", host, port)
}
