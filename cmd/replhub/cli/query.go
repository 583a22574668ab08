package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/hub"
	"github.com/replhub/replhub/wire"
)

// queryOptions are what vars, inspect and complete share.
type queryOptions struct {
	wait  float64
	limit int
	json  bool
}

func (o *queryOptions) flags(cmd *cobra.Command, limit bool) {
	cmd.Flags().Float64Var(&o.wait, "wait", wire.DefaultQueryWait, "seconds to wait for a running cell to finish (0: do not wait; at most 600)")
	cmd.Flags().BoolVar(&o.json, "json", false, "print the answer as JSON")
	if limit {
		cmd.Flags().IntVar(&o.limit, "limit", 0, "list at most this many (default 500 names, 200 completions)")
	}
}

func (o *queryOptions) client() (client.QueryOptions, error) {
	if !(o.wait >= 0 && o.wait <= hub.MaxTimeout.Seconds()) { // NaN too
		return client.QueryOptions{}, fmt.Errorf("--wait must be between 0 and %d seconds", int(hub.MaxTimeout.Seconds()))
	}
	if o.limit < 0 {
		return client.QueryOptions{}, fmt.Errorf("--limit must not be negative")
	}
	q := client.QueryOptions{Wait: time.Duration(o.wait * float64(time.Second)), Limit: o.limit}
	if o.wait == 0 {
		q.Wait = -1
	}
	return q, nil
}

// query runs ask with o and prints its answer (cmdenv.Env.Query).
func (e *env) query(o *queryOptions, ask func(*client.Client, client.QueryOptions) (*wire.Answer, error)) error {
	qo, err := o.client()
	if err != nil {
		return err
	}
	return e.Query(func(c *client.Client) (*wire.Answer, error) { return ask(c, qo) }, o.json)
}

func newVarsCmd(e *env) *cobra.Command {
	o := &queryOptions{}
	var all bool
	cmd := &cobra.Command{
		Use:   "vars NAME",
		Short: "List a session's names with their types and short reprs, without running a cell",
		Long: `List the names the user made in session NAME, one a line: name, type and a
short repr. The toolkit and the session helpers are left out, and so are names
that start with _ unless --all. No cell runs: the cell count, _ and the
transcript stay as they are. A running cell is waited for up to --wait
seconds. A repr is user code: each is bounded in time and size.`,
		Example: `  replhub vars chirp
  replhub vars chirp --all --limit 50 --json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.query(o, func(c *client.Client, q client.QueryOptions) (*wire.Answer, error) {
				return c.Vars(cmd.Context(), args[0], all, q)
			})
		},
	}
	o.flags(cmd, true)
	cmd.Flags().BoolVar(&all, "all", false, "list the names that start with _ too")
	return cmd
}

func newInspectCmd(e *env) *cobra.Command {
	o := &queryOptions{}
	cmd := &cobra.Command{
		Use:   "inspect NAME EXPR",
		Short: "Describe a value in a session without running a cell",
		Long: `Evaluate the expression EXPR in session NAME and describe its value: type,
repr (capped), len, shape and dtype where it has them, signature and the first
lines of its doc for a callable, where it was defined, and public attributes
for modules, classes and objects. No cell runs, but evaluating EXPR and the
value's repr run session code: each is bounded in time.`,
		Example: `  replhub inspect chirp cfg
  replhub inspect chirp 'df.groupby'
  replhub inspect chirp json --json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.query(o, func(c *client.Client, q client.QueryOptions) (*wire.Answer, error) {
				return c.Inspect(cmd.Context(), args[0], args[1], q)
			})
		},
	}
	o.flags(cmd, false)
	return cmd
}

func newCompleteCmd(e *env) *cobra.Command {
	o := &queryOptions{}
	cmd := &cobra.Command{
		Use:   "complete NAME TEXT",
		Short: "Complete a name, attribute, dict key or import path in a session",
		Long: `List the completions of TEXT in session NAME, one a line, each the whole
TEXT completed: names and keywords, attributes (os.pa), dict keys (d["ke),
import paths (import js, from os import pa). Callables end with "(". No
module is imported to complete it.`,
		Example: `  replhub complete chirp 'cfg["po'
  replhub complete chirp 'from os import pa'`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return e.query(o, func(c *client.Client, q client.QueryOptions) (*wire.Answer, error) {
				return c.Complete(cmd.Context(), args[0], args[1], q)
			})
		},
	}
	o.flags(cmd, true)
	return cmd
}

func newResetCmd(e *env) *cobra.Command {
	var keep, asJSON bool
	cmd := &cobra.Command{
		Use:   "reset NAME",
		Short: "Clear a session's names, keeping its process",
		Long: `Clear every name the user made in session NAME; names of the toolkit and the
session helpers the user rebound get their first values back. The process
stays, with its cwd, threads and children; --keep-imports keeps the names
bound to modules. A session running a cell refuses it. The transcript notes it.`,
		Example: `  replhub reset chirp
  replhub reset chirp --keep-imports`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runReset(cmd.Context(), e, args[0], keep, asJSON)
		},
	}
	cmd.Flags().BoolVar(&keep, "keep-imports", false, "keep the names bound to modules")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the answer as JSON")
	return cmd
}

func runReset(ctx context.Context, e *env, name string, keep, asJSON bool) error {
	return e.Query(func(c *client.Client) (*wire.Answer, error) { return c.Reset(ctx, name, keep) }, asJSON)
}
