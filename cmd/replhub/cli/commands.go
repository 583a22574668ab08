package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/cmd/replhub/cli/cmdenv"
	"github.com/replhub/replhub/hub"
	"github.com/replhub/replhub/internal/lean"
)

type execOptions struct {
	name    string
	code    string
	timeout float64
	python  string
	json    bool
	host    string
	jump    []string
	jumpSet bool
	pythons []string
	sudo    bool
	noWait  bool
	queue   bool
	// maxOutput caps the reply's output; 0 is the hub's default.
	maxOutput int
	// hosts and fanout run the cell on many hosts at once (exec --hosts).
	hosts  string
	fanout int
}

func newExecCmd(e *env) *cobra.Command {
	o := &execOptions{}
	cmd := &cobra.Command{
		Use:   "exec NAME CODE|-",
		Short: "Run code in a session, creating it on first use",
		Long: `Run CODE in session NAME (with -, read the code from standard input). The
first exec under a new name creates the session in your cwd and environment.
The last expression's value is printed as Out[n]. Past the timeout the call
returns and the cell keeps running: replhub wait collects it.

With --hosts the cell runs in session NAME@HOST on every host at once, and
the replies are grouped: hosts with the same output and value share one
block. The group is remembered: exec, wait, interrupt and kill of NAME act
on all its hosts.

Exit status: 0 ok, 1 the cell raised, 2 replhub failed, 3 still running,
4 the session died; for a group, the worst of its hosts' (4, then 2, 1, 3).`,
		Example: `  replhub exec chirp 'import json; cfg = {"port": 8080}'
  replhub exec chirp 'cfg["port"] + 1'
  replhub exec chirp - < script.py
  replhub exec lab 'import platform; platform.node()' --host lab-7 --jump gw1
  replhub exec probe 'platform.release()' --hosts 'lab-[1-40],gw-2'
  replhub exec probe 'platform.release()' --hosts @lab --json
  replhub exec ops 'import os; os.geteuid()' --sudo`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.name = args[0]
			o.jumpSet = cmd.Flags().Changed("jump")
			if err := noEmptyPlace(cmd); err != nil {
				return err
			}
			if cmd.Flags().Changed("host") && cmd.Flags().Changed("hosts") {
				return errors.New("--host and --hosts do not go together: --host runs one session on a host, --hosts one on each of many (NAME@HOST)")
			}
			var err error
			if o.code, err = e.ReadCode(args[1]); err != nil {
				return err
			}
			return runExec(cmd.Context(), e, o)
		},
	}
	o.sessionFlags(cmd)
	cmd.Flags().Lookup("timeout").Usage = "seconds to wait before returning (at most 600); the cell keeps running"
	cmd.Flags().BoolVar(&o.noWait, "no-wait", false, "return the cell's number once it has started; replhub wait NAME --cell N collects it")
	cmd.Flags().BoolVar(&o.queue, "queue", false, "on a busy session, queue the cell instead of failing: its number comes at once, replhub wait NAME --cell N collects it")
	cmd.Flags().StringVar(&o.hosts, "hosts", "", "run it on all these hosts at once, as sessions NAME@HOST: lab-[1-3,7],gw-2 or @GROUP (config.json's \"groups\")")
	cmd.Flags().IntVar(&o.fanout, "fanout", 0, "with --hosts: how many hosts connect at once (default config.json's \"fanout\", else 16)")
	return cmd
}

// emptyPlace is what each flag that says where a session runs is for,
// when it is given empty: an empty --host or --hosts ran the cell here,
// which a script with an unset variable never meant.
var emptyPlace = map[string]string{
	"host":   "give a host ([user@]host[:port] or an ssh_config alias), or leave the flag out for a session on this machine",
	"hosts":  "give hosts (lab-[1-3],gw-2 or @GROUP)",
	"python": "give an interpreter's name or path, or leave the flag out for the default",
}

// noEmptyPlace refuses a --host, --hosts or --python given empty.
func noEmptyPlace(cmd *cobra.Command) error {
	for _, name := range []string{"host", "hosts", "python"} {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed && f.Value.String() == "" {
			return fmt.Errorf("--%s is empty: %s", name, emptyPlace[name])
		}
	}
	return nil
}

// sessionFlags adds the flags that exec and run share: where a new
// session runs, how long to wait, how to print.
func (o *execOptions) sessionFlags(cmd *cobra.Command) {
	cmd.Flags().Float64VarP(&o.timeout, "timeout", "t", cmdenv.DefaultTimeout, "seconds the cell may run (at most 600)")
	cmd.Flags().StringVar(&o.python, "python", "", "interpreter for a new session (default $REPLHUB_PYTHON, else python3 on PATH)")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the result as JSON")
	cmd.Flags().StringVar(&o.host, "host", "", "run a new session on this host over ssh: [user@]host[:port] or an ssh_config alias")
	cmd.Flags().StringSliceVar(&o.jump, "jump", nil, "jump hosts, in order (J1,J2); --jump none turns configured ones off")
	cmd.Flags().StringSliceVar(&o.pythons, "pythons", nil, "interpreters to try first on the host: names, paths, folders or globs")
	cmd.Flags().BoolVar(&o.sudo, "sudo", false, "run a new session as root through sudo (a password is asked with $SUDO_ASKPASS)")
	maxOutputFlag(cmd, &o.maxOutput)
}

// client is o as the client's options.
func (o *execOptions) client() client.ExecOptions {
	eo := client.ExecOptions{
		Timeout:   time.Duration(o.timeout * float64(time.Second)),
		Python:    o.python,
		Host:      o.host,
		Pythons:   o.pythons,
		Sudo:      o.sudo,
		NoWait:    o.noWait,
		Queue:     o.queue,
		MaxOutput: o.maxOutput,
		Hosts:     o.hosts,
		Fanout:    o.fanout,
	}
	if o.jumpSet {
		jump := []string{}
		for _, j := range o.jump {
			if j != "" && j != "none" {
				jump = append(jump, j)
			}
		}
		eo.Jump = &jump
	}
	return eo
}

// maxOutputFlag adds --max-output, the reply's own output cap.
func maxOutputFlag(cmd *cobra.Command, p *int) {
	cmd.Flags().IntVar(p, "max-output", 0, fmt.Sprintf("cap this reply's output at this many characters, head and tail kept (default %d, at most %d)", hub.ReplyCap, hub.MaxReplyCap))
}

func checkMaxOutput(n int) error {
	if n < 0 || n > hub.MaxReplyCap {
		return fmt.Errorf("--max-output must be between 1 and %d characters (0, or none, is the default: %d)", hub.MaxReplyCap, hub.ReplyCap)
	}
	return nil
}

func checkTimeout(t float64) error {
	if !lean.TimeoutOK(t) {
		return fmt.Errorf("-t must be more than 0 and at most %d seconds", int(hub.MaxTimeout.Seconds()))
	}
	return nil
}

func runExec(ctx context.Context, e *env, o *execOptions) error {
	if err := checkMaxOutput(o.maxOutput); err != nil {
		return err
	}
	if o.fanout < 0 {
		return fmt.Errorf("--fanout must be a number of hosts from 1")
	}
	if err := checkTimeout(o.timeout); err != nil {
		return err
	}
	return e.Exec(ctx, o.name, o.code, o.client(), o.json)
}

type waitOptions struct {
	name      string
	timeout   float64
	json      bool
	cell      int
	maxOutput int
}

// errCellNumber refuses a --cell that is no cell's number.
var errCellNumber = errors.New("--cell takes a cell number, 1 or more")

func newWaitCmd(e *env) *cobra.Command {
	o := &waitOptions{}
	cmd := &cobra.Command{
		Use:   "wait NAME",
		Short: "Collect the output and result of a session's running or unread cell",
		Example: `  replhub exec build 'run_long_job()' -t 5    # returns after 5 s
  replhub wait build -t 120`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.name = args[0]
			if cmd.Flags().Changed("cell") && o.cell < 1 {
				return errCellNumber
			}
			return runWait(cmd.Context(), e, o)
		},
	}
	cmd.Flags().Float64VarP(&o.timeout, "timeout", "t", cmdenv.DefaultTimeout, "seconds to wait (at most 600)")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the result as JSON")
	cmd.Flags().IntVar(&o.cell, "cell", 0, "collect this cell only (as exec --no-wait numbered it; of a group, the group's number)")
	maxOutputFlag(cmd, &o.maxOutput)
	return cmd
}

func runWait(ctx context.Context, e *env, o *waitOptions) error {
	if err := checkMaxOutput(o.maxOutput); err != nil {
		return err
	}
	if err := checkTimeout(o.timeout); err != nil {
		return err
	}
	return e.Wait(ctx, o.name, o.cell, time.Duration(o.timeout*float64(time.Second)), o.maxOutput, o.json)
}

func newInterruptCmd(e *env) *cobra.Command {
	var cell int
	cmd := &cobra.Command{
		Use:   "interrupt NAME",
		Short: "Raise KeyboardInterrupt in a session's running cell, or take a queued one out",
		Example: `  replhub interrupt build
  replhub interrupt build --cell 7`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("cell") && cell < 1 {
				return errCellNumber
			}
			return e.Message(func(c *client.Client) (string, error) {
				return c.InterruptCell(cmd.Context(), args[0], cell)
			})
		},
	}
	cmd.Flags().IntVar(&cell, "cell", 0, "only this cell: a queued one is taken out of the queue, the running one interrupted, a finished one left alone")
	return cmd
}

func newKillCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "kill NAME",
		Short:   "End a session and free its name",
		Example: `  replhub kill build`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.Message(func(c *client.Client) (string, error) {
				return c.Kill(cmd.Context(), args[0])
			})
		},
	}
}

type sessionsOptions struct {
	name string
	json bool
}

func newSessionsCmd(e *env) *cobra.Command {
	o := &sessionsOptions{}
	cmd := &cobra.Command{
		Use:   "sessions [NAME]",
		Short: "List sessions (or show one in detail)",
		Example: `  replhub sessions
  replhub sessions chirp
  replhub sessions --json`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.name = args[0]
			}
			return runSessions(cmd.Context(), e, o)
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print the list (and the hub's facts) as JSON")
	return cmd
}

func runSessions(ctx context.Context, e *env, o *sessionsOptions) error {
	return e.Sessions(ctx, o.name, o.json)
}

func newStartCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "start",
		Short: "Start the hub now (any command starts it on first use)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := e.Client()
			if err != nil {
				return err
			}
			if err := c.Ping(cmd.Context()); err != nil {
				return err
			}
			l, err := c.Sessions(cmd.Context())
			if err != nil {
				return err
			}
			fmt.Fprintf(e.IO.Out, "hub running: pid %d, %s, socket %s, log %s\n", l.Hub.Pid, l.Hub.Supervisor, l.Hub.Socket, l.Hub.Log)
			return nil
		},
	}
}

func newRestartCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "restart",
		Short: "Replace the hub with the binary on disk; local sessions go on",
		Long: `Replace the running hub with the replhub binary now on disk (after an
upgrade, say). Local sessions, root ones included, keep running through it:
the new hub adopts them with their names, cells, unread output and a cell
still running. Sessions on other hosts end, as at stop.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.Message(func(c *client.Client) (string, error) {
				return c.Restart(cmd.Context())
			})
		},
	}
}

func newStopCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "stop",
		Short: "Stop the hub: idle sessions go to disk, the rest end",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.Message(func(c *client.Client) (string, error) {
				return c.StopAndWait(cmd.Context())
			})
		},
	}
}
