package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/cmd/replhub/cli/cmdenv"
	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/wire"
)

func newSelfTestCmd(e *env) *cobra.Command {
	var python string
	cmd := &cobra.Command{
		Use:   "self-test",
		Short: "Prove the session contract on this machine, offline, with a private hub",
		Long: `Start a private hub in a temporary folder (your own hub and sessions are not
touched), check the contract that replhub promises, print PASS or FAIL for
each check and a summary, and exit 0 only if every check passed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runSelfTest(cmd.Context(), e, python)
		},
	}
	cmd.Flags().StringVar(&python, "python", "", "interpreter to test (default $REPLHUB_PYTHON, else python3 on PATH)")
	return cmd
}

type selfCheck struct {
	name string
	run  func(ctx context.Context, c *client.Client, o client.ExecOptions) error
}

var selfChecks = []selfCheck{
	{"state persists across calls", func(ctx context.Context, c *client.Client, o client.ExecOptions) error {
		if _, err := mustStatus(c.Exec(ctx, "st-a", "x = 41", o))(wire.StatusOK); err != nil {
			return err
		}
		return wantValue(c.Exec(ctx, "st-a", "x + 1", o))("42")
	}},
	{"a syntax error leaves the session alive", func(ctx context.Context, c *client.Client, o client.ExecOptions) error {
		r, err := mustStatus(c.Exec(ctx, "st-a", "def (", o))(wire.StatusError)
		if err != nil {
			return err
		}
		if r.Error == nil || r.Error.Type != "SyntaxError" {
			return fmt.Errorf("want a SyntaxError, got %+v", r.Error)
		}
		return wantValue(c.Exec(ctx, "st-a", "x", o))("41")
	}},
	{"an exception leaves the session alive", func(ctx context.Context, c *client.Client, o client.ExecOptions) error {
		r, err := mustStatus(c.Exec(ctx, "st-a", "1/0", o))(wire.StatusError)
		if err != nil {
			return err
		}
		if r.Error == nil || r.Error.Type != "ZeroDivisionError" || !strings.Contains(r.Error.Traceback, "<cell-") {
			return fmt.Errorf("want a ZeroDivisionError traceback naming the cell, got %+v", r.Error)
		}
		return wantValue(c.Exec(ctx, "st-a", "x", o))("41")
	}},
	{"output past the cap is truncated and flagged", func(ctx context.Context, c *client.Client, o client.ExecOptions) error {
		r, err := mustStatus(c.Exec(ctx, "st-a", `print("x" * 100000)`, o))(wire.StatusOK)
		if err != nil {
			return err
		}
		if !r.Truncated || r.TruncatedChars < 70000 || len(r.Output) > 31000 {
			return fmt.Errorf("want truncated output under 31000 bytes, got truncated=%v chars=%d len=%d", r.Truncated, r.TruncatedChars, len(r.Output))
		}
		return nil
	}},
	{"interrupt stops a sleeping cell", func(ctx context.Context, c *client.Client, o client.ExecOptions) error {
		o.Timeout = 500 * time.Millisecond
		if _, err := mustStatus(c.Exec(ctx, "st-b", "import time; time.sleep(60)", o))(wire.StatusRunning); err != nil {
			return err
		}
		if _, err := c.Interrupt(ctx, "st-b"); err != nil {
			return err
		}
		r, err := mustStatus(c.Wait(ctx, "st-b", 10*time.Second, nil))(wire.StatusError)
		if err != nil {
			return err
		}
		if r.Error == nil || r.Error.Type != "KeyboardInterrupt" {
			return fmt.Errorf("want KeyboardInterrupt, got %+v", r.Error)
		}
		return nil
	}},
	{"two sessions don't see each other's names", func(ctx context.Context, c *client.Client, o client.ExecOptions) error {
		r, err := mustStatus(c.Exec(ctx, "st-c", "x", o))(wire.StatusError)
		if err != nil {
			return err
		}
		if r.Error == nil || r.Error.Type != "NameError" {
			return fmt.Errorf("want NameError, got %+v", r.Error)
		}
		return nil
	}},
	{"a crashed session is reported", func(ctx context.Context, c *client.Client, o client.ExecOptions) error {
		r, err := mustStatus(c.Exec(ctx, "st-d", "import os; os._exit(7)", o))(wire.StatusDead)
		if err != nil {
			return err
		}
		if !strings.Contains(r.Death, "status 7") {
			return fmt.Errorf("want a death that names status 7, got %q", r.Death)
		}
		r, err = mustStatus(c.Exec(ctx, "st-d", "1", o))(wire.StatusOK)
		if err != nil {
			return err
		}
		if !strings.Contains(r.Previous, "status 7") {
			return fmt.Errorf("want the next exec to open with the death note, got %q", r.Previous)
		}
		return nil
	}},
}

func mustStatus(r *wire.Result, err error) func(string) (*wire.Result, error) {
	return func(want string) (*wire.Result, error) {
		if err != nil {
			return nil, err
		}
		if r.Status != want {
			return r, fmt.Errorf("want status %s, got %s: %s", want, r.Status, strings.TrimSpace(r.Text()))
		}
		return r, nil
	}
}

func wantValue(r *wire.Result, err error) func(string) error {
	return func(want string) error {
		if _, err := mustStatus(r, err)(wire.StatusOK); err != nil {
			return err
		}
		if r.Value == nil || *r.Value != want {
			return fmt.Errorf("want Out %s, got %s", want, strings.TrimSpace(r.Text()))
		}
		return nil
	}
}

// runSelfTest runs selfChecks against a private hub in a temporary folder.
func runSelfTest(ctx context.Context, e *env, python string) error {
	tmp, err := os.MkdirTemp("", "replhub-self-test-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	vars := map[string]string{
		"XDG_RUNTIME_DIR":    filepath.Join(tmp, "run"),
		"XDG_STATE_HOME":     filepath.Join(tmp, "state"),
		"XDG_CONFIG_HOME":    filepath.Join(tmp, "config"),
		"REPLHUB_SUPERVISOR": "detached",
	}
	if err := os.Mkdir(vars["XDG_RUNTIME_DIR"], 0o700); err != nil {
		return err
	}
	hubEnv := os.Environ()
	for k, v := range vars {
		hubEnv = append(hubEnv, k+"="+v)
	}
	paths, err := config.FromEnv(func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		return e.Getenv(k)
	})
	if err != nil {
		return err
	}
	c := client.New(paths)
	c.Env = hubEnv
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Stop(sctx)
	}()
	o := client.ExecOptions{Python: python, Timeout: 20 * time.Second}
	var first error
	failed := 0
	for _, chk := range selfChecks {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		t0 := time.Now()
		err := chk.run(cctx, c, o)
		cancel()
		if err != nil {
			failed++
			if first == nil {
				first = err
			}
			fmt.Fprintf(e.IO.Out, "FAIL  %s (%s): %v\n", chk.name, wire.Duration(time.Since(t0).Seconds()), err)
		} else {
			fmt.Fprintf(e.IO.Out, "PASS  %s (%s)\n", chk.name, wire.Duration(time.Since(t0).Seconds()))
		}
	}
	if failed == 0 {
		fmt.Fprintf(e.IO.Out, "self-test: PASS, all %d checks passed: replhub works on this machine\n", len(selfChecks))
		return nil
	}
	fmt.Fprintf(e.IO.Out, "self-test: FAIL, %d of %d checks failed; %s\n", failed, len(selfChecks), selfTestAdvice(first))
	e.Code = cmdenv.ExitCellError
	return nil
}

// selfTestAdvice says what to try after a failed self-test, from the
// first failure.
func selfTestAdvice(err error) string {
	msg := cmdenv.ErrorText(err)
	switch {
	case strings.Contains(msg, "python3") || strings.Contains(msg, "python \"") || strings.Contains(msg, "did not start"):
		return "no Python could start: install python3 (Debian: sudo apt-get install -y python3; macOS: brew install python) or pass --python PATH"
	case strings.Contains(msg, "hub"):
		return "the hub did not answer: see the FAIL lines above, and run `replhub hub` in a terminal to see why it cannot start"
	}
	return "see the FAIL lines above; `replhub self-test --python PATH` tries another interpreter"
}
