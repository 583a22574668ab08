package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/replhub/replhub/client"
)

func init() {
	measureAlone("query", "measure only the queries: vars on 10,000 names, complete and inspect on an idle session",
		func(w *world, n int) ([]row, error) { return queryRows(w, n) })
}

// queryRows measures asking a session without running a cell, end to end
// through the client package: complete and inspect on an idle session,
// and vars on a session of 10,000 names (its time, and its reply's size
// as the client receives it).
func queryRows(w *world, n int) ([]row, error) {
	ctx := context.Background()
	o := client.ExecOptions{Cwd: w.cwd, Env: w.env}
	if _, err := w.c.Exec(ctx, "q", "import os, json\ncfg = {'port': 8080, 'path': '/x'}", o); err != nil {
		return nil, err
	}
	timed := func(k int, f func() error) (time.Duration, error) {
		var ds []time.Duration
		for i := 0; i < k; i++ {
			t0 := time.Now()
			if err := f(); err != nil {
				return 0, err
			}
			ds = append(ds, time.Since(t0))
		}
		return median(ds), nil
	}
	var rows []row
	for _, text := range []string{"os.pa", `cfg["p`, "from os import pa"} {
		d, err := timed(max(n, 200), func() error {
			_, err := w.c.Complete(ctx, "q", text, client.QueryOptions{})
			return err
		})
		if err != nil {
			return nil, err
		}
		rows = append(rows, row{fmt.Sprintf("`complete q '%s'`, idle session (client package)", text), ms(d), "", "", "at most 5 ms"})
	}
	d, err := timed(max(n, 200), func() error {
		_, err := w.c.Inspect(ctx, "q", "json.dumps", client.QueryOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	rows = append(rows, row{"`inspect q json.dumps`, idle session (client package)", ms(d), "", "", ""})

	if _, err := w.c.Exec(ctx, "q", "for i in range(10000): globals()['v%05d' % i] = i", o); err != nil {
		return nil, err
	}
	for _, limit := range []int{0, 5000} {
		var size int
		d, err := timed(min(n, 20), func() error {
			a, err := w.c.Vars(ctx, "q", false, client.QueryOptions{Limit: limit})
			if err == nil {
				b, _ := json.Marshal(a)
				size = len(b)
			}
			return err
		})
		if err != nil {
			return nil, err
		}
		what := "`vars q`, 10,002 names (500 shown by default)"
		if limit > 0 {
			what = fmt.Sprintf("`vars q --limit %d`, 10,002 names", limit)
		}
		rows = append(rows, row{what, ms(d), fmt.Sprintf("reply %.1f KB", float64(size)/1000), "", "bounded"})
	}
	return rows, nil
}
