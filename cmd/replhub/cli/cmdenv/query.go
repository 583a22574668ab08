package cmdenv

import (
	"context"
	"io"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/cmd/replhub/early"
	"github.com/replhub/replhub/wire"
)

// Query runs ask and prints its answer (PrintAnswer): `replhub vars`,
// `inspect`, `complete` and `reset`.
func (e *Env) Query(ask func(*client.Client) (*wire.Answer, error), asJSON bool) error {
	c, err := e.Client()
	if err != nil {
		return err
	}
	a, err := ask(c)
	if err != nil {
		return err
	}
	return e.PrintAnswer(a, asJSON)
}

// PrintAnswer prints a, as its text or as JSON, and sets the exit status
// it calls for (wire.Answer.ExitCode).
func (e *Env) PrintAnswer(a *wire.Answer, asJSON bool) error {
	if code := a.ExitCode(); code != 0 {
		e.Code = code
	}
	if asJSON {
		return wire.WriteJSON(e.IO.Out, a)
	}
	_, err := io.WriteString(e.IO.Out, a.Text())
	return err
}

// ask is the client's call for the query s that package early took.
func ask(ctx context.Context, c *client.Client, s early.Call) (*wire.Answer, error) {
	q := client.QueryOptions{Wait: seconds(s.Wait), Limit: s.Limit}
	if s.Wait < 0 {
		q.Wait = -1
	}
	switch s.Op {
	case wire.OpVars:
		return c.Vars(ctx, s.Name, s.All, q)
	case wire.OpInspect:
		return c.Inspect(ctx, s.Name, s.Expr, q)
	case wire.OpComplete:
		return c.Complete(ctx, s.Name, s.Text, q)
	}
	return c.Reset(ctx, s.Name, s.KeepImports)
}

// isQuery reports whether op is one of the queries.
func isQuery(op string) bool {
	return op == wire.OpVars || op == wire.OpInspect || op == wire.OpComplete || op == wire.OpReset
}
