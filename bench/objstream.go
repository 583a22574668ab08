package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/wire"
)

func init() {
	measureAlone("objstream", "measure only streamed objects: put and get of 100 MB to a session behind sshd against a push and pull of the same size, the hub's memory during a 1 GB put, and a group's put to 3 sessions against 3 single puts",
		func(w *world, n int) ([]row, error) {
			return withSSHD("streamed objects benchmark", func(tb *benchTB) ([]row, error) {
				rows, err := objstreamRows(tb, w, min(n, 5))
				if err != nil {
					return nil, err
				}
				group, err := objgroupRows(tb, w, min(n, 5))
				return append(rows, group...), err
			})
		})
}

// objstreamRounds runs in a local session: n interleaved rounds of a put
// and a get of 100 MB of bytes to session "far", a push and pull of a file
// of the same size on the same route, and the same put and get as one
// pickled blob (streaming turned off, as between peers of other versions);
// it prints the medians in seconds.
const objstreamRounds = `import os, time
from replhub_toolkit import relay
far = session("far")
blob = os.urandom(100 * 1000 * 1000)
src, dest, back = os.path.join(%[1]q, "src.bin"), os.path.join(%[1]q, "dest.bin"), os.path.join(%[1]q, "back.bin")
with open(src, "wb") as f:
    f.write(blob)
def timed(fn):
    t0 = time.perf_counter(); fn(); return time.perf_counter() - t0
def rounds(n):
    r = dict((k, []) for k in ("put", "get", "push", "pull", "blobput", "blobget"))
    streams = relay.streams_with
    for _ in range(n):
        r["put"].append(timed(lambda: far.put(blob=blob)))
        r["get"].append(timed(lambda: far.get("blob")))
        r["push"].append(timed(lambda: far.push(src, dest)))
        r["pull"].append(timed(lambda: far.pull(dest, back)))
        relay.streams_with = lambda py: False
        try:
            r["blobput"].append(timed(lambda: far.put(blob=blob)))
            r["blobget"].append(timed(lambda: far.get("blob")))
        finally:
            relay.streams_with = streams
    assert far.get("blob") == blob and open(back, "rb").read() == blob
    for p in (dest, back):
        os.remove(p)
    return " ".join("%%s=%%f" %% (k, sorted(v)[len(v) // 2]) for k, v in r.items())
rounds(%[2]d)`

func objstreamRows(tb *benchTB, w *world, n int) ([]row, error) {
	env, _ := oneHost(tb, w, "lab", filepath.Join(w.root, "home-objstream"), nil)
	c := client.New(w.c.Paths)
	c.Exe, c.Env = w.bin, env
	defer c.Close()
	ctx := context.Background()
	if _, err := c.Exec(ctx, "far", "1", client.ExecOptions{Cwd: w.cwd, Env: env, Host: "lab", Python: w.py}); err != nil {
		return nil, err
	}
	defer c.Kill(ctx, "far")
	local := client.ExecOptions{Cwd: w.cwd, Env: env, Python: w.py, Timeout: 600 * time.Second}
	defer c.Kill(ctx, "here")
	s, err := figures(c.Exec(ctx, "here", fmt.Sprintf(objstreamRounds, w.root, n), local))
	if err != nil {
		return nil, fmt.Errorf("streamed objects benchmark: %w", err)
	}
	rate := func(sec float64) string { return fmt.Sprintf("%.0f MB/s", 100/sec) }
	ratio := func(ours, base float64) string { return fmt.Sprintf("%.2fx", base/ours) }
	rows := []row{
		{fmt.Sprintf("put of 100 MB bytes to a session behind sshd (median of %d)", n), rate(s["put"]),
			"push of a 100 MB file " + rate(s["push"]) + "; one blob " + rate(s["blobput"]), ratio(s["put"], s["push"]) + " push", "at least 0.8x push"},
		{fmt.Sprintf("get of 100 MB bytes from a session behind sshd (median of %d)", n), rate(s["get"]),
			"pull of a 100 MB file " + rate(s["pull"]) + "; one blob " + rate(s["blobget"]), ratio(s["get"], s["pull"]) + " pull", "at least 0.8x pull"},
		{"put then get of 100 MB bytes, behind sshd", rate((s["put"] + s["get"]) / 2),
			"push then pull " + rate((s["push"]+s["pull"])/2), ratio(s["put"]+s["get"], s["push"]+s["pull"]) + " push+pull", "at least 0.8x"},
	}

	// The hub's resident memory, sampled while a 1 GB object crosses (after
	// the rounds above, as in a hub that has moved objects before).
	if _, err := c.Exec(ctx, "here", "big = bytearray(1000 * 1000 * 1000)", local); err != nil {
		return nil, err
	}
	// Each session's peak is set back to what it holds now: the sender
	// should grow by at most a window, the receiver by the object and a
	// window.
	marks := map[string]int64{}
	for _, name := range []string{"here", "far"} {
		o := local
		if name == "far" {
			o = client.ExecOptions{Cwd: w.cwd, Env: env, Host: "lab", Python: w.py}
		}
		kb, err := intValue(c.Exec(ctx, name, sessionPeakReset, o))
		if err != nil {
			return nil, fmt.Errorf("session %s's memory: %w", name, err)
		}
		marks[name] = kb
	}
	pid := hubPid(w)
	before := vmRSS(pid)
	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak.Store(max(peak.Load(), vmRSS(pid)))
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	t0 := time.Now()
	_, err = c.Exec(ctx, "here", "far.put(big=big)", local)
	d := time.Since(t0)
	close(stop)
	<-sampled
	if err != nil {
		return nil, err
	}
	grew := peak.Load() - before
	rows = append(rows, row{"hub's resident memory growth during a 1 GB put behind sshd", fmt.Sprintf("%.1f MB", float64(grew)/1e6),
		fmt.Sprintf("the object 1000 MB (put at %.0f MB/s)", 1000/d.Seconds()), fmt.Sprintf("%.3fx the object", float64(grew)/1e9), "≤ 16 MB"})
	window := float64(wire.ChunkSize*(wire.Window+1)) / 1e6
	for _, side := range []struct{ name, what, goal string }{
		{"here", "sending session's peak memory growth during the 1 GB put", fmt.Sprintf("≤ a window (%.0f MB)", window)},
		{"far", "receiving session's peak memory growth during the 1 GB put", fmt.Sprintf("≤ the object + a window (%.0f MB)", 1000+window)},
	} {
		o := local
		if side.name == "far" {
			o = client.ExecOptions{Cwd: w.cwd, Env: env, Host: "lab", Python: w.py}
		}
		kb, err := intValue(c.Exec(ctx, side.name, sessionPeak, o))
		if err != nil {
			return nil, fmt.Errorf("session %s's memory: %w", side.name, err)
		}
		grew := float64(kb-marks[side.name]) * 1024 / 1e6
		rows = append(rows, row{side.what, fmt.Sprintf("%.1f MB", grew), "the object 1000 MB",
			fmt.Sprintf("%.3fx the object", grew/1000), side.goal})
	}
	return rows, nil
}

// sessionPeakReset sets a session's peak memory (VmHWM) back to what it
// holds now, and gives that in KiB; sessionPeak gives the peak since.
const (
	sessionPeakReset = `import re as _re
open("/proc/self/clear_refs", "w").write("5")
int(_re.search(r"VmRSS:\s+(\d+)", open("/proc/self/status").read()).group(1))`
	sessionPeak = `int(_re.search(r"VmHWM:\s+(\d+)", open("/proc/self/status").read()).group(1))`
)

// intValue is the integer a cell's value gives.
func intValue(res *wire.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	if res.Value == nil {
		return 0, fmt.Errorf("the cell failed: %s", res.Text())
	}
	return strconv.ParseInt(*res.Value, 10, 64)
}

// figures reads the medians a cell's value gives as "name=seconds ...".
func figures(res *wire.Result, err error) (map[string]float64, error) {
	if err != nil {
		return nil, err
	}
	if res.Value == nil {
		return nil, fmt.Errorf("the cell failed: %s", res.Text())
	}
	s := map[string]float64{}
	for _, f := range strings.Fields(strings.Trim(*res.Value, "'")) {
		k, v, _ := strings.Cut(f, "=")
		s[k], _ = strconv.ParseFloat(v, 64)
	}
	return s, nil
}

// hubPid is the running hub's pid, from its pid file.
func hubPid(w *world) int {
	b, _ := os.ReadFile(w.c.Paths.PidFile())
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// vmRSS is a process's resident memory in bytes; 0 when it cannot be read.
func vmRSS(pid int) int64 { return procKB(pid, "VmRSS") << 10 }

// procKB is a field of /proc/PID/status in KiB (VmRSS, VmHWM); 0 when it
// cannot be read.
func procKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field+":" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb
		}
	}
	return 0
}
