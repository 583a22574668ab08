package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/pyenvtest"
)

func init() {
	measureAlone("speed", "measure only start-up: a CLI call, a warm exec, new sessions, pyenv shims here and on a host",
		func(w *world, n int) ([]row, error) {
			rows, err := speedRows(w, n)
			if err != nil {
				// What was measured before the failure is still shown.
				fmt.Fprintln(os.Stderr, "bench:", err)
			}
			return rows, nil
		})
}

// speedRows measures what every user feels: a CLI call's own cost, a warm
// exec and a new session through the CLI against the system python, the
// first session after a hub start when python3 is a pyenv shim, and
// sessions on a host whose python3 is a pyenv shim (-speed).
func speedRows(w *world, n int) (rows []row, err error) {
	ctx := context.Background()
	sysPy := "/usr/bin/python3"
	if _, err := os.Stat(sysPy); err != nil {
		sysPy = w.py
	}
	ver, err := w.timeCmd(n, w.bin, "--version")
	if err != nil {
		return nil, err
	}
	tru, err := w.timeCmd(n, "/bin/true")
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{"`replhub --version`", ms(ver), "`/bin/true` " + ms(tru), fmt.Sprintf("%.1fx", float64(ver)/float64(tru)), "at most 5 ms"})
	// Any Go program pays the runtime's start: the part of --version that
	// is replhub's own is what it takes beyond the smallest one.
	hello := filepath.Join(w.root, "hello")
	if err := buildHello(hello); err != nil {
		return rows, err
	}
	ver, floor, err := w.pair(n, []string{w.bin, "--version"}, []string{hello})
	if err != nil {
		return rows, err
	}
	rows = append(rows, row{"`replhub --version`, in turn with the floor", ms(ver), "a Go program that prints a line " + ms(floor),
		fmt.Sprintf("%.2fx", float64(ver)/float64(floor)), ""})

	if _, err := w.c.Exec(ctx, "warm", "1+1", client.ExecOptions{Cwd: w.cwd, Env: w.env}); err != nil {
		return nil, err
	}
	rh, py, err := w.pair(n, []string{w.bin, "exec", "warm", "1+1"}, []string{sysPy, "-c", "print(1+1)"})
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{"`replhub exec s '1+1'`, warm", ms(rh), fmt.Sprintf("`%s -c 'print(1+1)'` %s", sysPy, ms(py)),
		fmt.Sprintf("%.2fx faster", float64(py)/float64(rh)), "at least 4x faster"})
	// A person's call: output and errors on a terminal, where the cell's
	// output streams as it is written.
	y, err := newTerminal()
	if err != nil {
		return rows, err
	}
	defer y.close()
	ty, typy, err := y.pairOn(w, n, []string{w.bin, "exec", "warm", "1+1"}, []string{sysPy, "-c", "print(1+1)"})
	if err != nil {
		return rows, err
	}
	rows = append(rows, row{"`replhub exec s '1+1'`, warm, on a terminal", ms(ty), fmt.Sprintf("`%s -c 'print(1+1)'` on the same %s", sysPy, ms(typy)),
		fmt.Sprintf("%.2fx faster", float64(typy)/float64(ty)), "at least 4x faster"})
	// Where a page fault is dear (a VM that shadows page tables), a
	// process's start costs in proportion to its faults: this row tells
	// how the two compare whatever the machine.
	frh, err := w.faults(5, w.bin, "exec", "warm", "1+1")
	if err != nil {
		return rows, err
	}
	fpy, err := w.faults(5, sysPy, "-c", "print(1+1)")
	if err != nil {
		return rows, err
	}
	rows = append(rows, row{"page faults of that warm exec", fmt.Sprint(frh), fmt.Sprintf("python's %d", fpy),
		fmt.Sprintf("%.2fx fewer", float64(fpy)/float64(frh)), ""})
	// With another flag than those early takes (-t, --json, --max-output,
	// --no-wait, --queue, --python, --host, --sudo), the call goes through
	// cobra after every package's init; the plain one, with those or not,
	// runs from package early's init, before most of them. --fanout does
	// nothing without --hosts.
	for _, flag := range [][]string{{"-t", "30"}, {"--json"}, {"--max-output", "10000"}, {"--queue"}, {"--python", w.py}, {"--fanout", "4"}} {
		flagged, plain, err := w.pair(n, append([]string{w.bin, "exec", "warm", "1+1"}, flag...), []string{w.bin, "exec", "warm", "1+1"})
		if err != nil {
			return rows, err
		}
		how := "from early's init"
		if flag[0] == "--fanout" {
			how = "through cobra"
		}
		rows = append(rows, row{fmt.Sprintf("`replhub exec s '1+1' %s`, warm (%s)", strings.Join(flag, " "), how), ms(flagged), "the plain exec " + ms(plain),
			fmt.Sprintf("%.2fx", float64(flagged)/float64(plain)), ""})
	}
	// A wait on the idle session answers at once, from early's init too,
	// and so do the list and the queries.
	for _, c := range []struct {
		what string
		args []string
	}{{"`replhub wait s`, idle", []string{"wait", "warm"}}, {"`replhub sessions`", []string{"sessions"}},
		{"`replhub vars s`", []string{"vars", "warm"}}, {"`replhub complete s 'pri'`", []string{"complete", "warm", "pri"}}} {
		call, plain, err := w.pair(n, append([]string{w.bin}, c.args...), []string{w.bin, "exec", "warm", "1+1"})
		if err != nil {
			return rows, err
		}
		rows = append(rows, row{c.what + " (from early's init)", ms(call), "the plain exec " + ms(plain),
			fmt.Sprintf("%.2fx", float64(call)/float64(plain)), ""})
	}

	// The session runs the same interpreter as the baseline: the start's
	// own cost, not one interpreter's site-packages against another's.
	// The two are timed in turn, so that the machine's load falls on both.
	// A one-shot run makes and ends a session of its own: from early's
	// init, and through cobra (`--` before the code, which early leaves
	// to it).
	var news, oneShot, cobraRuns, passes []time.Duration
	timed := func(into *[]time.Duration, argv ...string) error {
		d, err := timeOnce(w, argv...)
		*into = append(*into, d)
		return err
	}
	saved := w.env
	w.env = withEnv(w.env, "REPLHUB_PYTHON="+sysPy)
	loopErr := func() error {
		for i := 0; i < n; i++ {
			name := fmt.Sprintf("cli-new-%d", i)
			if err := timed(&news, w.bin, "exec", name, "pass"); err != nil {
				return err
			}
			w.c.Kill(ctx, name)
			if err := timed(&passes, sysPy, "-c", "pass"); err != nil {
				return err
			}
			if err := timed(&oneShot, w.bin, "run", "pass"); err != nil {
				return err
			}
			if err := timed(&cobraRuns, w.bin, "run", "--", "pass"); err != nil {
				return err
			}
		}
		return nil
	}()
	w.env = saved
	if loopErr != nil {
		return nil, loopErr
	}
	pass := median(passes)
	rows = append(rows, row{"new local session through the CLI", ms(median(news)), fmt.Sprintf("`%s -c pass` %s", sysPy, ms(pass)),
		fmt.Sprintf("%.2fx", float64(median(news))/float64(pass)), "at most 2x"})
	rows = append(rows, row{"`replhub run pass` (a session made and ended)", ms(median(oneShot)), fmt.Sprintf("`%s -c pass` %s", sysPy, ms(pass)),
		fmt.Sprintf("%.2fx", float64(median(oneShot))/float64(pass)), ""})
	rows = append(rows, row{"`replhub run -- pass` (through cobra)", ms(median(cobraRuns)), "from early's init " + ms(median(oneShot)),
		fmt.Sprintf("%.2fx", float64(median(cobraRuns))/float64(median(oneShot))), ""})

	tb := &benchTB{}
	defer tb.close()
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("speed benchmarks: %v", r)
		}
	}()
	pys := pythonsByMinor()
	global, other := pys[0], pys[1]
	tr := pyenvtest.New(tb, filepath.Join(w.root, "pyenv-home"), map[string]string{global.v + ".99": global.path, other.v + ".99": other.path}, global.v+".99")
	os.Chmod(filepath.Join(w.root, "pyenv-home"), 0o755)

	// The first local session after a hub start, python3 a pyenv shim
	// (slow on purpose, as pyenv's) against a real path.
	shimEnv := withEnv(w.env, "PATH="+tr.Shims+":"+os.Getenv("PATH"), "REPLHUB_PYTHON=", "HOME="+filepath.Join(w.root, "pyenv-home"))
	realEnv := withEnv(w.env, "REPLHUB_PYTHON="+global.path)
	var shim, real []time.Duration
	for i := 0; i < n; i++ {
		for j, env := range [][]string{shimEnv, realEnv} {
			w.c.Kill(ctx, "first")
			w.c.Stop(ctx)
			w.c.Env = env
			t0 := time.Now()
			if _, err := w.c.Exec(ctx, "first", "pass", client.ExecOptions{Cwd: w.cwd, Env: env}); err != nil {
				return nil, err
			}
			if j == 0 {
				shim = append(shim, time.Since(t0))
			} else {
				real = append(real, time.Since(t0))
			}
		}
	}
	w.c.Env = w.env
	rows = append(rows, row{"first local session after a hub start, python3 a pyenv shim", ms(median(shim)), "a real path " + ms(median(real)),
		fmt.Sprintf("%.2fx", float64(median(shim))/float64(median(real))), "at most 1.3x"})

	runs := tr.Runs()
	rr, err := pyenvHostRows(w, n, tb, tr, global, other)
	rows = append(rows, rr...)
	if err == nil {
		var r row
		r, err = plainHostRow(w, n, tb, tr)
		rows = append(rows, r)
	}
	if runs += tr.Runs(); runs != "" {
		names := map[string]bool{}
		for _, l := range strings.Fields(runs) {
			names[filepath.Base(l)] = true
		}
		rows = append(rows, row{"shims run", fmt.Sprint(strings.Count(runs, "\n")), strings.Join(slices.Sorted(maps.Keys(names)), ", "), "", "none"})
	}
	return rows, err
}

// pyenvHostRows measures sessions on a loopback host whose python3 is a
// pyenv shim, against `ssh HOST python3 -c pass` there.
func pyenvHostRows(w *world, n int, tb *benchTB, tr *pyenvtest.Tree, global, other minorPy) ([]row, error) {
	env, cfg := oneHost(tb, w, "pyhost", filepath.Join(w.root, "ssh-home"), map[string]string{
		"HOME": filepath.Dir(tr.Root), "PATH": tr.Shims + ":/usr/local/bin:/usr/bin:/bin"})
	sshPass, err := w.timeCmd(n, "ssh", "-F", cfg, "-o", "ControlMaster=no", "pyhost", "python3", "-c", "pass")
	if err != nil {
		return nil, err
	}
	sshReal, err := w.timeCmd(n, "ssh", "-F", cfg, "-o", "ControlMaster=no", "pyhost", global.path, "-c", "pass")
	if err != nil {
		return nil, err
	}
	tr.Reset() // the baseline runs the shim; replhub must not
	var rows []row
	for _, c := range []struct {
		what  string
		local minorPy
		goal  string
	}{{"local minor = the host's pyenv global", global, "at most 1.0x"}, {"local minor ≠ the host's pyenv global", other, "at most 1.1x"}} {
		e := withEnv(env, "REPLHUB_PYTHON="+c.local.path)
		o := client.ExecOptions{Cwd: w.cwd, Env: e, Host: "pyhost"}
		ds, err := firstStarts(w, n, o)
		if err != nil {
			return rows, err
		}
		rows = append(rows, row{"first remote session on a pyenv host, " + c.what, ms(median(ds)),
			fmt.Sprintf("`ssh HOST python3 -c pass` %s (with a real path: %s)", ms(sshPass), ms(sshReal)),
			fmt.Sprintf("%.2fx", float64(median(ds))/float64(sshPass)), c.goal})
		if c.local != global {
			continue
		}
		further, warm, err := furtherSessions(w, n, o, cfg, "pyhost", c.local.path)
		if err != nil {
			return rows, err
		}
		rows = append(rows, furtherRow(further, warm))
		cold, err := coldBytecodeStarts(w, n, filepath.Dir(tr.Root), o)
		if err != nil {
			return rows, err
		}
		rows = append(rows, row{"further remote session, the host's bytecode cache emptied first", ms(cold), "with the cache " + ms(further),
			fmt.Sprintf("%.2fx", float64(cold)/float64(further)), "what the cache saves"})
	}
	w.c.Env = w.env
	return rows, nil
}

// furtherSessions times further sessions on the open route to host (in
// ssh config cfg) and, in turn with each, python over an open
// ControlMaster connection, so that the machine's load falls on both;
// it returns the two medians.
func furtherSessions(w *world, n int, o client.ExecOptions, cfg, host, python string) (further, warm time.Duration, err error) {
	ctx := context.Background()
	master := exec.Command("ssh", "-F", cfg, "-o", "ControlMaster=yes", "-N", host)
	if err := master.Start(); err != nil {
		return 0, 0, err
	}
	defer func() { master.Process.Kill(); master.Wait() }()
	time.Sleep(500 * time.Millisecond)
	var ours, warms []time.Duration
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("more-%d", i)
		t0 := time.Now()
		if _, err := w.c.Exec(ctx, name, "pass", o); err != nil {
			return 0, 0, err
		}
		ours = append(ours, time.Since(t0))
		w.c.Kill(ctx, name)
		time.Sleep(200 * time.Millisecond) // the killed worker's end, off both figures
		d, err := timeOnce(w, "ssh", "-F", cfg, "-o", "ControlMaster=no", host, python, "-c", "pass")
		if err != nil {
			return 0, 0, err
		}
		warms = append(warms, d)
	}
	return median(ours), median(warms), nil
}

func furtherRow(further, warm time.Duration) row {
	return row{"further remote session on an open route", ms(further), "python over a ControlMaster, timed in turn " + ms(warm),
		fmt.Sprintf("%.2fx", float64(further)/float64(warm)), "at most 1.3x"}
}

// coldBytecodeStarts times further sessions on the open route after the
// host's bytecode cache (in its $HOME, see boot.py) was removed: each
// compiles the payload again.
func coldBytecodeStarts(w *world, n int, home string, o client.ExecOptions) (time.Duration, error) {
	ctx := context.Background()
	var ds []time.Duration
	for i := 0; i < n; i++ {
		if err := os.RemoveAll(filepath.Join(home, ".cache", "replhub")); err != nil {
			return 0, err
		}
		name := fmt.Sprintf("cold-%d", i)
		t0 := time.Now()
		if _, err := w.c.Exec(ctx, name, "pass", o); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
		w.c.Kill(ctx, name)
	}
	return median(ds), nil
}

type minorPy struct{ v, path string }

// pythonsByMinor returns two real interpreters of different minors.
func pythonsByMinor() []minorPy {
	ps := hubtest.Pythons()
	var out []minorPy
	for _, v := range []string{"3.11", "3.12", "3.13", "3.10", "3.9", "3.8"} {
		if p, ok := ps[v]; ok {
			out = append(out, minorPy{v, p})
		}
		if len(out) == 2 {
			return out
		}
	}
	panic(fmt.Sprintf("needs two Pythons of different minors, found %v", ps))
}

// pair times a and b in turn, n times each, and returns their medians.
func (w *world) pair(n int, a, b []string) (time.Duration, time.Duration, error) {
	return inTurn(n, a, b, func(argv []string) (time.Duration, error) { return timeOnce(w, argv...) })
}

// inTurn runs a and b in turn through run, n times each, and returns
// their medians.
func inTurn(n int, a, b []string, run func(argv []string) (time.Duration, error)) (time.Duration, time.Duration, error) {
	var da, db []time.Duration
	for i := 0; i < n; i++ {
		d, err := run(a)
		if err != nil {
			return 0, 0, err
		}
		da = append(da, d)
		if d, err = run(b); err != nil {
			return 0, 0, err
		}
		db = append(db, d)
	}
	return median(da), median(db), nil
}

// faults runs argv n times and returns the median of its minor page
// faults (getrusage's ru_minflt).
func (w *world) faults(n int, argv ...string) (int64, error) {
	var fs []int64
	for i := 0; i < n; i++ {
		_, ps, err := runOnce(w, argv...)
		if err != nil {
			return 0, err
		}
		ru, ok := ps.SysUsage().(*syscall.Rusage)
		if !ok {
			return 0, fmt.Errorf("no rusage on this system")
		}
		fs = append(fs, int64(ru.Minflt))
	}
	slices.Sort(fs)
	return fs[len(fs)/2], nil
}

// withEnv is env with vars set (later settings win).
func withEnv(env []string, vars ...string) []string {
	return append(append([]string(nil), env...), vars...)
}

// plainHostRow measures the first remote session on a host whose user has
// no rc files (python3 is /usr/bin's), started by a user whose own python3
// is a pyenv shim, against `ssh HOST python3 -c pass`: the local shim is
// resolved, never run, so the start costs what the host does.
func plainHostRow(w *world, n int, tb *benchTB, tr *pyenvtest.Tree) (row, error) {
	what := "first remote session, host user without rc files, python3 here a pyenv shim"
	hostHome := filepath.Join(w.root, "plain-host-home") // no rc files
	os.MkdirAll(hostHome, 0o755)
	env, cfg := oneHost(tb, w, "plainhost", filepath.Join(w.root, "plain-home"), map[string]string{
		"HOME": hostHome, "PATH": "/usr/local/bin:/usr/bin:/bin"})
	env = withEnv(env, "REPLHUB_PYTHON=", "PATH="+tr.Shims+":"+os.Getenv("PATH"))
	saved := w.env
	w.env = env
	defer func() { w.env, w.c.Env = saved, saved }()
	sshPass, err := w.timeCmd(n, "ssh", "-F", cfg, "plainhost", "python3", "-c", "pass")
	if err != nil {
		return row{what: what}, err
	}
	ds, err := firstStarts(w, n, client.ExecOptions{Cwd: w.cwd, Env: env, Host: "plainhost"})
	if err != nil {
		return row{what: what}, err
	}
	w.c.Kill(context.Background(), "first")
	return row{what, ms(median(ds)), "`ssh HOST python3 -c pass` " + ms(sshPass),
		fmt.Sprintf("%.2fx", float64(median(ds))/float64(sshPass)), "at most 1.0x"}, nil
}

// firstStarts times n first sessions, named "first", each after a hub
// start in o's environment (the hub started by a Ping, not timed).
func firstStarts(w *world, n int, o client.ExecOptions) ([]time.Duration, error) {
	ctx := context.Background()
	var ds []time.Duration
	for i := 0; i < n; i++ {
		w.c.Kill(ctx, "first")
		w.c.Stop(ctx)
		w.c.Env = o.Env
		if err := w.c.Ping(ctx); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if _, err := w.c.Exec(ctx, "first", "pass", o); err != nil {
			return nil, err
		}
		ds = append(ds, time.Since(t0))
	}
	return ds, nil
}
