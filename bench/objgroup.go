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

// groupHosts is how many sessions the group figure puts to: one loopback
// sshd, a port each.
const groupHosts = 3

// objgroupRounds runs in a local session: n interleaved rounds of a group
// put of 100 MB of bytes to the sessions GRP@g-1 … and of one put to each
// of them after another; it prints the medians in seconds.
const objgroupRounds = `import os, time
blob = os.urandom(100 * 1000 * 1000)
g = sessions_on("g-[1-%[1]d]", name="grp", python=%[2]q)
assert len(g.hosts) == %[1]d and all(v is None for v in g.put(warm=b"").values()), g
def timed(fn):
    t0 = time.perf_counter(); fn(); return time.perf_counter() - t0
def rounds(n):
    r = {"group": [], "single": []}
    for _ in range(n):
        r["group"].append(timed(lambda: g.put(blob=blob)))
        r["single"].append(timed(lambda: [g.session(h).put(blob=blob) for h in g.hosts]))
    assert all(v == len(blob) for v in g.call(lambda: len(globals()["blob"])).values())
    return " ".join("%%s=%%f" %% (k, sorted(v)[len(v) // 2]) for k, v in r.items())
rounds(%[3]d)`

// objgroupRows measures a group's put of 100 MB to groupHosts sessions
// behind sshd against as many single puts one after another: the object
// is pickled once and each session's part streams at its own pace.
func objgroupRows(tb *benchTB, w *world, n int) ([]row, error) {
	home := filepath.Join(w.root, "home-objgroup")
	key := sshtest.NewKey(tb, filepath.Join(home, ".ssh", "id_ed25519"), "")
	srv := sshtest.Start(tb, sshtest.Options{Authorized: []string{key.Public}, MorePorts: groupHosts - 1})
	u, _ := user.Current()
	var cfg, known []string
	for i, p := range srv.Ports {
		cfg = append(cfg, fmt.Sprintf("Host g-%d\n  HostName 127.0.0.1\n  Port %d\n  User %s\n", i+1, p, u.Username))
		known = append(known, srv.KnownHostsLineAt(p))
	}
	cfg = append(cfg, fmt.Sprintf("Host *\n  IdentityFile %s\n  UserKnownHostsFile %s\n", key.Path, filepath.Join(home, ".ssh", "known_hosts")))
	os.WriteFile(filepath.Join(home, ".ssh", "config"), []byte(strings.Join(cfg, "\n")), 0o600)
	os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"), []byte(strings.Join(known, "\n")+"\n"), 0o600)
	env := append(append([]string(nil), w.env...), "HOME="+home, "SSH_AUTH_SOCK=")
	c := client.New(w.c.Paths)
	c.Exe, c.Env = w.bin, env
	defer c.Close()
	ctx := context.Background()
	local := client.ExecOptions{Cwd: w.cwd, Env: env, Python: w.py, Timeout: 600 * time.Second}
	defer c.Kill(ctx, "grp")
	defer c.Kill(ctx, "grouper")
	s, err := figures(c.Exec(ctx, "grouper", fmt.Sprintf(objgroupRounds, groupHosts, w.py, n), local))
	if err != nil {
		return nil, fmt.Errorf("group put benchmark: %w", err)
	}
	rate := func(sec float64) string { return fmt.Sprintf("%.0f MB/s", groupHosts*100/sec) }
	return []row{{fmt.Sprintf("group put of 100 MB bytes to %d sessions behind sshd (median of %d)", groupHosts, n), rate(s["group"]),
		fmt.Sprintf("%d single puts one after another %s", groupHosts, rate(s["single"])),
		fmt.Sprintf("%.2fx the singles", s["single"]/s["group"]), "at least 1x"}}, nil
}
