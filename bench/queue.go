package main

import (
	"context"
	"fmt"
	"time"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/wire"
)

func init() {
	measureAlone("queue", "measure only a session's queue: 64 cells queued and collected, against 64 execs one after another",
		func(w *world, _ int) ([]row, error) { return queueRows(w) })
}

// queueRows measures 64 cells sent with Queue (and NoWait, so that every
// call returns at once) and then collected in order, against the same 64
// cells as execs one after another, for trivial cells and for cells of
// 5 ms; each figure is the median of 5 rounds, in one session.
func queueRows(w *world) ([]row, error) {
	ctx := context.Background()
	o := client.ExecOptions{Cwd: w.cwd, Env: w.env}
	if _, err := w.c.Exec(ctx, "qb", "import time", o); err != nil {
		return nil, err
	}
	const cells = 64
	queued := func(code string) (time.Duration, error) {
		qo := o
		qo.Queue, qo.NoWait = true, true
		t0 := time.Now()
		var nums []int
		for range cells {
			res, err := w.c.Exec(ctx, "qb", code, qo)
			if err != nil {
				return 0, err
			}
			nums = append(nums, res.Cell)
		}
		for _, n := range nums {
			res, err := w.c.WaitCell(ctx, "qb", n, time.Minute, nil)
			if err != nil {
				return 0, err
			}
			if res.Status != wire.StatusOK {
				return 0, fmt.Errorf("cell %d: %s", n, res.Status)
			}
		}
		return time.Since(t0), nil
	}
	oneByOne := func(code string) (time.Duration, error) {
		t0 := time.Now()
		for range cells {
			if _, err := w.c.Exec(ctx, "qb", code, o); err != nil {
				return 0, err
			}
		}
		return time.Since(t0), nil
	}
	var rows []row
	for _, c := range []struct{ what, code, goal string }{
		{"trivial cells", "1", "(two calls a cell against one)"},
		{"cells of 5 ms", "time.sleep(0.005)", "at most 1x"},
	} {
		var qs, ss []time.Duration
		for range 5 {
			q, err := queued(c.code)
			if err != nil {
				return nil, err
			}
			s, err := oneByOne(c.code)
			if err != nil {
				return nil, err
			}
			qs, ss = append(qs, q), append(ss, s)
		}
		q, s := median(qs), median(ss)
		rows = append(rows, row{fmt.Sprintf("%d %s queued, then collected in order (client package)", cells, c.what), ms(q),
			fmt.Sprintf("%d execs one after another %s", cells, ms(s)), fmt.Sprintf("%.2fx", float64(q)/float64(s)), c.goal})
	}
	return rows, nil
}
