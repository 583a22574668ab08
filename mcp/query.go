package mcp

import (
	"context"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/wire"
)

// VarsArgs are the vars tool's arguments.
type VarsArgs struct {
	Name  string  `json:"name" jsonschema:"session name"`
	All   bool    `json:"all,omitempty" jsonschema:"list names that start with _ too"`
	Limit Int     `json:"limit,omitempty" jsonschema:"list at most this many names (default 500)"`
	Wait  float64 `json:"wait,omitempty" jsonschema:"seconds to wait for a running cell to finish (default 2, at most 600; negative: do not wait)"`
}

// InspectArgs are the inspect tool's arguments.
type InspectArgs struct {
	Name string  `json:"name" jsonschema:"session name"`
	Expr string  `json:"expr" jsonschema:"a Python expression to evaluate and describe, e.g. df or json.dumps"`
	Wait float64 `json:"wait,omitempty" jsonschema:"seconds to wait for a running cell to finish (default 2, at most 600; negative: do not wait)"`
}

// CompleteArgs are the complete tool's arguments.
type CompleteArgs struct {
	Name  string  `json:"name" jsonschema:"session name"`
	Text  string  `json:"text" jsonschema:"the text to complete: a name, an attribute (os.pa), a dict key (d[\"ke), an import (import js, from os import pa)"`
	Limit Int     `json:"limit,omitempty" jsonschema:"list at most this many completions (default 200)"`
	Wait  float64 `json:"wait,omitempty" jsonschema:"seconds to wait for a running cell to finish (default 2, at most 600; negative: do not wait)"`
}

// ResetArgs are the reset tool's arguments.
type ResetArgs struct {
	Name        string `json:"name" jsonschema:"session name"`
	KeepImports bool   `json:"keep_imports,omitempty" jsonschema:"keep the names bound to modules"`
}

// addQueryTools registers the tools that ask a session about its names
// without running a cell.
func addQueryTools(s *sdk.Server, t *tools) {
	yes, no := true, false
	// vars, inspect and complete change nothing the session keeps, but a
	// repr, a property or the inspected expression is the session's own
	// code: read-only as far as replhub goes.
	sdk.AddTool(s, &sdk.Tool{
		Name:        "vars",
		Description: "List a session's names with type and short repr, one a line, without running a cell (no cell counted, _ unchanged). Waits up to 2 s for a running cell. A repr runs the session's code, bounded in time.",
		Annotations: &sdk.ToolAnnotations{Title: "List a session's names", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no},
		Meta:        metaFor("vars"),
	}, t.vars)
	sdk.AddTool(s, &sdk.Tool{
		Name:        "inspect",
		Description: "Describe the value of a Python expression in a session without running a cell: type, capped repr, len, shape/dtype, signature and doc of callables, where it was defined, public attributes. Evaluating it runs the session's code, bounded in time.",
		Annotations: &sdk.ToolAnnotations{Title: "Inspect a value", ReadOnlyHint: true, OpenWorldHint: &no},
		Meta:        metaFor("inspect"),
	}, t.inspect)
	sdk.AddTool(s, &sdk.Tool{
		Name:        "complete",
		Description: "Complete a name, attribute, dict key or import path in a session without running a cell; each completion is the whole text completed (callables end with '('). Imports nothing.",
		Annotations: &sdk.ToolAnnotations{Title: "Complete in a session", ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: &no},
		Meta:        metaFor("complete"),
	}, t.complete)
	sdk.AddTool(s, &sdk.Tool{
		Name:        "reset",
		Description: "Clear a session's user names, keeping its process, cwd, the toolkit and, with keep_imports, its modules. Refused while a cell runs.",
		Annotations: &sdk.ToolAnnotations{Title: "Reset a session's names", DestructiveHint: &yes, IdempotentHint: true, OpenWorldHint: &no},
		Meta:        metaFor("reset"),
	}, t.reset)
}

func queryOptions(wait float64, limit int) client.QueryOptions {
	return client.QueryOptions{Wait: time.Duration(wait * float64(time.Second)), Limit: limit}
}

func answer(a *wire.Answer, err error) (*sdk.CallToolResult, any, error) {
	if err != nil {
		return failure(err)
	}
	return text(a.TextFor(wire.SurfaceMCP), a.Error != ""), nil, nil
}

func (t *tools) vars(ctx context.Context, req *sdk.CallToolRequest, a VarsArgs) (*sdk.CallToolResult, any, error) {
	return answer(t.c.Vars(ctx, a.Name, a.All, queryOptions(a.Wait, int(a.Limit))))
}

func (t *tools) inspect(ctx context.Context, req *sdk.CallToolRequest, a InspectArgs) (*sdk.CallToolResult, any, error) {
	return answer(t.c.Inspect(ctx, a.Name, a.Expr, queryOptions(a.Wait, 0)))
}

func (t *tools) complete(ctx context.Context, req *sdk.CallToolRequest, a CompleteArgs) (*sdk.CallToolResult, any, error) {
	return answer(t.c.Complete(ctx, a.Name, a.Text, queryOptions(a.Wait, int(a.Limit))))
}

func (t *tools) reset(ctx context.Context, req *sdk.CallToolRequest, a ResetArgs) (*sdk.CallToolResult, any, error) {
	return answer(t.c.Reset(ctx, a.Name, a.KeepImports))
}
