// Package sshtest starts real OpenSSH sshd processes on loopback for
// end-to-end tests: own host keys, own authorized_keys, own config, one
// process per server, each ended by its pid in t.Cleanup. Where sshd is
// missing a test is skipped, except in CI (CI set), where it fails.
package sshtest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// TB is what the helpers need of a test; *testing.T and *testing.B have
// it, and so can a benchmark program.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
	Cleanup(func())
}

// SSHD is the sshd binary.
const SSHD = "/usr/sbin/sshd"

// Need skips (or, in CI, fails) a test on a machine without sshd and
// ssh-keygen.
func Need(t TB) {
	t.Helper()
	for _, p := range []string{SSHD, "ssh-keygen"} {
		if _, err := exec.LookPath(p); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("CI needs %s (apt-get install openssh-server): %v", p, err)
			}
			t.Skipf("needs %s: %v", p, err)
		}
	}
}

// Key is a key pair made by ssh-keygen.
type Key struct {
	Path   string // the private key; Path+".pub" the public one
	Public string // the public key line
}

// NewKey makes an ed25519 key at path, protected by passphrase if non-empty.
func NewKey(t TB, path, passphrase string) Key {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o700)
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", "replhub-test", "-f", path).CombinedOutput()
	if err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(path + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return Key{Path: path, Public: strings.TrimSpace(string(pub))}
}

// Options configure a server.
type Options struct {
	// Authorized are public key lines allowed to log in.
	Authorized []string
	// SetEnv are variables sshd sets for sessions (e.g. BASH_ENV, to make a
	// login's rc files print noise).
	SetEnv map[string]string
	// Extra lines for sshd_config.
	Extra []string
	// MorePorts is how many loopback ports the server listens on besides
	// Port (Server.Ports), each a host of its own to a client: sshd takes
	// at most 15 more.
	MorePorts int
}

// Server is one running sshd.
type Server struct {
	t       TB
	Dir     string
	Port    int
	Pid     int
	HostKey Key
	// Ports are Port and the MorePorts, in that order.
	Ports []int
	cmd   *exec.Cmd
}

// Start starts an sshd on 127.0.0.1 and waits until it accepts.
func Start(t TB, o Options) *Server {
	t.Helper()
	Need(t)
	dir, err := os.MkdirTemp("", "sshd-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{t: t, Dir: dir}
	s.HostKey = NewKey(t, filepath.Join(dir, "host_ed25519"), "")
	// sshd reads authorized_keys as the user logging in, who may not be
	// the one running the test.
	os.Chmod(dir, 0o755)
	auth := filepath.Join(dir, "authorized_keys")
	if err := os.WriteFile(auth, []byte(strings.Join(o.Authorized, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		os.MkdirAll("/run/sshd", 0o755)
	}
	for attempt := 0; attempt < 5; attempt++ {
		s.Port = freePort(t)
		s.Ports = []int{s.Port}
		var more []string
		for i := 0; i < o.MorePorts; i++ {
			s.Ports = append(s.Ports, FreePort(t))
			more = append(more, fmt.Sprintf("Port %d", s.Ports[i+1]))
		}
		cfg := []string{
			fmt.Sprintf("Port %d", s.Port),
			"ListenAddress 127.0.0.1",
			"HostKey " + s.HostKey.Path,
			"PidFile " + filepath.Join(dir, "sshd.pid"),
			"AuthorizedKeysFile " + auth,
			"PasswordAuthentication no",
			"KbdInteractiveAuthentication no",
			"UsePAM no",
			"StrictModes no",
			"PermitRootLogin prohibit-password",
			"AllowTcpForwarding yes",
			"MaxSessions 64",
			"MaxStartups 64",
			"LogLevel VERBOSE",
			"PrintMotd no",
			"Subsystem sftp internal-sftp",
		}
		// sshd takes the first SetEnv line only: all go on one.
		if len(o.SetEnv) > 0 {
			var kv []string
			for k, v := range o.SetEnv {
				kv = append(kv, fmt.Sprintf("%s=%s", k, v))
			}
			cfg = append(cfg, "SetEnv "+strings.Join(kv, " "))
		}
		cfg = append(append(cfg, more...), o.Extra...)
		conf := filepath.Join(dir, "sshd_config")
		if err := os.WriteFile(conf, []byte(strings.Join(cfg, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		logf, err := os.Create(filepath.Join(dir, "sshd.log"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(SSHD, "-D", "-e", "-f", conf)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatalf("starting sshd: %v", err)
		}
		logf.Close()
		s.cmd, s.Pid = cmd, cmd.Process.Pid
		if s.waitListening() {
			t.Cleanup(s.Stop)
			return s
		}
		// Its folder stays for the next attempt (a port taken meanwhile).
		s.kill()
	}
	log, _ := os.ReadFile(filepath.Join(dir, "sshd.log"))
	os.RemoveAll(dir)
	t.Fatalf("sshd did not start:\n%s", log)
	return nil
}

func (s *Server) waitListening() bool {
	exited := make(chan struct{})
	go func() { s.cmd.Wait(); close(exited) }()
	for i := 0; i < 250; i++ {
		select {
		case <-exited:
			return false
		default:
		}
		c, err := net.DialTimeout("tcp", s.Addr(), 100*time.Millisecond)
		if err == nil {
			c.Close()
			// Every port is sshd's (another process may have taken one
			// since it was found free): the log says so.
			if all, failed := s.listening(); failed {
				return false
			} else if all {
				return true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// listening reads the log: whether sshd listens on all its ports, and
// whether it failed to bind one.
func (s *Server) listening() (all, failed bool) {
	log := s.Log()
	all = true
	for _, p := range s.Ports[1:] {
		if strings.Contains(log, fmt.Sprintf("Bind to port %d ", p)) {
			return false, true
		}
		if !strings.Contains(log, fmt.Sprintf("listening on 127.0.0.1 port %d.", p)) {
			all = false
		}
	}
	return all, false
}

// Stop kills the server and every session process it started, and
// removes its folder.
func (s *Server) Stop() {
	s.kill()
	os.RemoveAll(s.Dir)
}

// kill kills the server and every session process it started.
func (s *Server) kill() {
	for _, pid := range s.Children() {
		syscall.Kill(pid, syscall.SIGCONT)
		syscall.Kill(pid, syscall.SIGKILL)
	}
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Kill()
		time.Sleep(10 * time.Millisecond)
	}
}

// Addr is 127.0.0.1:port.
func (s *Server) Addr() string { return fmt.Sprintf("127.0.0.1:%d", s.Port) }

// KnownHostsLine trusts this server's host key.
func (s *Server) KnownHostsLine() string { return s.KnownHostsLineAt(s.Port) }

// KnownHostsLineAt trusts this server's host key at another loopback port
// (a Relay's in front of it).
func (s *Server) KnownHostsLineAt(port int) string {
	return fmt.Sprintf("[127.0.0.1]:%d %s", port, strings.Join(strings.Fields(s.HostKey.Public)[:2], " "))
}

// Log is what sshd has logged so far.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "sshd.log"))
	return string(b)
}

// Connections counts established TCP connections to the server's port.
func (s *Server) Connections() int {
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		file, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) < 4 || fields[3] != "01" {
				continue
			}
			if i := strings.LastIndexByte(fields[1], ':'); i >= 0 {
				if p, err := strconv.ParseInt(fields[1][i+1:], 16, 32); err == nil && int(p) == s.Port {
					n++
				}
			}
		}
		file.Close()
	}
	return n
}

// Children are the pids of the processes the server started (one sshd per
// connection), found through /proc.
func (s *Server) Children() []int {
	return Descendants(s.Pid)
}

// Descendants lists every process below pid.
func Descendants(pid int) []int {
	parents := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		st := string(b)
		i := strings.LastIndexByte(st, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(st[i+2:])
		if len(f) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(f[1])
		parents[pp] = append(parents[pp], p)
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range parents[p] {
			out = append(out, c)
			walk(c)
		}
	}
	walk(pid)
	return out
}

// Cmdline is a process's command line, spaces for NULs.
func Cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.ReplaceAll(string(b), "\x00", " ")
}

// FreePort is a loopback port nothing listens on, as of now.
func FreePort(t TB) int { return freePort(t) }

func freePort(t TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
