package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/replhub/replhub/client"
)

// objectRows measures sessions handing each other things: a 1 GiB push and
// pull to a session behind sshd against scp and `cat | ssh 'cat >'`, put
// and get of a 100 MB bytes object, and a trivial call's round trip.
func objectRows(w *world, sshCfg string, remote client.ExecOptions) ([]row, error) {
	var rows []row
	ctx := context.Background()
	big := filepath.Join(w.root, "big.bin")
	if err := writeRandom(big, 1<<30); err != nil {
		return nil, err
	}
	defer os.Remove(big)
	if _, err := w.c.Exec(ctx, "far", "1", remote); err != nil {
		return nil, err
	}
	dest := filepath.Join(w.root, "far.bin")
	back := filepath.Join(w.root, "back.bin")
	// Throughput on a shared VM swings from run to run, so the rounds are
	// interleaved (ours, then each baseline) and the medians compared.
	var push, scp, catssh, pull, scpBack, catBack []time.Duration
	for i := 0; i < *transfers; i++ {
		t0 := time.Now()
		if _, err := w.c.Push(ctx, "far", big, dest, nil); err != nil {
			return nil, err
		}
		push = append(push, time.Since(t0))
		t0 = time.Now()
		if _, err := w.c.Pull(ctx, "far", dest, back, nil); err != nil {
			return nil, err
		}
		pull = append(pull, time.Since(t0))
		os.Remove(back)
		os.Remove(dest)
		d, err := timeOnce(w, "scp", "-q", "-F", sshCfg, big, "target:"+dest)
		if err != nil {
			return nil, err
		}
		scp = append(scp, d)
		if d, err = timeOnce(w, "scp", "-q", "-F", sshCfg, "target:"+dest, back); err != nil {
			return nil, err
		}
		scpBack = append(scpBack, d)
		os.Remove(back)
		os.Remove(dest)
		if d, err = timeOnce(w, "sh", "-c", fmt.Sprintf("cat %s | ssh -F %s target 'cat > %s'", big, sshCfg, dest)); err != nil {
			return nil, err
		}
		catssh = append(catssh, d)
		if d, err = timeOnce(w, "sh", "-c", fmt.Sprintf("ssh -F %s target 'cat %s' > %s", sshCfg, dest, back)); err != nil {
			return nil, err
		}
		catBack = append(catBack, d)
		os.Remove(back)
		os.Remove(dest)
	}
	gib := float64(1<<30) / 1e6
	rate := func(ds []time.Duration) string {
		lo, hi := minmax(ds)
		return fmt.Sprintf("%s (%.0f–%.0f)", mbps(gib, median(ds)), gib/hi.Seconds(), gib/lo.Seconds())
	}
	rows = append(rows,
		row{fmt.Sprintf("push 1 GiB to a session behind sshd (%d rounds, fsynced)", *transfers), rate(push),
			fmt.Sprintf("scp %s, cat|ssh %s", rate(scp), rate(catssh)),
			fmt.Sprintf("%.2fx scp", median(scp).Seconds()/median(push).Seconds()), "at least 0.9x scp"},
		row{fmt.Sprintf("pull 1 GiB from a session behind sshd (%d rounds, fsynced)", *transfers), rate(pull),
			fmt.Sprintf("scp %s, ssh cat %s", rate(scpBack), rate(catBack)),
			fmt.Sprintf("%.2fx scp", median(scpBack).Seconds()/median(pull).Seconds()), "at least 0.9x scp"})

	// put and get of 100 MB, and trivial calls, measured inside a session.
	local := client.ExecOptions{Cwd: w.cwd, Env: w.env, Python: w.py}
	if _, err := w.c.Exec(ctx, "near", "1", local); err != nil {
		return nil, err
	}
	res, err := w.c.Exec(ctx, "here", `import time
far, near = session("far"), session("near")
blob = bytes(100 * 1000 * 1000)
t0 = time.perf_counter(); far.put(blob=blob); put_s = time.perf_counter() - t0
t0 = time.perf_counter(); got = far.get("blob"); get_s = time.perf_counter() - t0
assert got == blob
def rt(s, n=200):
    s.call("len", b"")
    t0 = time.perf_counter()
    for _ in range(n):
        s.call("len", b"")
    return (time.perf_counter() - t0) / n
"%f %f %f %f" % (put_s, get_s, rt(near), rt(far))`, client.ExecOptions{Cwd: w.cwd, Env: w.env, Python: w.py, Timeout: 300 * time.Second})
	if err != nil {
		return nil, err
	}
	if res.Value == nil {
		return nil, fmt.Errorf("objects benchmark failed: %s", res.Text())
	}
	f := strings.Fields(strings.Trim(*res.Value, "'"))
	vals := make([]float64, len(f))
	for i := range f {
		vals[i], _ = strconv.ParseFloat(f[i], 64)
	}
	rows = append(rows,
		row{"put of a 100 MB bytes object, to a session behind sshd", fmt.Sprintf("%.0f MB/s", 100/vals[0]), "", "", "MB/s"},
		row{"get of a 100 MB bytes object, from a session behind sshd", fmt.Sprintf("%.0f MB/s", 100/vals[1]), "", "", "MB/s"},
		row{"trivial call round trip, local to local", fmt.Sprintf("%.0f µs", vals[2]*1e6), "", "", ""},
		row{"trivial call round trip, local to remote", fmt.Sprintf("%.0f µs", vals[3]*1e6), "", "", ""})
	return rows, nil
}

// minmax returns the shortest and the longest of ds.
func minmax(ds []time.Duration) (lo, hi time.Duration) {
	lo, hi = ds[0], ds[0]
	for _, d := range ds {
		lo, hi = min(lo, d), max(hi, d)
	}
	return lo, hi
}

func mbps(mb float64, d time.Duration) string { return fmt.Sprintf("%.0f MB/s", mb/d.Seconds()) }

func timeOnce(w *world, argv ...string) (time.Duration, error) {
	d, _, err := runOnce(w, argv...)
	return d, err
}

// runOnce runs argv in w's environment and folder, and returns how long
// it took and how it ended.
func runOnce(w *world, argv ...string) (time.Duration, *os.ProcessState, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = w.env, w.cwd
	t0 := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, nil, fmt.Errorf("%v: %v\n%s", argv, err, out)
	}
	return time.Since(t0), cmd.ProcessState, nil
}

// writeRandom writes size bytes that do not compress.
func writeRandom(path string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r, err := os.Open("/dev/urandom")
	if err != nil {
		return err
	}
	defer r.Close()
	_, err = io.CopyN(f, r, size)
	return err
}
