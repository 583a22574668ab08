// Package mcp is replhub's MCP stdio server, built on the official Go SDK.
//
// It is a thin face over package client: every tool but memory is one hub
// request, and a tool's text is what the CLI would print. memory works on
// this machine's Claude Code memory folder itself, through package memory. All state lives in the hub, so
// an MCP server process that its client restarts loses nothing.
package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/internal/lean"
	"github.com/replhub/replhub/modules"
	"github.com/replhub/replhub/wire"
)

// Instructions tell an agent how to use the tools; the essentials come first
// because clients may cut them. The line {modules} becomes the list of
// modules (see instructions); the whole stays under 2 KB.
const Instructions = `replhub keeps named Python sessions alive between calls: imports, data, connections and functions persist until the session is killed.

Before you start, call sessions and reuse a session that fits the task rather than redo its work.

- exec runs code in a session (created on first use, in the server's cwd and environment); the last expression's value comes back as Out[n], a figure or image as an image. Cells may await. Load big things once, query them later.
- host starts it on an ssh host (nothing is installed there); sudo makes it root; later calls use the name alone.
- Past its timeout (default 30 s, at most 600) exec returns and the cell runs on: wait collects it. A cancelled call interrupts its cell; the next reply shows what it wrote. One cell at a time per session: use more sessions, or queue true to line cells up.
- A reply holds at most 40,000 characters: print summaries, not whole data.
- Code in a session drives others: s = session("db", host="h", sudo=True); s.put(x=x); s.call(f, *args) returns f's value from there (into="name" keeps it there); s.get("y"); s.push(src, dest), s.pull(path) move files; sessions() lists them.
{modules}
- The toolkit is preloaded everywhere: tkhelp() lists it (read, edit, grep, glob, diff, sh, bg, sudo, fetch, ...). Prefer it to shelling out.
- An idle session goes to disk after a day; the next exec restores it. A death is told once.
- vars, inspect and complete look into a session without running a cell; reset clears its names.
- memory maintains Claude Code's auto memory (MEMORY.md) without a session.

This is not a sandbox: code runs with the user's privileges.`

// maxResultChars caps every reply, whatever comes before the cell's own
// output (an earlier unread result, notes), and is declared on every tool
// as _meta "anthropic/maxResultSizeChars" (meta.go). Claude Code 2.1.332
// saves a reply longer than the declared size to a file and hands the
// model a 2 KB preview (tests/claudecode_test.go shows both sides).
//
// From Claude Code's documentation ("MCP output limits",
// code.claude.com/docs/en/mcp): it shows a warning when a tool's output
// passes 10,000 tokens and refuses it past MAX_MCP_OUTPUT_TOKENS (25,000
// by default); text over 50,000 characters is saved to a file and only a
// preview reaches the model, unless the tool declares its own limit with
// anthropic/maxResultSizeChars (up to 500,000). 40,000 characters is about
// 10,000 tokens of ordinary text and stays under 25,000 even for dense
// text, so a reply that keeps to it reaches the model whole and inline;
// the hub's 30,000-character output cap leaves room for the rest.
const maxResultChars = 40000

// maxErrorChars caps a reply marked isError: Claude Code shows only the
// head of an error's text past about 11,000 characters (the same page), so
// the reply is cut here instead, keeping its tail, where a traceback ends.
const maxErrorChars = 10000

// ExecArgs are the exec tool's arguments.
type ExecArgs struct {
	Name      string   `json:"name" jsonschema:"session name: letters, digits and ._- (at most 64); created on first use"`
	Code      string   `json:"code" jsonschema:"Python source to run; the last expression's value is returned"`
	Timeout   float64  `json:"timeout,omitempty" jsonschema:"seconds to wait before returning (default 30, at most 600); the cell keeps running after it"`
	Python    string   `json:"python,omitempty" jsonschema:"interpreter for a new session (default $REPLHUB_PYTHON, else python3 on PATH; on a host: that exact interpreter)"`
	Host      string   `json:"host,omitempty" jsonschema:"run a new session on this host over ssh: [user@]host[:port] or an ssh_config alias"`
	Jump      []string `json:"jump,omitempty" jsonschema:"jump hosts in order; an empty list turns configured ones off"`
	Pythons   []string `json:"pythons,omitempty" jsonschema:"interpreters to try first on the host: names, paths, folders or globs"`
	Sudo      bool     `json:"sudo,omitempty" jsonschema:"run a new session as root through sudo; a password is asked with $SUDO_ASKPASS where the server runs"`
	NoWait    bool     `json:"no_wait,omitempty" jsonschema:"return as soon as the cell has started, with its number; wait with that cell collects it"`
	MaxOutput Int      `json:"max_output,omitempty" jsonschema:"cap this reply's output at this many characters, head and tail kept (default 30000, at most 40000)"`
	Queue     bool     `json:"queue,omitempty" jsonschema:"when the session is busy, queue the cell (at most 64) instead of failing: its number comes back at once; wait with that cell collects it, interrupt with that cell takes it out"`
	Hosts     string   `json:"hosts,omitempty" jsonschema:"run the cell on all these hosts at once, in sessions NAME@HOST: a node set like lab-[1-3,7],gw-2 or @GROUP from config.json; replies are grouped, and later calls with name alone reach the whole group"`
	Fanout    Int      `json:"fanout,omitempty" jsonschema:"with hosts: how many hosts connect at once (default config.json's fanout, else 16)"`
}

// NameArgs name a session.
type NameArgs struct {
	Name string `json:"name" jsonschema:"session name"`
}

// InterruptArgs are the interrupt tool's arguments.
type InterruptArgs struct {
	Name string `json:"name" jsonschema:"session name"`
	Cell Int    `json:"cell,omitempty" jsonschema:"only this cell: a queued one is taken out of the queue, the running one interrupted, a finished one left alone"`
}

// WaitArgs are the wait tool's arguments.
type WaitArgs struct {
	Name      string  `json:"name" jsonschema:"session name"`
	Timeout   float64 `json:"timeout,omitempty" jsonschema:"seconds to wait (default 30, at most 600)"`
	Cell      Int     `json:"cell,omitempty" jsonschema:"collect this cell only (the number exec with no_wait returned; of a group, the group's number)"`
	MaxOutput Int     `json:"max_output,omitempty" jsonschema:"cap this reply's output at this many characters, head and tail kept (default 30000, at most 40000)"`
}

// SessionsArgs are the sessions tool's arguments.
type SessionsArgs struct {
	Name string `json:"name,omitempty" jsonschema:"show only this session, in detail"`
}

// NewServer builds the MCP server with every tool registered. It sets
// c.Surface: the hub words its advice in terms of the tools.
func NewServer(c *client.Client, version string) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "replhub", Version: version},
		&sdk.ServerOptions{Instructions: instructions(modules.List(modulesDir(c)))})
	c.Surface = wire.SurfaceMCP
	t := &tools{c: c}
	yes, no := true, false
	sdk.AddTool(s, &sdk.Tool{
		Name:        "exec",
		Description: "Run Python code in a named persistent session (created on first use). Returns output, Out[n] value or traceback, and notes about other sessions.",
		Annotations: &sdk.ToolAnnotations{Title: "Run Python in a session", DestructiveHint: &yes, OpenWorldHint: &yes},
		Meta:        metaFor("exec"),
	}, t.exec)
	sdk.AddTool(s, &sdk.Tool{
		Name:        "wait",
		Description: "Wait for a session's running cell (one that outlived exec's timeout), or a queued cell by its number, and collect its output and result.",
		Annotations: &sdk.ToolAnnotations{Title: "Collect a running cell", ReadOnlyHint: true, OpenWorldHint: &no},
		Meta:        metaFor("wait"),
	}, t.wait)
	sdk.AddTool(s, &sdk.Tool{
		Name:        "interrupt",
		Description: "Raise KeyboardInterrupt in a session's running cell; the session and its state stay. With cell, a queued cell is taken out of the queue instead.",
		Annotations: &sdk.ToolAnnotations{Title: "Interrupt a cell", DestructiveHint: &no, OpenWorldHint: &no},
		Meta:        metaFor("interrupt"),
	}, t.interrupt)
	sdk.AddTool(s, &sdk.Tool{
		Name:        "kill",
		Description: "End a session and everything in it, and free its name.",
		Annotations: &sdk.ToolAnnotations{Title: "Kill a session", DestructiveHint: &yes, IdempotentHint: true, OpenWorldHint: &no},
		Meta:        metaFor("kill"),
	}, t.kill)
	sdk.AddTool(s, &sdk.Tool{
		Name:        "sessions",
		Description: "List live sessions (pid, python, age, idle time, cells, memory, cwd, state, top-level names) and recent deaths. Call this first and reuse a fitting session.",
		Annotations: &sdk.ToolAnnotations{Title: "List sessions", ReadOnlyHint: true, OpenWorldHint: &no},
		Meta:        metaFor("sessions"),
	}, t.sessions)
	addMemoryTool(s)
	addQueryTools(s, t)
	return s
}

// Serve runs the server on in/out until the client disconnects or ctx ends.
// A line that is no JSON-RPC message is answered with an error and skipped
// (lineReader): it does not end the server.
func Serve(ctx context.Context, c *client.Client, version string, in io.ReadCloser, out io.WriteCloser) error {
	s := NewServer(c, version)
	w := &lockedWriter{w: out}
	// The SDK's bound is one byte over maxLine: the newline after a
	// message may be read with the next one.
	return s.Run(ctx, cancelTransport{&sdk.IOTransport{Reader: newLineReader(in, w, maxLine), Writer: w, MaxLineLength: maxLine + 1}})
}

type tools struct {
	c   *client.Client
	ids sync.Map // *sdk.ServerSession → its client id for the hub
}

// withID marks ctx with the client id of the MCP connection that req came
// on: the hub tells each connection of each death once.
func (t *tools) withID(ctx context.Context, req *sdk.CallToolRequest) context.Context {
	var key any = req.Session
	if req.Session == nil {
		key = t
	}
	id, ok := t.ids.Load(key)
	if !ok {
		var b [8]byte
		rand.Read(b[:])
		id, _ = t.ids.LoadOrStore(key, "mcp-"+hex.EncodeToString(b[:]))
	}
	return client.WithID(ctx, id.(string))
}

// text is a reply, capped at the size declared for it.
func text(s string, isErr bool) *sdk.CallToolResult {
	if isErr {
		s = wire.Fit(s, maxErrorChars)
	} else {
		s = wire.Fit(s, maxResultChars)
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}, IsError: isErr}
}

// result is a cell's reply: an error when the cell raised or its session
// died, as the CLI's exit codes 1 and 4 say.
func result(res *wire.Result) *sdk.CallToolResult {
	failed := res.Status == wire.StatusError || res.Status == wire.StatusDead || res.Status == wire.StatusFailed
	return withImages(text(res.TextFor(wire.SurfaceMCP), failed), res)
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
			Message:       progressMessage(p),
		})
	}
}

func progressMessage(p *wire.Progress) string {
	if p.Hosts > 0 {
		return fmt.Sprintf("group '%s': %d/%d hosts done, %d failed", p.Session, p.Done, p.Hosts, p.Failed)
	}
	return fmt.Sprintf("session '%s' cell %d running for %s, %d characters of output so far", p.Session, p.Cell, wire.Duration(float64(p.ElapsedMS)/1000), p.OutputChars)
}

// checkMaxOutput keeps a call's output cap within what one reply holds.
func checkMaxOutput(n int) error {
	if n < 0 || n > maxResultChars {
		return fmt.Errorf("max_output must be between 1 and %d (a reply holds at most %d characters)", maxResultChars, maxResultChars)
	}
	return nil
}

// checkTimeout keeps a call's timeout within what the hub takes (0: its
// default), as the command line does: past it, its conversion to a
// Duration would overflow into another value.
func checkTimeout(sec float64) error {
	if !(sec >= 0 && sec <= lean.MaxTimeout) {
		return fmt.Errorf("timeout must be between 0 and %d seconds", lean.MaxTimeout)
	}
	return nil
}

func (t *tools) exec(ctx context.Context, req *sdk.CallToolRequest, a ExecArgs) (*sdk.CallToolResult, any, error) {
	if err := errors.Join(checkMaxOutput(int(a.MaxOutput)), checkTimeout(a.Timeout)); err != nil {
		return failure(err)
	}
	o := client.ExecOptions{
		MaxOutput:  int(a.MaxOutput),
		Timeout:    time.Duration(a.Timeout * float64(time.Second)),
		Python:     a.Python,
		Host:       a.Host,
		Pythons:    a.Pythons,
		Sudo:       a.Sudo,
		NoWait:     a.NoWait,
		Queue:      a.Queue,
		Hosts:      a.Hosts,
		Fanout:     int(a.Fanout),
		OnProgress: progressFor(ctx, req),
		// A cancelled call ends its own cell, and no other: the hub knows
		// which it started, or that it started none.
		InterruptIfGone: true,
	}
	if a.Jump != nil {
		o.Jump = &a.Jump
	}
	res, err := t.c.Exec(t.withID(ctx, req), a.Name, a.Code, o)
	if err != nil {
		if ctx.Err() != nil {
			// Cancelled (notifications/cancelled, or the client's own
			// timeout): the hub ends the cell this call started as the
			// call's connection closes, and keeps its output for the next
			// wait or exec, with a note. This reply is never sent
			// (cancelTransport).
			return text("cancelled", false), nil, nil
		}
		return failure(err)
	}
	return result(res), nil, nil
}

func (t *tools) wait(ctx context.Context, req *sdk.CallToolRequest, a WaitArgs) (*sdk.CallToolResult, any, error) {
	if err := errors.Join(checkMaxOutput(int(a.MaxOutput)), checkTimeout(a.Timeout)); err != nil {
		return failure(err)
	}
	res, err := t.c.WaitCell(t.withID(ctx, req), a.Name, int(a.Cell), time.Duration(a.Timeout*float64(time.Second)), int(a.MaxOutput), progressFor(ctx, req))
	if err != nil {
		if ctx.Err() != nil {
			// Never sent (cancelTransport); the cell's output stays unread.
			return text("cancelled; the cell keeps running", false), nil, nil
		}
		return failure(err)
	}
	return result(res), nil, nil
}

func (t *tools) interrupt(ctx context.Context, req *sdk.CallToolRequest, a InterruptArgs) (*sdk.CallToolResult, any, error) {
	msg, err := t.c.InterruptCell(ctx, a.Name, int(a.Cell))
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
	return text(l.TextFor(a.Name != "", wire.SurfaceMCP), false), nil, nil
}
