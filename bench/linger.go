package main

import (
	"context"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/tests/sshtest"
)

// lingerRows measures a reattach: a remote session behind a relay whose
// path is cut and restored; the time from the path's return to the
// session answering a cell (the exec that finds the link down tries at
// once), against one OpenSSH connection to the same host in the same run.
func lingerRows(w *world, n int) ([]row, error) {
	return withSSHD("reattach benchmark", func(tb *benchTB) ([]row, error) { return lingerRowsWith(tb, w, n) })
}

func lingerRowsWith(tb *benchTB, w *world, n int) (rows []row, err error) {
	home := filepath.Join(w.root, "home-linger")
	key := sshtest.NewKey(tb, filepath.Join(home, ".ssh", "id_ed25519"), "")
	srv := sshtest.Start(tb, sshtest.Options{Authorized: []string{key.Public}})
	relay := sshtest.NewRelay(tb, srv.Addr())
	u, _ := user.Current()
	known := filepath.Join(home, ".ssh", "known_hosts")
	cfg := fmt.Sprintf("Host lab\n  HostName 127.0.0.1\n  Port %d\n  User %s\n  IdentityFile %s\n  UserKnownHostsFile %s\n  ControlMaster no\n  ControlPath none\n",
		relay.Port, u.Username, key.Path, known)
	sshCfg := filepath.Join(home, ".ssh", "config")
	os.WriteFile(sshCfg, []byte(cfg), 0o600)
	os.WriteFile(known, []byte(srv.KnownHostsLineAt(relay.Port)+"\n"), 0o600)
	env := append(append([]string(nil), w.env...), "HOME="+home, "SSH_AUTH_SOCK=")
	c := client.New(w.c.Paths)
	c.Exe, c.Env = w.bin, env
	defer c.Close()
	ctx := context.Background()
	o := client.ExecOptions{Cwd: w.cwd, Env: env, Host: "lab", Python: w.py}
	if _, err := c.Exec(ctx, "far", "x = 41", o); err != nil {
		return nil, err
	}
	defer c.Kill(ctx, "far")

	handshake, err := w.timeCmd(n, "ssh", "-F", sshCfg, "lab", "true")
	if err != nil {
		return nil, err
	}
	var ds []time.Duration
	for i := 0; i < n; i++ {
		relay.Drop()
		// Both ends see the link go (the hub at once, the worker when
		// sshd closes its pipes).
		time.Sleep(300 * time.Millisecond)
		relay.Restore()
		t0 := time.Now()
		res, err := c.Exec(ctx, "far", "x + 1", o)
		if err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(t0))
		if !strings.Contains(res.Text(), "42") {
			return nil, fmt.Errorf("after a reattach the session answered %q", res.Text())
		}
	}
	re := median(ds)
	return []row{{"reattach after the link is back (exec answered)", ms(re),
		"`ssh lab true` " + ms(handshake), fmt.Sprintf("%+.0f ms over one ssh connection", float64((re-handshake).Microseconds())/1000),
		"≤ one ssh handshake + 200 ms"}}, nil
}
