package remote

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/skeema/knownhosts"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"

	"github.com/replhub/replhub/internal/atomicfile"
	"github.com/replhub/replhub/internal/rawio"
)

// HostKeyError is a host key that was refused. Changed is false for an
// unknown host (Known is then empty), true for a key that differs from the
// one on record.
type HostKeyError struct {
	Alias       string
	Addr        string
	Changed     bool
	Fingerprint string // the key the server offered
	KeyType     string
	Line        string // the known_hosts line that would trust it
	File        string // where that line would go
	Known       []string
}

func (e *HostKeyError) Error() string {
	if e.Changed {
		return fmt.Sprintf("remote: THE HOST KEY OF %s (%s) HAS CHANGED: the server offers %s %s, known_hosts holds %s. "+
			"This can be an attack; replhub will not connect. If the change is legitimate, remove the old key (ssh-keygen -R '%s' -f %s) and trust the new one",
			e.Alias, e.Addr, e.KeyType, e.Fingerprint, strings.Join(e.Known, ", "), knownhosts.Normalize(e.Addr), e.File)
	}
	if atomicfile.IsDevNull(e.File) {
		return fmt.Sprintf("remote: the host key of %s (%s) is unknown: %s %s. Its UserKnownHostsFile is %s, which keeps no key: "+
			"set StrictHostKeyChecking accept-new for it, or name a known_hosts file that can hold the key",
			e.Alias, e.Addr, e.KeyType, e.Fingerprint, e.File)
	}
	return fmt.Sprintf("remote: the host key of %s (%s) is unknown: %s %s. If that is the right key, trust it with:\n  echo '%s' >> %s",
		e.Alias, e.Addr, e.KeyType, e.Fingerprint, e.Line, e.File)
}

// AuthError says that no key was accepted, and why keys were skipped.
type AuthError struct {
	Hop     string
	Tried   []string
	Skipped []string
	Err     error
}

func (e *AuthError) Error() string {
	s := fmt.Sprintf("remote: %s accepted none of the keys offered", e.Hop)
	if len(e.Tried) > 0 {
		s += " (" + strings.Join(e.Tried, ", ") + ")"
	} else {
		s += " (none: no ssh-agent and no key files)"
	}
	if len(e.Skipped) > 0 {
		s += "; " + strings.Join(e.Skipped, "; ")
	}
	return s + "; replhub uses keys only, never a password"
}

func (e *AuthError) Unwrap() error { return e.Err }

// Env is what a dial takes from the caller's environment.
type Env struct {
	// Home is $HOME, for ~ and default key files.
	Home string
	// AgentSocket is $SSH_AUTH_SOCK; empty means no agent.
	AgentSocket string
}

// hopClient is one connected hop and what must be closed with it.
type hopClient struct {
	client *ssh.Client
	closer io.Closer // the underlying transport (a ProxyCommand process)
}

// dialRoute connects every hop in turn, each through the one before.
func dialRoute(ctx context.Context, r Route, env Env) ([]hopClient, error) {
	var hops []hopClient
	closeAll := func() {
		for i := len(hops) - 1; i >= 0; i-- {
			hops[i].client.Close()
			if hops[i].closer != nil {
				hops[i].closer.Close()
			}
		}
	}
	for i, h := range r.Hops {
		var prev *ssh.Client
		if i > 0 {
			prev = hops[i-1].client
		}
		hc, err := dialHop(ctx, h, prev, i == 0, env)
		if err != nil {
			closeAll()
			if i < len(r.Hops)-1 {
				return nil, fmt.Errorf("jump host %s: %w", h.Alias, err)
			}
			return nil, err
		}
		hops = append(hops, hc)
	}
	return hops, nil
}

// dialHop opens the transport (TCP, a tunnel through prev, or a
// ProxyCommand) and runs the ssh handshake, both bounded by ConnectTimeout:
// x/crypto bounds neither the handshake nor a tunnelled dial by itself.
func dialHop(ctx context.Context, h Hop, prev *ssh.Client, first bool, env Env) (hopClient, error) {
	ctx, cancel := context.WithTimeout(ctx, h.ConnectTimeout)
	defer cancel()
	var nc net.Conn
	var err error
	var closer io.Closer
	switch {
	case prev != nil:
		nc, err = prev.DialContext(ctx, "tcp", h.Addr())
	case first && h.ProxyCommand != "":
		var pc *proxyConn
		pc, err = startProxyCommand(h.ProxyCommand)
		nc, closer = pc, pc
	default:
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", h.Addr())
		if err == nil {
			nc = rawio.Conn(nc)
		}
	}
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return hopClient{}, fmt.Errorf("remote: %s (%s): no connection within ConnectTimeout %s", h.Alias, h.Addr(), h.ConnectTimeout)
		}
		return hopClient{}, fmt.Errorf("remote: %s (%s): %w", h.Alias, h.Addr(), err)
	}
	cfg, auth, err := clientConfig(h, env)
	if err != nil {
		nc.Close()
		return hopClient{}, err
	}
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	c, chans, reqs, err := ssh.NewClientConn(nc, h.Addr(), cfg)
	if !stop() {
		if err == nil {
			c.Close()
		}
		return hopClient{}, fmt.Errorf("remote: %s (%s): no ssh handshake within ConnectTimeout %s", h.Alias, h.Addr(), h.ConnectTimeout)
	}
	if err != nil {
		nc.Close()
		var hk *HostKeyError
		if errors.As(err, &hk) {
			return hopClient{}, hk
		}
		if strings.Contains(err.Error(), "unable to authenticate") {
			auth.Err = err
			return hopClient{}, auth
		}
		if pc, ok := nc.(*proxyConn); ok {
			if said := pc.stderrText(); said != "" {
				err = fmt.Errorf("%w; ProxyCommand said: %s", err, said)
			}
		}
		return hopClient{}, fmt.Errorf("remote: %s (%s): %w", h.Alias, h.Addr(), err)
	}
	return hopClient{client: ssh.NewClient(c, chans, reqs), closer: closer}, nil
}

// clientConfig builds the ssh config of one hop: keys only, host keys
// checked against known_hosts with the known key type negotiated first.
func clientConfig(h Hop, env Env) (*ssh.ClientConfig, *AuthError, error) {
	auth := &AuthError{Hop: h.String()}
	signers := keySigners(h, env, auth)
	if len(signers) == 0 && len(auth.Skipped) > 0 {
		return nil, nil, auth
	}
	hostKeys, algos, err := hostKeyCallback(h)
	if err != nil {
		return nil, nil, err
	}
	return &ssh.ClientConfig{
		User:              h.User,
		Auth:              []ssh.AuthMethod{ssh.PublicKeys(signers...)},
		HostKeyCallback:   hostKeys,
		HostKeyAlgorithms: algos,
		ClientVersion:     "SSH-2.0-replhub",
	}, auth, nil
}

// maxKeyFile bounds a key file read; a 16384-bit RSA key is some 12 KiB.
const maxKeyFile = 1 << 20

// keySigners gathers the agent's keys, then the IdentityFile(s), else the
// default key files. A passphrase-protected file whose key the agent does
// not hold is skipped and named in auth.Skipped.
func keySigners(h Hop, env Env, auth *AuthError) []ssh.Signer {
	var signers []ssh.Signer
	have := map[string]bool{}
	files := h.IdentityFiles
	explicit := len(files) > 0
	if !explicit {
		for _, n := range []string{"id_ed25519", "id_ecdsa", "id_rsa"} {
			files = append(files, filepath.Join(env.Home, ".ssh", n))
		}
	}
	// With IdentitiesOnly, only agent keys that match a file are used.
	wanted := map[string]bool{}
	for _, f := range files {
		if b, err := atomicfile.ReadUserFile(f+".pub", maxKeyFile); err == nil {
			if pk, _, _, _, err := ssh.ParseAuthorizedKey(b); err == nil {
				wanted[string(pk.Marshal())] = true
			}
		}
	}
	if env.AgentSocket != "" {
		if c, err := net.DialTimeout("unix", env.AgentSocket, 2*time.Second); err == nil {
			ag := agent.NewClient(c)
			if ss, err := ag.Signers(); err == nil {
				n := 0
				for _, s := range ss {
					k := string(s.PublicKey().Marshal())
					if h.IdentitiesOnly && !wanted[k] {
						continue
					}
					signers = append(signers, s)
					have[k] = true
					n++
				}
				auth.Tried = append(auth.Tried, fmt.Sprintf("ssh-agent: %d keys", n))
			}
			// The agent connection must stay open while its signers are used;
			// it is closed with the process (one small socket per dial).
		} else {
			auth.Skipped = append(auth.Skipped, fmt.Sprintf("ssh-agent at %s did not answer (%v)", env.AgentSocket, err))
		}
	}
	for _, f := range files {
		b, err := atomicfile.ReadUserFile(f, maxKeyFile)
		if err != nil {
			if explicit && !errors.Is(err, os.ErrNotExist) {
				auth.Skipped = append(auth.Skipped, fmt.Sprintf("key %s: %v", f, err))
			}
			continue
		}
		s, err := ssh.ParsePrivateKey(b)
		var pm *ssh.PassphraseMissingError
		if errors.As(err, &pm) {
			if pm.PublicKey != nil && have[string(pm.PublicKey.Marshal())] {
				continue // the agent holds it
			}
			auth.Skipped = append(auth.Skipped, fmt.Sprintf("key %s is protected by a passphrase and no ssh-agent holds it: run ssh-add %s", f, f))
			continue
		}
		if err != nil {
			auth.Skipped = append(auth.Skipped, fmt.Sprintf("key %s: %v", f, err))
			continue
		}
		if have[string(s.PublicKey().Marshal())] {
			continue
		}
		signers = append(signers, s)
		auth.Tried = append(auth.Tried, f)
	}
	return signers
}

// maxKnownHosts bounds a known_hosts file: some 100,000 hosts.
const maxKnownHosts = 64 << 20

// knownHostsMu serialises appends to known_hosts files.
var knownHostsMu sync.Mutex

// hostKeyCallback checks host keys against h.KnownHosts. An unknown key is
// refused unless StrictHostKeyChecking is accept-new or no (then it is
// recorded); a changed key is always refused.
func hostKeyCallback(h Hop) (ssh.HostKeyCallback, []string, error) {
	// The library reads the files whole, by name, twice (keys, then
	// @cert-authority lines): a FIFO would block the dial for good,
	// /dev/zero or a file that grows fill the memory, and a file that
	// changes between the two reads mislabel its lines. Each is opened
	// here, checked as what it is, and read once, bounded; the library
	// reads that copy.
	var files []string
	real := map[string]string{} // a name given to the library: the file's
	var drops []func()
	defer func() {
		for _, drop := range drops {
			drop()
		}
	}()
	for _, f := range h.KnownHosts {
		if atomicfile.IsDevNull(f) {
			continue // no hosts known, and the new ones forgotten
		}
		file, fi, err := atomicfile.OpenUserFile(f)
		if atomicfile.IsNotRegular(err) {
			return nil, nil, fmt.Errorf("remote: known_hosts %s is not a regular file", f)
		}
		if err != nil {
			continue // missing or unreadable, as ssh takes it
		}
		if fi.Size() > maxKnownHosts {
			file.Close()
			return nil, nil, fmt.Errorf("remote: known_hosts %s is %d bytes, more than %d", f, fi.Size(), maxKnownHosts)
		}
		name, drop, err := copyKnownHosts(file, f)
		file.Close()
		if err != nil {
			return nil, nil, err
		}
		drops = append(drops, drop)
		real[name] = f
		files = append(files, name)
	}
	var db *knownhosts.HostKeyDB
	if len(files) > 0 {
		var err error
		if db, err = knownhosts.NewDB(files...); err != nil {
			return nil, nil, fmt.Errorf("remote: known_hosts: %s", realNames(err.Error(), real))
		}
	}
	record := h.KnownHosts[0]
	var algos []string
	if db != nil {
		algos = db.HostKeyAlgorithms(h.Addr())
	}
	cb := func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		var err error
		if db != nil {
			err = db.HostKeyCallback()(hostname, remote, key)
			if err == nil {
				return nil
			}
		}
		line := knownhosts.Line([]string{hostname}, key)
		e := &HostKeyError{Alias: h.Alias, Addr: hostname, Fingerprint: ssh.FingerprintSHA256(key),
			KeyType: key.Type(), Line: line, File: record}
		if db != nil && knownhosts.IsHostKeyChanged(err) {
			e.Changed = true
			for _, k := range db.HostKeys(hostname) {
				e.Known = append(e.Known, k.Type()+" "+ssh.FingerprintSHA256(k))
			}
			return e
		}
		if db != nil && !knownhosts.IsHostUnknown(err) {
			return fmt.Errorf("remote: checking the host key of %s: %w", h.Alias, err)
		}
		if h.StrictHostKeyChecking == "yes" {
			return e
		}
		knownHostsMu.Lock()
		defer knownHostsMu.Unlock()
		if err := os.MkdirAll(filepath.Dir(record), 0o700); err != nil {
			return fmt.Errorf("remote: recording the host key of %s: %w", h.Alias, err)
		}
		f, err := atomicfile.OpenAppend(record)
		if err != nil {
			return fmt.Errorf("remote: recording the host key of %s: %w", h.Alias, err)
		}
		defer f.Close()
		_, err = f.WriteString(line + "\n")
		return err
	}
	return cb, algos, nil
}

// realNames puts back in the library's message the real files' names for
// the copies' in real. The library follows a name with ":" (name:line, or
// name: why), which is kept in what is replaced: /proc/self/fd/5 is the
// start of /proc/self/fd/50.
func realNames(msg string, real map[string]string) string {
	for name, f := range real {
		msg = strings.ReplaceAll(msg, name+":", f+":")
	}
	return msg
}

// copyKnownHosts copies what r (the known_hosts file at path) holds, at
// most maxKnownHosts bytes, to a private copy (privateCopy), and returns
// its name and what drops it.
func copyKnownHosts(r io.Reader, path string) (string, func(), error) {
	b, err := io.ReadAll(io.LimitReader(r, maxKnownHosts+1))
	if err != nil {
		return "", nil, fmt.Errorf("remote: reading known_hosts %s: %w", path, err)
	}
	if len(b) > maxKnownHosts {
		return "", nil, fmt.Errorf("remote: known_hosts %s is more than %d bytes", path, maxKnownHosts)
	}
	name, drop, err := privateCopy(b)
	if err != nil {
		return "", nil, fmt.Errorf("remote: copying known_hosts %s: %w", path, err)
	}
	return name, drop, nil
}

// tempCopy writes b to a new file in $TMPDIR that only this user reads,
// and returns its name and what removes it.
func tempCopy(b []byte) (string, func(), error) {
	tmp, err := os.CreateTemp("", "replhub-known_hosts-")
	if err != nil {
		return "", nil, err
	}
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	name := tmp.Name()
	if err != nil {
		os.Remove(name)
		return "", nil, err
	}
	return name, func() { os.Remove(name) }, nil
}

// proxyConn is a ProxyCommand's stdio used as a net.Conn.
type proxyConn struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    io.ReadCloser
	stderr *bytes.Buffer
	mu     sync.Mutex
	once   sync.Once
}

func startProxyCommand(command string) (*proxyConn, error) {
	cmd := exec.Command("/bin/sh", "-c", "exec "+command)
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	pc := &proxyConn{cmd: cmd, in: in, out: out, stderr: &bytes.Buffer{}}
	cmd.Stderr = &lockedWriter{w: pc.stderr, mu: &pc.mu}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("ProxyCommand %q: %w", command, err)
	}
	return pc, nil
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if b, ok := l.w.(*bytes.Buffer); ok && b.Len() > 4096 {
		return len(p), nil
	}
	return l.w.Write(p)
}

func (p *proxyConn) stderrText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.TrimSpace(p.stderr.String())
}

func (p *proxyConn) Read(b []byte) (int, error)  { return p.out.Read(b) }
func (p *proxyConn) Write(b []byte) (int, error) { return p.in.Write(b) }

// Close ends the command and reaps it.
func (p *proxyConn) Close() error {
	p.once.Do(func() {
		p.in.Close()
		p.out.Close()
		p.cmd.Process.Kill()
		p.cmd.Wait()
	})
	return nil
}

func (p *proxyConn) LocalAddr() net.Addr                { return proxyAddr{} }
func (p *proxyConn) RemoteAddr() net.Addr               { return proxyAddr{} }
func (p *proxyConn) SetDeadline(t time.Time) error      { return nil }
func (p *proxyConn) SetReadDeadline(t time.Time) error  { return nil }
func (p *proxyConn) SetWriteDeadline(t time.Time) error { return nil }

type proxyAddr struct{}

func (proxyAddr) Network() string { return "proxy" }
func (proxyAddr) String() string  { return "proxy:0" }
