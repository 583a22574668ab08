package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"time"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/wire"
)

// swapNamespace fills a namespace with about 100 MB of what sessions hold:
// raw bytes, a list of parsed lines, an index, and a function.
const swapNamespace = `
import os
blob = os.urandom(56 << 20)
lines = ["line %d: GET /api/v1/items/%d 200 %d ms" % (i, i * 7, i % 300) for i in range(700000)]
index = {i: (i, str(i)) for i in range(250000)}
def parse(s):
    return s.split(":", 1)
`

// swapBaseline times cloudpickle.dumps and loads of the same namespace in
// one process: the names a swap keeps, pickled as one dict.
const swapBaseline = swapNamespace + `
import cloudpickle, json, sys, time
ns = {k: v for k, v in dict(globals()).items() if k in ("os", "blob", "lines", "index", "parse")}
dumps, loads = [], []
for _ in range(int(sys.argv[1])):
    t0 = time.perf_counter(); b = cloudpickle.dumps(ns); dumps.append(time.perf_counter() - t0)
    t0 = time.perf_counter(); cloudpickle.loads(b); loads.append(time.perf_counter() - t0)
print(json.dumps({"dumps": sorted(dumps)[len(dumps) // 2], "loads": sorted(loads)[len(loads) // 2], "size": len(b)}))
`

// swapRows measures `replhub swap NAME` and the exec that restores the
// session (a new worker's start included) against cloudpickle in one
// process, rounds times each, interleaved.
func swapRows(w *world, rounds int) ([]row, error) {
	ctx := context.Background()
	o := client.ExecOptions{Cwd: w.cwd, Env: w.env, Python: w.py, Timeout: 120 * time.Second}
	if _, err := w.c.Exec(ctx, "swapped", swapNamespace, o); err != nil {
		return nil, err
	}
	var swaps, restores, dumps, loads []time.Duration
	var bytes, size int64
	for i := 0; i < rounds; i++ {
		t0 := time.Now()
		rep, err := w.c.Swap(ctx, "swapped", false)
		if err != nil {
			return nil, err
		}
		swaps = append(swaps, time.Since(t0))
		if len(rep.Swaps) != 1 || rep.Swaps[0].Status != wire.SwapDone {
			return nil, fmt.Errorf("swap: %+v", rep.Swaps)
		}
		bytes = rep.Swaps[0].Bytes
		t0 = time.Now()
		res, err := w.c.Exec(ctx, "swapped", "len(blob)", o)
		if err != nil {
			return nil, err
		}
		restores = append(restores, time.Since(t0))
		if res.Value == nil || *res.Value != fmt.Sprint(56<<20) {
			return nil, fmt.Errorf("restore: %s", res.Text())
		}
		out, err := exec.Command(w.py, "-c", swapBaseline, "1").Output()
		if err != nil {
			return nil, fmt.Errorf("cloudpickle baseline (is cloudpickle installed for %s?): %v", w.py, err)
		}
		var b struct{ Dumps, Loads float64 }
		var sz struct{ Size int64 }
		json.Unmarshal(out, &b)
		json.Unmarshal(out, &sz)
		size = sz.Size
		dumps = append(dumps, time.Duration(b.Dumps*float64(time.Second)))
		loads = append(loads, time.Duration(b.Loads*float64(time.Second)))
	}
	// A new session's start, the part of a restore that is not loading.
	t0 := time.Now()
	if _, err := w.c.Exec(ctx, "swap-start", "pass", o); err != nil {
		return nil, err
	}
	start := time.Since(t0)
	w.c.Kill(ctx, "swap-start")
	w.c.Kill(ctx, "swapped")
	mb := float64(bytes) / 1e6
	sw, rs, du, lo := median(swaps), median(restores), median(dumps), median(loads)
	what := fmt.Sprintf("a namespace of %.0f MB pickled (cloudpickle's dumps: %.0f MB), %d rounds", mb, float64(size)/1e6, rounds)
	return []row{
		{"`replhub swap` of " + what + ", fsynced", fmt.Sprintf("%s (%s)", ms(sw), mbps(mb, sw)),
			"`cloudpickle.dumps` in one process " + ms(du),
			fmt.Sprintf("%.2fx", sw.Seconds()/du.Seconds()), "≥ 200 MB/s, ≤ 1.5x"},
		{"restore of it: the next exec, a new worker's start (" + ms(start) + " alone) included", fmt.Sprintf("%s (%s)", ms(rs), mbps(mb, rs)),
			"`cloudpickle.loads` in one process " + ms(lo),
			fmt.Sprintf("%.2fx", rs.Seconds()/lo.Seconds()), "≥ 200 MB/s, ≤ 1.5x"},
	}, nil
}
