package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"time"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/payload"
	"github.com/replhub/replhub/tests/sshtest"
)

// benchTB lets the sshtest helpers run outside a test: a fatal error ends
// the benchmark, cleanups run at the end.
type benchTB struct{ cleanups []func() }

func (b *benchTB) Helper()                           {}
func (b *benchTB) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }
func (b *benchTB) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (b *benchTB) Skipf(format string, args ...any) {
	panic("skipped: " + fmt.Sprintf(format, args...))
}
func (b *benchTB) Cleanup(f func()) { b.cleanups = append(b.cleanups, f) }
func (b *benchTB) close() {
	for i := len(b.cleanups) - 1; i >= 0; i-- {
		b.cleanups[i]()
	}
}

// withSSHD runs do with a benchTB for the sshtest helpers: its cleanups
// run when do returns, and a fatal error of theirs becomes the error,
// named by what. Without sshd it fails at once.
func withSSHD(what string, do func(tb *benchTB) ([]row, error)) (rows []row, err error) {
	if _, err := exec.LookPath(sshtest.SSHD); err != nil {
		return nil, fmt.Errorf("%s: needs sshd (apt-get install openssh-server)", what)
	}
	tb := &benchTB{}
	defer tb.close()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: %v", what, r)
		}
	}()
	return do(tb)
}

// oneHost starts a loopback sshd known as alias to ssh in a home of its
// own, its sessions given hostEnv (none when nil), and returns w's
// environment with that home, and its ssh_config (whose ControlPath is
// used only where ssh is asked for a master).
func oneHost(tb *benchTB, w *world, alias, home string, hostEnv map[string]string) (env []string, sshCfg string) {
	key := sshtest.NewKey(tb, filepath.Join(home, ".ssh", "id_ed25519"), "")
	srv := sshtest.Start(tb, sshtest.Options{Authorized: []string{key.Public}, SetEnv: hostEnv})
	u, _ := user.Current()
	cfg := fmt.Sprintf("Host %s\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n  UserKnownHostsFile %s\n  ControlPath %s\n",
		alias, srv.Port, u.Username, key.Path, filepath.Join(home, ".ssh", "known_hosts"), filepath.Join(home, "cm-%p"))
	sshCfg = filepath.Join(home, ".ssh", "config")
	os.WriteFile(sshCfg, []byte(cfg), 0o600)
	os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"), []byte(srv.KnownHostsLine()+"\n"), 0o600)
	return append(append([]string(nil), w.env...), "HOME="+home, "SSH_AUTH_SOCK="), sshCfg
}

// remoteRows measures remote sessions against OpenSSH on loopback sshd's.
func remoteRows(w *world, n int, localRT time.Duration) ([]row, error) {
	return withSSHD("remote benchmarks", func(tb *benchTB) ([]row, error) { return remoteRowsWith(tb, w, n, localRT) })
}

func remoteRowsWith(tb *benchTB, w *world, n int, localRT time.Duration) (rows []row, err error) {
	home := filepath.Join(w.root, "home")
	key := sshtest.NewKey(tb, filepath.Join(home, ".ssh", "id_ed25519"), "")
	gw := sshtest.Start(tb, sshtest.Options{Authorized: []string{key.Public}})
	target := sshtest.Start(tb, sshtest.Options{Authorized: []string{key.Public}})
	u, _ := user.Current()
	cfg := fmt.Sprintf("Host gw\n  HostName 127.0.0.1\n  Port %d\n  User %s\nHost target\n  HostName 127.0.0.1\n  Port %d\n  User %s\nHost *\n  IdentityFile %s\n  UserKnownHostsFile %s\n  ControlPath %s\n",
		gw.Port, u.Username, target.Port, u.Username, key.Path, filepath.Join(home, ".ssh", "known_hosts"), filepath.Join(home, "cm-%p"))
	os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(cfg), 0o600)
	os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"), []byte(gw.KnownHostsLine()+"\n"+target.KnownHostsLine()+"\n"), 0o600)
	w.env = append(w.env, "HOME="+home, "SSH_AUTH_SOCK=")
	w.c.Env = w.env
	sshCfg := filepath.Join(home, ".ssh", "config")
	o := client.ExecOptions{Cwd: w.cwd, Env: w.env, Host: "target", Python: w.py}

	if !*objectsOnly {
		rr, err := routeRows(w, n, localRT, sshCfg, o)
		if err != nil {
			return nil, err
		}
		rows = append(rows, rr...)
	}

	or, err := objectRows(w, sshCfg, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
	rows = append(rows, or...)

	pl, err := payload.Default()
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{"payload on the wire", fmt.Sprintf("%.1f KiB", float64(len(pl))/1024),
		"", "", "under 32 KiB (late modules come at their first import)"})
	return rows, nil
}

// loopbackPing is the median round trip of one byte over loopback TCP.
func loopbackPing() time.Duration {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		b := make([]byte, 1)
		for {
			if _, err := c.Read(b); err != nil {
				return
			}
			c.Write(b)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0
	}
	defer c.Close()
	b := make([]byte, 1)
	var ds []time.Duration
	for i := 0; i < 1000; i++ {
		t0 := time.Now()
		c.Write(b)
		c.Read(b)
		ds = append(ds, time.Since(t0))
	}
	return median(ds)
}

// routeRows measures remote sessions against OpenSSH: a new route, a
// further session on an open one, a warm round trip and a jump's cost.
func routeRows(w *world, n int, localRT time.Duration, sshCfg string, o client.ExecOptions) (rows []row, err error) {
	ctx := context.Background()
	remotePy := o.Python
	// A new route: the hub is restarted, so each start dials afresh.
	ds, err := firstStarts(w, n, o)
	if err != nil {
		return nil, err
	}
	first := median(ds)
	sshCold, err := w.timeCmd(n, "ssh", "-F", sshCfg, "-o", "ControlMaster=no", "target", remotePy, "-c", "pass")
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{"first remote session on a new route", ms(first), "`ssh -o ControlMaster=no HOST python3 -c pass` " + ms(sshCold),
		fmt.Sprintf("%.2fx", float64(first)/float64(sshCold)), "at most 1.0x"})

	// A further session on the open route vs python3 -c pass over an open
	// ControlMaster connection.
	further, sshWarm, err := furtherSessions(w, n, o, sshCfg, "target", remotePy)
	if err != nil {
		return nil, err
	}
	rows = append(rows, furtherRow(further, sshWarm))

	// Warm round trip of a trivial remote cell vs the local one plus a ping
	// (here: an ssh round trip, a keepalive's worth).
	ds = ds[:0]
	for i := 0; i < 1000; i++ {
		t0 := time.Now()
		if _, err := w.c.Exec(ctx, "first", "1", o); err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(t0))
	}
	rt := median(ds)
	ping := loopbackPing()
	rows = append(rows, row{"warm round trip of a trivial remote cell", us(rt), fmt.Sprintf("local %s, ping %s", us(localRT), us(ping)),
		fmt.Sprintf("%.2fx (local x2 + ping)", float64(rt)/float64(2*localRT+ping)), "at most 1.0x of 2x local + one ping"})

	// One jump added.
	oj := o
	jump := []string{"gw"}
	oj.Jump = &jump
	ds = ds[:0]
	for i := 0; i < n; i++ {
		w.c.Stop(ctx)
		if err := w.c.Ping(ctx); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if _, err := w.c.Exec(ctx, "jumped", "pass", oj); err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(t0))
	}
	jumped := median(ds)
	rows = append(rows, row{"first session through one jump host", ms(jumped), "direct " + ms(first),
		fmt.Sprintf("+%s", ms(jumped-first)), "the jump's cost"})

	return rows, nil
}
