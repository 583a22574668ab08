package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
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
	// CPU time is counted too: on a loaded machine wall times wander, and
	// it says where a start's time goes (the worker's own start, the hub,
	// the CLI process).
	var cpu cpuSum
	pass := func() error {
		return parallel(manyCount, func(i int) error {
			cmd := exec.Command(w.py, "-c", "pass")
			if out, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("python3 -c pass: %v\n%s", err, out)
			}
			cpu.add(cpuOf(cmd.ProcessState))
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
			cpu.add(cpuOf(cmd.ProcessState))
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
	var base, byCLI, byPkg, passCPU, cliCPU, workerCPU, hubCPU []time.Duration
	var rss, hwm int64
	var list, listExec time.Duration
	pid := hubPid(w)
	for r := 0; r < rounds; r++ {
		cpu.take()
		d, err := timed(pass)
		if err != nil {
			return nil, err
		}
		base, passCPU = append(base, d), append(passCPU, cpu.take()/manyCount)
		if d, err = timed(func() error { return cli(r) }); err != nil {
			return nil, err
		}
		byCLI, cliCPU = append(byCLI, d), append(cliCPU, cpu.take()/manyCount)
		killAll(fmt.Sprintf("cli-%d", r))
		hub0 := procCPU(pid)
		if d, err = timed(func() error { return pkg(r) }); err != nil {
			return nil, err
		}
		byPkg, hubCPU = append(byPkg, d), append(hubCPU, (procCPU(pid)-hub0)/manyCount)
		l, err := w.c.SessionNames(ctx)
		if err != nil {
			return nil, err
		}
		var workers time.Duration
		for _, s := range l.Sessions {
			if strings.HasPrefix(s.Name, fmt.Sprintf("pkg-%d-", r)) {
				workers += procCPU(s.Pid)
			}
		}
		workerCPU = append(workerCPU, workers/manyCount)
		if r == rounds-1 {
			time.Sleep(5 * time.Second) // idle: the hub trims its heap (hub/trim.go)
			if rss, hwm = procKB(pid, "VmRSS"), procKB(pid, "VmHWM"); rss == 0 || hwm == 0 {
				return nil, fmt.Errorf("no VmRSS/VmHWM in /proc/%d/status", pid)
			}
			// The list an agent reads first tells each session's memory,
			// from /proc: against a warm exec, in turn.
			one := fmt.Sprintf("pkg-%d-0", r)
			if list, listExec, err = w.pair(30, []string{w.bin, "sessions"}, []string{w.bin, "exec", one, "1"}); err != nil {
				return nil, err
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
		{"CPU of one of them: its worker + the hub", fmt.Sprintf("%s + %s", ms(median(workerCPU)), ms(median(hubCPU))),
			"`python3 -c pass` " + ms(median(passCPU)), fmt.Sprintf("%.2fx", float64(median(workerCPU)+median(hubCPU))/float64(median(passCPU))), ""},
		{"CPU of one `replhub exec` process", ms(median(cliCPU)), "", "", ""},
		{fmt.Sprintf("the hub's memory with %d idle sessions (VmRSS)", manyCount), mb(rss), "", "", "at most 18 MB"},
		{fmt.Sprintf("`replhub sessions` with %d sessions live", manyCount), ms(list), "a warm `replhub exec` " + ms(listExec),
			fmt.Sprintf("%.2fx", float64(list)/float64(listExec)), ""},
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

// cpuSum adds up the CPU time of processes that end in parallel.
type cpuSum struct {
	mu  sync.Mutex
	sum time.Duration
}

func (c *cpuSum) add(d time.Duration) {
	c.mu.Lock()
	c.sum += d
	c.mu.Unlock()
}

// take returns the sum and starts a new one.
func (c *cpuSum) take() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	d := c.sum
	c.sum = 0
	return d
}

func cpuOf(ps *os.ProcessState) time.Duration { return ps.UserTime() + ps.SystemTime() }

// procCPU is the CPU time a live process has used (user and system, from
// /proc/PID/stat, in clock ticks of 10 ms); 0 when it cannot be read.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, in parentheses, may hold spaces: the fields
	// follow the last ')'. utime and stime are fields 14 and 15.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}
