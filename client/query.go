package client

import (
	"context"
	"errors"
	"time"

	"github.com/replhub/replhub/wire"
)

// QueryOptions are a query's optional parts.
type QueryOptions struct {
	// Wait bounds the wait for a running cell: zero means the hub's
	// default (wire.DefaultQueryWait), a negative value not to wait.
	Wait time.Duration
	// Limit bounds the names (Vars) or completions (Complete) listed;
	// zero means the worker's default.
	Limit int
}

func (o QueryOptions) request(op, name string) wire.Request {
	req := wire.Request{Op: op, Name: name, Limit: o.Limit}
	switch {
	case o.Wait < 0:
		req.Wait = -1
	case o.Wait > 0:
		req.Wait = o.Wait.Seconds()
	}
	return req
}

func (c *Client) query(ctx context.Context, req wire.Request) (*wire.Answer, error) {
	rep, err := c.Do(ctx, req, nil)
	if err != nil {
		return nil, err
	}
	if rep.Answer == nil {
		return nil, errors.New("client: malformed reply from hub: no answer")
	}
	return rep.Answer, nil
}

// Vars lists session name's user names with their types and short reprs;
// all lists the names that start with _ too. No cell runs.
func (c *Client) Vars(ctx context.Context, name string, all bool, o QueryOptions) (*wire.Answer, error) {
	req := o.request(wire.OpVars, name)
	req.All = all
	return c.query(ctx, req)
}

// Inspect describes the value of expr in session name. No cell runs, but
// evaluating expr, and the value's repr, may run code of the session's.
func (c *Client) Inspect(ctx context.Context, name, expr string, o QueryOptions) (*wire.Answer, error) {
	req := o.request(wire.OpInspect, name)
	req.Expr = expr
	return c.query(ctx, req)
}

// Complete lists completions of text in session name: names, attributes,
// dict keys, import paths. Each completion is the whole text, completed.
func (c *Client) Complete(ctx context.Context, name, text string, o QueryOptions) (*wire.Answer, error) {
	req := o.request(wire.OpComplete, name)
	req.Text = text
	return c.query(ctx, req)
}

// Reset clears session name's user names; keepImports keeps those bound
// to modules. The process, the toolkit and the session helpers stay. A
// busy session refuses it.
func (c *Client) Reset(ctx context.Context, name string, keepImports bool) (*wire.Answer, error) {
	return c.query(ctx, wire.Request{Op: wire.OpReset, Name: name, KeepImports: keepImports})
}
