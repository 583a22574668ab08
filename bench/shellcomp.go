package main

import (
	"context"
	"fmt"

	"github.com/replhub/replhub/client"
)

func init() {
	measureAlone("completion", "measure only shell completion of session names with 50 sessions live", completionRows)
}

// completionRows measures `replhub __complete exec ”`, what a shell runs
// at TAB, with 50 sessions live, against the same binary's start alone
// (`replhub --version`); a completion has 100 ms at most.
func completionRows(w *world, n int) ([]row, error) {
	ctx := context.Background()
	o := client.ExecOptions{Cwd: w.cwd, Env: w.env}
	for i := 0; i < 50; i++ {
		if _, err := w.c.Exec(ctx, fmt.Sprintf("s%02d", i), "x = 1", o); err != nil {
			return nil, err
		}
	}
	comp, err := w.timeCmd(n, w.bin, "__complete", "exec", "")
	if err != nil {
		return nil, err
	}
	base, err := w.timeCmd(n, w.bin, "--version")
	if err != nil {
		return nil, err
	}
	return []row{{"`replhub __complete exec ''`, 50 sessions live (whole process)", ms(comp),
		"`replhub --version`: " + ms(base), fmt.Sprintf("%.2f×", float64(comp)/float64(base)), "under 100 ms"}}, nil
}
