// Package mcp is replhub's MCP stdio server, built on the official Go SDK.
//
// It is a thin face over package client: every tool but memory is one hub
// request, and a tool's text is what the CLI would print. memory works on
// this machine's Claude Code memory folder itself, through package memory. All state lives in the hub, so
// an MCP server process that its client restarts loses nothing.
package mcp

import (
	"context"
	"fmt"
	"io"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/wire"
)

// Instructions tell an agent how to use the tools; the essentials come first
// because clients may cut them. Keep them under 2 KB.
const Instructions = `replhub keeps named Python sessions alive between calls: imports, loaded data, open connections and functions persist until the session is killed.

Before you start, call sessions and reuse a session whose names and cwd fit the task instead of creating a new one and redoing its work.

- exec runs code in a session, creating it on first use in the hub caller's cwd and environment. The last expression's value comes back as Out[n]. Load big things once, then query them in later calls.
- Past its timeout (default 30 s, at most 600) exec returns while the cell keeps running; call wait to collect its output and result. One cell at a time per session: run independent work in separate sessions.
- interrupt raises KeyboardInterrupt in the running cell. kill ends a session and frees its name.
- Output is capped at 30,000 characters per reply (head and tail kept): print summaries, not whole data sets.
- A session that died is reported with how it died on the next exec under its name.
- A session idle for a day goes to disk; the next exec under its name brings it back with a note of what did not survive (sockets, open files, threads).
- Every session has a toolkit (tkhelp() lists it): read, readn, write, edit, edits, sed, glob, grep, diff, sh, bg, sudo, fetch, cd, memory. Use them in exec to read, edit, search and run commands where the session runs (also on hosts and as root); sh(cmd, host="h") runs on another host.
- memory reads and maintains Claude Code's auto memory for the project (MEMORY.md and its entries) without a session.

This is not a sandbox: code runs with the user's privileges.`

// maxResultChars is declared on exec so that clients that cap tool results
// leave room for a full 30,000-character reply plus its notes.
const maxResultChars = 40000

// ExecArgs are the exec tool's arguments.
type ExecArgs struct {
	Name    string   `json:"name" jsonschema:"session name: letters, digits and ._- (at most 64); created on first use"`
	Code    string   `json:"code" jsonschema:"Python source to run; the last expression's value is returned"`
	Timeout float64  `json:"timeout,omitempty" jsonschema:"seconds to wait before returning (default 30, at most 600); the cell keeps running after it"`
	Python  string   `json:"python,omitempty" jsonschema:"interpreter for a new session (default $REPLHUB_PYTHON, else python3 on PATH; on a host: that exact interpreter)"`
	Host    string   `json:"host,omitempty" jsonschema:"run a new session on this host over ssh: [user@]host[:port] or an ssh_config alias"`
	Jump    []string `json:"jump,omitempty" jsonschema:"jump hosts in order; an empty list turns configured ones off"`
	Pythons []string `json:"pythons,omitempty" jsonschema:"interpreters to try first on the host: names, paths, folders or globs"`
	Sudo    bool     `json:"sudo,omitempty" jsonschema:"run a new session as root through sudo; a password is asked with $SUDO_ASKPASS where the server runs"`
}

// NameArgs name a session.
type NameArgs struct {
	Name string `json:"name" jsonschema:"session name"`
}

// WaitArgs are the wait tool's arguments.
type WaitArgs struct {
	Name    string  `json:"name" jsonschema:"session name"`
	Timeout float64 `json:"timeout,omitempty" jsonschema:"seconds to wait (default 30, at most 600)"`
}

// SessionsArgs are the sessions tool's arguments.
type SessionsArgs struct {
	Name string `json:"name,omitempty" jsonschema:"show only this session, in detail"`
}

// NewServer builds the MCP server with every tool registered.
func NewServer(c *client.Client, version string) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "replhub", Version: version},
		&sdk.ServerOptions{Instructions: Instructions})
	t := &tools{c: c}
	yes, no := true, false
	sdk.AddTool(s, &sdk.Tool{
		Name:        "exec",
		Description: "Run Python code in a named persistent session (created on first use). Returns output, Out[n] value or traceback, and notes about other sessions.",
		Annotations: &sdk.ToolAnnotations{Title: "Run Python in a session", DestructiveHint: &yes, OpenWorldHint: &yes},
		Meta:        sdk.Meta{"anthropic/maxResultSizeChars": maxResultChars},
	}, t.exec)
	sdk.AddTool(s, &sdk.Tool{
		Name:        "wait",
		Description: "Wait for a session's running cell (one that outlived exec's timeout) and collect its output and result.",
		Annotations: &sdk.ToolAnnotations{Title: "Collect a running cell", ReadOnlyHint: true, OpenWorldHint: &no},
		Meta:        sdk.Meta{"anthropic/maxResultSizeChars": maxResultChars},
	}, t.wait)
	sdk.AddTool(s, &sdk.Tool{
		Name:        "interrupt",
		Description: "Raise KeyboardInterrupt in a session's running cell; the session and its state stay.",
		Annotations: &sdk.ToolAnnotations{Title: "Interrupt a cell", DestructiveHint: &no, OpenWorldHint: &no},
	}, t.interrupt)
	sdk.AddTool(s, &sdk.Tool{
		Name:        "kill",
		Description: "End a session and everything in it, and free its name.",
		Annotations: &sdk.ToolAnnotations{Title: "Kill a session", DestructiveHint: &yes, IdempotentHint: true, OpenWorldHint: &no},
	}, t.kill)
	sdk.AddTool(s, &sdk.Tool{
		Name:        "sessions",
		Description: "List live sessions (pid, python, age, idle time, cells, memory, cwd, state, top-level names) and recent deaths. Call this first and reuse a fitting session.",
		Annotations: &sdk.ToolAnnotations{Title: "List sessions", ReadOnlyHint: true, OpenWorldHint: &no},
	}, t.sessions)
	addMemoryTool(s)
	addQueryTools(s, t)
	return s
}

// Serve runs the server on in/out until the client disconnects or ctx ends.
func Serve(ctx context.Context, c *client.Client, version string, in io.ReadCloser, out io.WriteCloser) error {
	s := NewServer(c, version)
	return s.Run(ctx, &sdk.IOTransport{Reader: in, Writer: out})
}

type tools struct{ c *client.Client }

func text(s string, isErr bool) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}, IsError: isErr}
}

func failure(err error) (*sdk.CallToolResult, any, error) {
	return text("replhub: "+err.Error(), true), nil, nil
}

// progressFor relays the hub's progress to the client, when it asked.
func progressFor(ctx context.Context, req *sdk.CallToolRequest) func(*wire.Progress) {
	token := req.Params.GetProgressToken()
	if token == nil {
		return nil
	}
	return func(p *wire.Progress) {
		req.Session.NotifyProgress(ctx, &sdk.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      float64(p.ElapsedMS) / 1000,
			Message:       fmt.Sprintf("session '%s' cell %d running for %s, %d characters of output so far", p.Session, p.Cell, wire.Duration(float64(p.ElapsedMS)/1000), p.OutputChars),
		})
	}
}

func (t *tools) exec(ctx context.Context, req *sdk.CallToolRequest, a ExecArgs) (*sdk.CallToolResult, any, error) {
	o := client.ExecOptions{
		Timeout:    time.Duration(a.Timeout * float64(time.Second)),
		Python:     a.Python,
		Host:       a.Host,
		Pythons:    a.Pythons,
		Sudo:       a.Sudo,
		OnProgress: progressFor(ctx, req),
	}
	if a.Jump != nil {
		o.Jump = &a.Jump
	}
	res, err := t.c.Exec(ctx, a.Name, a.Code, o)
	if err != nil {
		if ctx.Err() != nil {
			return t.cancelled(a.Name), nil, nil
		}
		return failure(err)
	}
	return text(res.Text(), false), nil, nil
}

// cancelled interrupts the cell of a call its client cancelled, and says so.
func (t *tools) cancelled(name string) *sdk.CallToolResult {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg, err := t.c.Interrupt(ctx, name)
	if err != nil {
		return text(fmt.Sprintf("cancelled by the client; interrupting session '%s' failed: %v", name, err), true)
	}
	out := fmt.Sprintf("[cancelled by the client: %s]\n", msg)
	if res, err := t.c.Wait(ctx, name, 5*time.Second, nil); err == nil {
		out += res.Text()
	}
	return text(out, false)
}

func (t *tools) wait(ctx context.Context, req *sdk.CallToolRequest, a WaitArgs) (*sdk.CallToolResult, any, error) {
	res, err := t.c.Wait(ctx, a.Name, time.Duration(a.Timeout*float64(time.Second)), progressFor(ctx, req))
	if err != nil {
		if ctx.Err() != nil {
			return text("cancelled by the client; the cell keeps running", false), nil, nil
		}
		return failure(err)
	}
	return text(res.Text(), false), nil, nil
}

func (t *tools) interrupt(ctx context.Context, req *sdk.CallToolRequest, a NameArgs) (*sdk.CallToolResult, any, error) {
	msg, err := t.c.Interrupt(ctx, a.Name)
	if err != nil {
		return failure(err)
	}
	return text(msg, false), nil, nil
}

func (t *tools) kill(ctx context.Context, req *sdk.CallToolRequest, a NameArgs) (*sdk.CallToolResult, any, error) {
	msg, err := t.c.Kill(ctx, a.Name)
	if err != nil {
		return failure(err)
	}
	return text(msg, false), nil, nil
}

func (t *tools) sessions(ctx context.Context, req *sdk.CallToolRequest, a SessionsArgs) (*sdk.CallToolResult, any, error) {
	l, err := t.c.Sessions(ctx)
	if err != nil {
		return failure(err)
	}
	if a.Name != "" && !l.Only(a.Name) {
		return text(fmt.Sprintf("no session '%s'", a.Name), true), nil, nil
	}
	return text(l.Text(a.Name != ""), false), nil, nil
}
