package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/tests/sshtest"
	"github.com/replhub/replhub/wire"
)

func init() {
	measureAlone("fanout", "measure only a cell on 32 hosts at once, against one host and against 32 ssh processes",
		func(w *world, n int) ([]row, error) { return fanoutRows(w, min(n, 5)) })
}

// fanHosts is how many hosts the fan-out figures use: two sshd's on
// loopback, 16 ports each, every port a host of its own.
const fanHosts = 32

// fanoutRows measures one cell on 32 hosts: the first start of a session
// on each against the first start on one, a warm cell on all against a
// warm round trip on one, and the first start against 32 concurrent
// `ssh HOST python3 -c pass`.
func fanoutRows(w *world, n int) ([]row, error) {
	return withSSHD("fan-out benchmarks", func(tb *benchTB) ([]row, error) { return fanoutRowsWith(tb, w, n) })
}

func fanoutRowsWith(tb *benchTB, w *world, n int) (rows []row, err error) {
	home := filepath.Join(w.root, "fan-home")
	key := sshtest.NewKey(tb, filepath.Join(home, ".ssh", "id_ed25519"), "")
	u, _ := user.Current()
	var cfg, known []string
	for i := 0; i < 2; i++ {
		s := sshtest.Start(tb, sshtest.Options{Authorized: []string{key.Public}, MorePorts: fanHosts/2 - 1})
		for _, p := range s.Ports {
			cfg = append(cfg, fmt.Sprintf("Host h-%d\n  HostName 127.0.0.1\n  Port %d\n  User %s\n", len(known)+1, p, u.Username))
			known = append(known, s.KnownHostsLineAt(p))
		}
	}
	cfg = append(cfg, fmt.Sprintf("Host *\n  IdentityFile %s\n  UserKnownHostsFile %s\n", key.Path, filepath.Join(home, ".ssh", "known_hosts")))
	sshCfg := filepath.Join(home, ".ssh", "config")
	os.WriteFile(sshCfg, []byte(strings.Join(cfg, "\n")), 0o600)
	os.WriteFile(filepath.Join(home, ".ssh", "known_hosts"), []byte(strings.Join(known, "\n")+"\n"), 0o600)
	os.MkdirAll(filepath.Join(w.root, "config", "replhub"), 0o700)
	os.WriteFile(filepath.Join(w.root, "config", "replhub", "config.json"), []byte(`{"swap_after_hours": 0, "linger": 0}`), 0o600)
	w.env = append(w.env, "HOME="+home, "SSH_AUTH_SOCK=")
	w.c.Env = w.env
	ctx := context.Background()
	one := client.ExecOptions{Cwd: w.cwd, Env: w.env, Host: "h-1", Python: w.py}
	all := client.ExecOptions{Cwd: w.cwd, Env: w.env, Hosts: fmt.Sprintf("h-[1-%d]", fanHosts), Python: w.py}
	fan := func(code string, o client.ExecOptions) error {
		res, err := w.c.Exec(ctx, "all", code, o)
		if err == nil && res.Status != wire.StatusOK {
			err = fmt.Errorf("a cell on %d hosts: %s", fanHosts, res.Text())
		}
		return err
	}

	// First starts, a new route each (the hub restarted), interleaved.
	var firstOne, firstAll []time.Duration
	for i := 0; i < n; i++ {
		for _, many := range []bool{false, true} {
			w.c.Stop(ctx)
			if err := w.c.Ping(ctx); err != nil {
				return nil, err
			}
			t0 := time.Now()
			if many {
				err = fan("pass", all)
				firstAll = append(firstAll, time.Since(t0))
			} else {
				_, err = w.c.Exec(ctx, "one", "pass", one)
				firstOne = append(firstOne, time.Since(t0))
			}
			if err != nil {
				return nil, err
			}
		}
	}
	fOne, fAll := median(firstOne), median(firstAll)
	rows = append(rows, row{fmt.Sprintf("first start of a session on %d hosts (exec --hosts)", fanHosts), ms(fAll),
		"on one host " + ms(fOne), fmt.Sprintf("%.2fx", float64(fAll)/float64(fOne)), "at most 2x"},
		row{fmt.Sprintf("first start on %d hosts", fanHosts), ms(fAll), fmt.Sprintf("%d x the start on one host %s", fanHosts, ms(fanHosts*fOne)),
			fmt.Sprintf("%.1fx faster", float64(fanHosts*fOne)/float64(fAll)), "(every host is this machine: their starts share its cores)"})

	// Warm cells: the group and the single session are both up now.
	if _, err := w.c.Exec(ctx, "one", "pass", one); err != nil {
		return nil, err
	}
	var warmOne, warmAll []time.Duration
	for i := 0; i < 100; i++ {
		t0 := time.Now()
		if _, err := w.c.Exec(ctx, "one", "1", one); err != nil {
			return nil, err
		}
		warmOne = append(warmOne, time.Since(t0))
		t0 = time.Now()
		if err := fan("1", client.ExecOptions{Cwd: w.cwd}); err != nil {
			return nil, err
		}
		warmAll = append(warmAll, time.Since(t0))
	}
	wOne, wAll := median(warmOne), median(warmAll)
	rows = append(rows, row{fmt.Sprintf("warm cell on %d sessions", fanHosts), us(wAll), "warm round trip on one " + us(wOne),
		fmt.Sprintf("%.2fx", float64(wAll)/float64(wOne)), "at most 3x"})
	// The same cells one after another: what the group saves. Every host
	// here is this machine, so the hosts' own work shares its cores.
	var inTurn []time.Duration
	for i := 0; i < 10; i++ {
		t0 := time.Now()
		for h := 1; h <= fanHosts; h++ {
			if _, err := w.c.Exec(ctx, fmt.Sprintf("all@h-%d", h), "1", client.ExecOptions{Cwd: w.cwd}); err != nil {
				return nil, err
			}
		}
		inTurn = append(inTurn, time.Since(t0))
	}
	rows = append(rows, row{fmt.Sprintf("warm cell on %d sessions", fanHosts), us(wAll), fmt.Sprintf("the %d cells one after another %s", fanHosts, us(median(inTurn))),
		fmt.Sprintf("%.1fx faster", float64(median(inTurn))/float64(wAll)), ""})

	// 32 ssh processes at once, each a new connection running python -c pass.
	var sshAll []time.Duration
	for i := 0; i < n; i++ {
		t0 := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, fanHosts)
		for h := 1; h <= fanHosts; h++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cmd := exec.Command("ssh", "-F", sshCfg, "-o", "ControlMaster=no", fmt.Sprintf("h-%d", h), w.py, "-c", "pass")
				cmd.Env = w.env
				if out, err := cmd.CombinedOutput(); err != nil {
					errs <- fmt.Errorf("ssh h-%d: %v: %s", h, err, out)
				}
			}()
		}
		wg.Wait()
		sshAll = append(sshAll, time.Since(t0))
		close(errs)
		if err := <-errs; err != nil {
			return nil, err
		}
	}
	sAll := median(sshAll)
	rows = append(rows, row{fmt.Sprintf("first start on %d hosts", fanHosts), ms(fAll),
		fmt.Sprintf("%d concurrent `ssh -o ControlMaster=no HOST python3 -c pass` %s", fanHosts, ms(sAll)),
		fmt.Sprintf("%.2fx", float64(fAll)/float64(sAll)), "close to 1x"})
	return rows, nil
}
