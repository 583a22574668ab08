package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/replhub/replhub/client"
)

// durableRows measures adoption: 50 live local sessions, the hub killed,
// and the time from starting a new hub until every session has answered a
// cell, against starting a hub with no sessions in the same run.
func durableRows(w *world) ([]row, error) {
	ctx := context.Background()
	const count = 50
	opts := client.ExecOptions{Cwd: w.cwd, Env: w.env}
	killHub := func() error {
		b, err := os.ReadFile(w.c.Paths.PidFile())
		if err != nil {
			return err
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		w.c.Close()
		syscall.Kill(pid, syscall.SIGKILL)
		for i := 0; i < 500 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(10 * time.Millisecond)
		}
		os.Remove(w.c.Paths.Socket())
		return nil
	}
	// The baseline: a hub start with nothing to adopt.
	if err := w.c.Ping(ctx); err != nil {
		return nil, err
	}
	if err := killHub(); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := w.c.Ping(ctx); err != nil {
		return nil, err
	}
	empty := time.Since(t0)

	for i := 0; i < count; i++ {
		if _, err := w.c.Exec(ctx, fmt.Sprintf("live-%d", i), fmt.Sprintf("v = %d", i), opts); err != nil {
			return nil, err
		}
	}
	if err := killHub(); err != nil {
		return nil, err
	}
	t0 = time.Now()
	if err := w.c.Ping(ctx); err != nil {
		return nil, err
	}
	err := parallel(count, func(i int) error {
		c := client.New(w.c.Paths)
		c.Exe, c.Env = w.bin, w.env
		defer c.Close()
		res, err := c.Exec(ctx, fmt.Sprintf("live-%d", i), "v", opts)
		if err == nil && !strings.Contains(res.Text(), fmt.Sprintf("Out[2]: %d", i)) {
			err = fmt.Errorf("live-%d came back as %q", i, res.Text())
		}
		return err
	})
	adopted := time.Since(t0)
	if err != nil {
		return nil, err
	}
	for i := 0; i < count; i++ {
		w.c.Kill(ctx, fmt.Sprintf("live-%d", i))
	}
	return []row{{fmt.Sprintf("hub start to %d adopted sessions all answering a cell", count), ms(adopted),
		"hub start with no session " + ms(empty), fmt.Sprintf("%.1fx", float64(adopted)/float64(empty)), "at most 500 ms"}}, nil
}
