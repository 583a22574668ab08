package main

import (
	"context"
	"fmt"
	"time"

	"github.com/replhub/replhub/client"
)

func init() {
	measureAlone("streams", "measure only a cell's tight print loops, to stdout and alternating with stderr",
		func(w *world, n int) ([]row, error) { return streamsRows(w, min(n, 7)) })
}

// streamsRows measures a cell of 100,000 prints, all to stdout and
// alternating stdout and stderr: the cell's own duration in the worker
// (median of k), against the same loop in `python3 -u` writing to a pipe
// (its whole process).
func streamsRows(w *world, k int) ([]row, error) {
	ctx := context.Background()
	o := client.ExecOptions{Cwd: w.cwd, Env: w.env, Timeout: 120 * time.Second}
	if _, err := w.c.Exec(ctx, "p", "import sys", o); err != nil {
		return nil, err
	}
	loops := []struct{ what, code string }{
		{"100,000 print(i) to stdout", "for i in range(100000): print(i)"},
		{"100,000 print(i), stdout and stderr in turn", "for i in range(50000): print(i); print(i, file=sys.stderr)"},
	}
	var rows []row
	for _, l := range loops {
		var ds []time.Duration
		for i := 0; i < k; i++ {
			res, err := w.c.Exec(ctx, "p", l.code, o)
			if err != nil {
				return nil, err
			}
			ds = append(ds, time.Duration(res.DurationMS)*time.Millisecond)
		}
		d := median(ds)
		base, err := w.timeCmd(k, w.py, "-u", "-c", "import sys\n"+l.code)
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{"a cell of " + l.what + " (its duration)", ms(d), "`python3 -u` to a pipe " + ms(base),
			fmt.Sprintf("%.2f", d.Seconds()/base.Seconds()), ""})
	}
	return rows, nil
}
