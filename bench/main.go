// Command bench measures replhub against baselines taken in the same run and
// prints a table of medians and ratios. It builds the binary and runs a
// private hub in a temporary folder; nothing of the user's is touched.
//
//	go run ./bench [-python PATH] [-n RUNS] [-remote=false] [-objects] [-transfers K] [-swap] [-durable] [-linger] [-toolkit] [-query] [-modules] [-queue] [-fanout] [-many] ...
//
// `go run ./bench -h` lists every measurement that runs alone.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/config"
)

var (
	remoteFlag  *bool
	objectsOnly *bool
	transfers   *int
)

func main() {
	python := flag.String("python", "", "interpreter (default: python3's real executable)")
	n := flag.Int("n", 30, "runs per whole-process measurement")
	remoteFlag = flag.Bool("remote", true, "also measure remote sessions against OpenSSH (needs sshd)")
	objectsOnly = flag.Bool("objects", false, "measure only what sessions hand each other (files, objects, calls)")
	transfers = flag.Int("transfers", 3, "rounds of the 1 GiB push/pull and its baselines")
	flag.Parse()
	if err := run(*python, *n); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type world struct {
	bin  string
	env  []string
	cwd  string
	c    *client.Client
	py   string
	root string
	// build is how the binary was built: as README.md installs it.
	build string
}

func setup(python string) (*world, error) {
	root, err := os.MkdirTemp("", "replhub-bench-")
	if err != nil {
		return nil, err
	}
	w := &world{root: root, bin: filepath.Join(root, "replhub"), cwd: root}
	if w.build, err = buildDocumented(w.bin); err != nil {
		return nil, err
	}
	if python == "" {
		out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
		if err != nil {
			return nil, fmt.Errorf("no python3: %v", err)
		}
		python = strings.TrimSpace(string(out))
	}
	w.py = python
	rt := filepath.Join(root, "run")
	os.Mkdir(rt, 0o700)
	vars := map[string]string{"XDG_RUNTIME_DIR": rt, "XDG_STATE_HOME": filepath.Join(root, "state"),
		"XDG_CONFIG_HOME": filepath.Join(root, "config"), "REPLHUB_PYTHON": python, "REPLHUB_SUPERVISOR": "detached"}
	w.env = os.Environ()
	for k, v := range vars {
		w.env = append(w.env, k+"="+v)
	}
	paths, err := config.FromEnv(func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return os.Getenv(k)
	})
	if err != nil {
		return nil, err
	}
	w.c = client.New(paths)
	w.c.Exe, w.c.Env = w.bin, w.env
	return w, nil
}

func (w *world) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w.c.Stop(ctx)
	os.RemoveAll(w.root)
}

// timeCmd runs argv n times and returns the median wall time.
func (w *world) timeCmd(n int, argv ...string) (time.Duration, error) {
	var ds []time.Duration
	for i := 0; i < n; i++ {
		d, err := timeOnce(w, argv...)
		if err != nil {
			return 0, err
		}
		ds = append(ds, d)
	}
	return median(ds), nil
}

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

type row struct {
	what, value, baseline, ratio, goal string
}

func run(python string, n int) error {
	w, err := setup(python)
	if err != nil {
		return err
	}
	defer w.close()
	var rows []row
	fmt.Printf("python %s, %d runs per whole-process figure; the binary built as README.md installs it (%s)\n\n", w.py, n, w.build)

	if picked := pickedAlone(); len(picked) > 0 {
		for _, a := range picked {
			ar, err := a.rows(w, n)
			if err != nil {
				return err
			}
			rows = append(rows, ar...)
		}
		*remoteFlag = false
	} else {
		if !*objectsOnly {
			sr, err := swapRows(w, 5)
			if err != nil {
				return err
			}
			rows = append(rows, sr...)
		}
		var localRT time.Duration
		if !*objectsOnly {
			lr, rt, err := localRows(w, n)
			if err != nil {
				return err
			}
			rows, localRT = append(rows, lr...), rt
		}
		if *remoteFlag {
			rr, err := remoteRows(w, n, localRT)
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
			}
			rows = append(rows, rr...)
		}
	}

	// Round trips on a VM depend on whether its CPUs sat idle between
	// wake-ups: the load says which these figures saw.
	if b, err := os.ReadFile("/proc/loadavg"); err == nil && len(strings.Fields(string(b))) >= 3 {
		fmt.Printf("load average at the end: %s\n", strings.Join(strings.Fields(string(b))[:3], " "))
	}
	fmt.Println("| measurement | replhub (median) | baseline (median) | ratio | goal |")
	fmt.Println("|---|---|---|---|---|")
	for _, r := range rows {
		fmt.Printf("| %s | %s | %s | %s | %s |\n", r.what, r.value, r.baseline, r.ratio, r.goal)
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }
func us(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d.Nanoseconds())/1000) }

// localRows measures local sessions (and root ones, where sudo lets it)
// against a cold python3; it also returns the in-process round trip that
// the remote figures are compared with.
func localRows(w *world, n int) (rows []row, localRT time.Duration, err error) {
	ctx := context.Background()
	// 1. A warm exec as a whole process vs a cold python3 -c.
	if _, err := w.c.Exec(ctx, "warm", "1+1", client.ExecOptions{Cwd: w.cwd, Env: w.env}); err != nil {
		return nil, 0, err
	}
	rh, err := w.timeCmd(n, w.bin, "exec", "warm", "1+1")
	if err != nil {
		return nil, 0, err
	}
	py, err := w.timeCmd(n, w.py, "-c", "print(1+1)")
	if err != nil {
		return nil, 0, err
	}
	rows = append(rows, row{"`replhub exec s '1+1'`, warm session", ms(rh), "`python3 -c 'print(1+1)'` " + ms(py),
		fmt.Sprintf("%.1fx faster", float64(py)/float64(rh)), "at least 4x faster"})

	// 2. In-process round trip of a trivial cell.
	var ds []time.Duration
	for i := 0; i < 2000; i++ {
		t0 := time.Now()
		if _, err := w.c.Exec(ctx, "warm", "1", client.ExecOptions{Cwd: w.cwd, Env: w.env}); err != nil {
			return nil, 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	localRT = median(ds)
	rows = append(rows, row{"in-process round trip of a trivial cell (client package)", us(localRT), "", "", "at most 0.3 ms"})

	// 3. A new session's start vs python3 -c pass, and with the toolkit
	// vs without it (REPLHUB_NO_TK=1), interleaved.
	var bare []time.Duration
	ds = ds[:0]
	noTK := append(append([]string(nil), w.env...), "REPLHUB_NO_TK=1")
	for i := 0; i < n; i++ {
		for j, env := range [][]string{w.env, noTK} {
			name := fmt.Sprintf("new-%d-%d", i, j)
			t0 := time.Now()
			if _, err := w.c.Exec(ctx, name, "pass", client.ExecOptions{Cwd: w.cwd, Env: env}); err != nil {
				return nil, 0, err
			}
			if j == 0 {
				ds = append(ds, time.Since(t0))
			} else {
				bare = append(bare, time.Since(t0))
			}
			w.c.Kill(ctx, name)
		}
	}
	start, without := median(ds), median(bare)
	pass, err := w.timeCmd(n, w.py, "-c", "pass")
	if err != nil {
		return nil, 0, err
	}
	rows = append(rows, row{"new session start (to its first result)", ms(start), "`python3 -c pass` " + ms(pass),
		fmt.Sprintf("%.2fx", float64(start)/float64(pass)), "at most 1.3x"})
	rows = append(rows, row{"new session start with the toolkit", ms(start), "without it (REPLHUB_NO_TK=1) " + ms(without),
		fmt.Sprintf("%.2fx", float64(start)/float64(without)), "at most 1.05x"})

	// 4. A cell printing 20 MB. The hub's peak memory is counted from here.
	hub, err := w.c.Sessions(ctx)
	if err != nil {
		return nil, 0, err
	}
	peakFrom := resetPeak(hub.Hub.Pid)
	ds = ds[:0]
	for i := 0; i < 5; i++ {
		t0 := time.Now()
		if _, err := w.c.Exec(ctx, "warm", `import sys; sys.stdout.write("x" * (20 << 20))`, client.ExecOptions{Cwd: w.cwd, Env: w.env}); err != nil {
			return nil, 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	d := median(ds)
	rows = append(rows, row{"a cell printing 20 MB", fmt.Sprintf("%.0f MB/s", 20/d.Seconds()), ms(d) + " per cell", "", "MB/s"})

	// 5. 50 sessions at once: time, and the hub's own memory.
	t0 := time.Now()
	err = parallel(manyCount, func(i int) error {
		_, err := w.c.Exec(ctx, fmt.Sprintf("many-%d", i), "x = 1", client.ExecOptions{Cwd: w.cwd, Env: w.env})
		return err
	})
	all := time.Since(t0)
	if err != nil {
		return nil, 0, err
	}
	l, err := w.c.Sessions(ctx)
	if err != nil {
		return nil, 0, err
	}
	rows = append(rows, row{"50 sessions started at once", ms(all), fmt.Sprintf("%d live", len(l.Sessions)), "", ""})
	peak := "no peak: " + peakFrom
	if peakFrom == "" {
		peak = fmt.Sprintf("peak %.1f MB since the 20 MB cells began", float64(procKB(l.Hub.Pid, "VmHWM"))/1024)
	}
	rows = append(rows, row{"the hub's own memory with 51 sessions", fmt.Sprintf("%.1f MB RSS", float64(l.Hub.RSS)/(1<<20)), peak, "", "under 30 MB"})

	sr, err := sudoRows(w, n, start)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
	}
	rows = append(rows, sr...)

	return rows, localRT, nil
}

// resetPeak sets process pid's peak memory (VmHWM) to what it holds now,
// so that a later reading is the peak of what came between; it returns
// why it could not.
func resetPeak(pid int) string {
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return err.Error()
	}
	return ""
}
