package main

import (
	"context"
	"fmt"
	"os/exec"
	"sync"
	"time"

	"github.com/replhub/replhub/client"
)

func init() {
	measureAlone("many", "measure only 50 sessions started at once (CLI and client package) and the hub's memory with them",
		func(w *world, n int) ([]row, error) { return manyRows(w, min(n, 7)) })
}

// manyCount is how many sessions start at once.
const manyCount = 50

// manyRows measures 50 sessions started at once: as 50 concurrent
// `replhub exec sN 1` processes and as 50 concurrent client-package
// calls, each against 50 concurrent `python3 -c pass` in the same run,
// rounds interleaved so that a busy moment of the machine weighs on both;
// and the hub's resident memory (now and at its peak) with 50 idle
// sessions.
func manyRows(w *world, rounds int) ([]row, error) {
	ctx := context.Background()
	if err := w.c.Ping(ctx); err != nil {
		return nil, err
	}
	pass := func() error {
		return parallel(manyCount, func(i int) error {
			if out, err := exec.Command(w.py, "-c", "pass").CombinedOutput(); err != nil {
				return fmt.Errorf("python3 -c pass: %v\n%s", err, out)
			}
			return nil
		})
	}
	cli := func(round int) error {
		return parallel(manyCount, func(i int) error {
			cmd := exec.Command(w.bin, "exec", fmt.Sprintf("cli-%d-%d", round, i), "1")
			cmd.Env, cmd.Dir = w.env, w.cwd
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("replhub exec: %v\n%s", err, out)
			}
			return nil
		})
	}
	pkg := func(round int) error {
		return parallel(manyCount, func(i int) error {
			c := client.New(w.c.Paths)
			c.Exe, c.Env = w.bin, w.env
			defer c.Close()
			_, err := c.Exec(ctx, fmt.Sprintf("pkg-%d-%d", round, i), "1", client.ExecOptions{Cwd: w.cwd, Env: w.env})
			return err
		})
	}
	killAll := func(prefix string) {
		parallel(manyCount, func(i int) error {
			w.c.Kill(ctx, fmt.Sprintf("%s-%d", prefix, i))
			return nil
		})
	}
	var base, byCLI, byPkg []time.Duration
	var rss, hwm int64
	for r := 0; r < rounds; r++ {
		d, err := timed(pass)
		if err != nil {
			return nil, err
		}
		base = append(base, d)
		if d, err = timed(func() error { return cli(r) }); err != nil {
			return nil, err
		}
		byCLI = append(byCLI, d)
		killAll(fmt.Sprintf("cli-%d", r))
		if d, err = timed(func() error { return pkg(r) }); err != nil {
			return nil, err
		}
		byPkg = append(byPkg, d)
		if r == rounds-1 {
			time.Sleep(5 * time.Second) // idle: the hub trims its heap (hub/trim.go)
			pid := hubPid(w)
			if rss, hwm = procKB(pid, "VmRSS"), procKB(pid, "VmHWM"); rss == 0 || hwm == 0 {
				return nil, fmt.Errorf("no VmRSS/VmHWM in /proc/%d/status", pid)
			}
		}
		killAll(fmt.Sprintf("pkg-%d", r))
	}
	b := median(base)
	baseline := fmt.Sprintf("%d parallel `python3 -c pass` %s", manyCount, ms(b))
	ratio := func(d time.Duration) string { return fmt.Sprintf("%.2fx", float64(d)/float64(b)) }
	mb := func(kb int64) string { return fmt.Sprintf("%.1f MB", float64(kb)/1024) }
	return []row{
		{fmt.Sprintf("%d sessions started at once, `replhub exec sN 1` in parallel", manyCount), ms(median(byCLI)), baseline, ratio(median(byCLI)), "at most 1.3x"},
		{fmt.Sprintf("%d sessions started at once, client package", manyCount), ms(median(byPkg)), baseline, ratio(median(byPkg)), "at most 1.3x"},
		{fmt.Sprintf("the hub's memory with %d idle sessions (VmRSS)", manyCount), mb(rss), "", "", "at most 18 MB"},
		{fmt.Sprintf("the hub's peak memory after %d rounds of %d starts (VmHWM)", rounds*2, manyCount), mb(hwm), "", "", ""},
	}, nil
}

// parallel runs f(0) … f(n-1) at once and returns the first error.
func parallel(n int, f func(i int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := f(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func timed(f func() error) (time.Duration, error) {
	t0 := time.Now()
	err := f()
	return time.Since(t0), err
}
