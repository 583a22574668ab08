// Package wire defines the client ↔ hub protocol: newline-delimited JSON
// over the hub's unix socket (DESIGN.md, "Client ↔ hub").
//
// A request is one Request line, followed by the raw bytes of a sudo
// password when the line says password_len (WriteRequest, Reader); the hub
// answers with Reply lines, of which all but the last carry Progress. Every
// request carries Version; a hub of another version answers with an error
// of code "version".
//
// The package also renders a Result as the text a person (or an agent) reads,
// so that the CLI and the MCP server print the same thing.
package wire

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/replhub/replhub/internal/lean"
)

// Version is the protocol version spoken by this binary. Version 2 sends
// a password as raw bytes after the request line; a hub of version 1
// would read them as a line of their own.
const Version = lean.Protocol

// MaxLine bounds one JSON line in either direction.
const MaxLine = lean.MaxLine

// Ops.
const (
	OpExec      = "exec"
	OpWait      = "wait"
	OpInterrupt = "interrupt"
	OpKill      = "kill"
	OpSessions  = "sessions"
	OpStop      = "stop"
	OpRestart   = "restart"
	OpPing      = "ping"
	OpPush      = "push"
	OpPull      = "pull"
)

// Request is what a client sends. Fields an op does not use are empty.
type Request struct {
	V  int    `json:"v"`
	Op string `json:"op"`
	// Name is the session.
	Name string `json:"name,omitempty"`
	// Code is the cell source, for exec.
	Code string `json:"code,omitempty"`
	// Timeout in seconds for exec and wait; 0 means the default (30 s).
	Timeout float64 `json:"timeout,omitempty"`
	// NoWait makes exec return as soon as the cell has started (status
	// started); Cell makes wait collect that cell, and no other.
	NoWait bool `json:"no_wait,omitempty"`
	Cell   int  `json:"cell,omitempty"`
	// Queue makes exec on a busy session wait its turn in the session's
	// queue instead of being refused: the reply comes at once, with status
	// queued and the cell's number, for wait with Cell to collect. On an
	// idle session it runs as any exec. Cell on an interrupt aims it at
	// that cell: a queued one is taken out, the running one interrupted.
	Queue bool `json:"queue,omitempty"`
	// Python is the interpreter for a new session; empty means the
	// caller's $REPLHUB_PYTHON, else the first python3 on the caller's PATH.
	Python string `json:"python,omitempty"`
	// Cwd and Env are the caller's; a new session starts in them. A client
	// may leave Env out: the hub then answers CodeNeedEnv if it must create
	// the session, and the client sends the request again with it. A warm
	// exec so skips a few kilobytes of JSON each way.
	Cwd string   `json:"cwd,omitempty"`
	Env []string `json:"env,omitempty"`
	// Host, when set, runs a new session there over ssh: [user@]host[:port]
	// or an ssh_config alias. An exec without Host reaches the live session
	// of that name wherever it runs.
	Host string `json:"host,omitempty"`
	// Hosts, on exec, runs the cell in session NAME@HOST on every host of
	// this node-set expression ("lab-[1-3],@lab", package nodeset) at
	// once, and the hub remembers the group by Name: a later exec, wait,
	// interrupt or kill of Name without Hosts acts on all of them.
	// Fanout bounds how many hosts connect at once; zero means
	// config.json's "fanout", else 16.
	Hosts  string `json:"hosts,omitempty"`
	Fanout int    `json:"fanout,omitempty"`
	// Jump, when non-nil, replaces the configured jump hosts; an empty list
	// turns them off.
	Jump *[]string `json:"jump,omitempty"`
	// Pythons are tried first when a remote session looks for a Python.
	Pythons []string `json:"pythons,omitempty"`
	// Sudo runs a new session as root through sudo (here or on Host).
	Sudo bool `json:"sudo,omitempty"`
	// Password answers CodeNeedPassword: the client ran $SUDO_ASKPASS. It
	// never goes into the JSON: the line says only PasswordLen, and the
	// raw bytes follow its newline (WriteRequest, Reader), so that no
	// encoder or decoder keeps a copy. Every holder zeroes its slice.
	Password []byte `json:"-"`
	// PasswordLen is len(Password), set by WriteRequest.
	PasswordLen int `json:"password_len,omitempty"`
	// Path is the file in the session, for push (its destination) and pull
	// (its source).
	Path string `json:"path,omitempty"`
	// Local is the absolute path of the file on this machine, for push (its
	// source) and pull (its destination). The hub reads or writes it
	// itself: it runs as the caller's user on the caller's machine.
	Local string `json:"local,omitempty"`
	// Progress asks for progress replies while the request blocks.
	Progress bool `json:"progress,omitempty"`
	// Force swaps a session even with a background job running (OpSwap).
	Force bool `json:"force,omitempty"`
	// Expr is what OpInspect evaluates; Text what OpComplete completes.
	Expr string `json:"expr,omitempty"`
	Text string `json:"text,omitempty"`
	// All lists names that start with _ too (OpVars).
	All bool `json:"all,omitempty"`
	// Brief asks OpSessions for the list without what takes time to
	// measure (each session's memory): a shell completing a name.
	Brief bool `json:"brief,omitempty"`
	// KeepImports keeps the names bound to modules (OpReset).
	KeepImports bool `json:"keep_imports,omitempty"`
	// MaxOutput caps the output characters of this exec's or wait's reply
	// (head and tail kept); zero means the hub's default (30,000), and it
	// may be at most 2,000,000, all a session keeps.
	MaxOutput int `json:"max_output,omitempty"`
	// Private, on an exec, runs the cell in a session of its own that
	// ends with the call (replhub run): it is never listed nor named in
	// another reply, leaves no death note, and keeps a transcript only
	// with Transcript. Its name must be new.
	Private    bool `json:"private,omitempty"`
	Transcript bool `json:"transcript,omitempty"`
	// Limit bounds the names or completions listed; zero means the
	// worker's default (500 names, 200 completions).
	Limit int `json:"limit,omitempty"`
	// Wait is how many seconds a query waits for a running cell: zero
	// means DefaultQueryWait, a negative number not at all.
	Wait float64 `json:"wait,omitempty"`
	// Client names the client across its connections, so that the hub
	// tells it each death once: the MCP server sets one per MCP
	// connection. Empty (the CLI: one call, one client) means a client the
	// hub remembers nothing of; it hears of every death not yet shown.
	Client string `json:"client,omitempty"`
	// Surface is who reads the reply (SurfaceCLI or SurfaceMCP): the
	// hub's advice names what that reader can do (Advice).
	Surface string `json:"surface,omitempty"`
	// InterruptIfGone, on an exec, interrupts the cell it started if its
	// client goes away before the reply (an MCP call cancelled): that cell
	// alone, whatever else the session runs by then, its output left for
	// the next reply with a note; where the exec started none (the session
	// was busy), nothing. (A queued cell's exec is answered at once.)
	InterruptIfGone bool `json:"interrupt_if_gone,omitempty"`
	// Stream, on an exec, asks for the cell's output as Event replies
	// while it runs (attach.go).
	Stream bool `json:"stream,omitempty"`
	// Plain, on an exec, a wait, a sessions or a query, asks for the
	// result (or the list, of Name alone when it is set; or the answer)
	// as Reply.Plain where it can be: package early's call, which prints
	// a text and exits. An interrupt's or a kill's message comes as one
	// too.
	Plain bool `json:"plain,omitempty"`
	// JSON is Plain for `replhub exec --json`: the Reply.Plain's text is
	// the result as that prints it (Result.PlainJSON). It is asked for
	// without Plain: a hub that does not know it answers with the Result,
	// which the CLI prints the same.
	JSON bool `json:"json,omitempty"`
}

// Stream is a push's or pull's progress: Done bytes of Size have moved.
type Stream struct {
	Size int64 `json:"size,omitempty"`
	Done int64 `json:"done,omitempty"`
}

// Transfer sizes, the same on every side: a file moves in chunks of at
// most ChunkSize, with at most Window of them unacknowledged.
const (
	ChunkSize = 8 << 20
	Window    = 4
)

// Reply is one line from the hub. Exactly one of its parts is set, except
// Notes, which may accompany any of them.
type Reply struct {
	V int `json:"v"`
	// Plain is an exec's or a wait's result, or the session list, as the
	// CLI prints it, for a request that asked (Request.Plain); it comes
	// instead of Result or Sessions.
	// lean.ParsePlain reads the line's bytes (internal/lean's tests pin
	// them).
	Plain    *Plain       `json:"plain,omitempty"`
	Progress *Progress    `json:"progress,omitempty"`
	Err      *Error       `json:"err,omitempty"`
	Result   *Result      `json:"result,omitempty"`
	Sessions *SessionList `json:"sessions,omitempty"`
	Message  string       `json:"message,omitempty"`
	// Stream is a push's or pull's progress.
	Stream *Stream `json:"stream,omitempty"`
	// Swaps answers OpSwap.
	Swaps []SwapOutcome `json:"swaps,omitempty"`
	// Answer answers OpVars, OpInspect, OpComplete and OpReset.
	Answer *Answer `json:"answer,omitempty"`
	// Event is an attach's or a streaming exec's news (attach.go); like
	// Progress, it comes before the last reply.
	Event *Event `json:"event,omitempty"`
}

// Plain is a result as `replhub exec` prints it: Text on standard output,
// then exit status Exit.
type Plain struct {
	Exit int    `json:"exit"`
	Text string `json:"text"`
}

// IsZero reports whether r has no part set: the hub's handler has nothing
// to answer (TestReplyIsZero keeps it to every field).
func (r *Reply) IsZero() bool {
	return r.V == 0 && r.Plain == nil && r.Progress == nil && r.Err == nil && r.Result == nil && r.Sessions == nil &&
		r.Message == "" && r.Stream == nil && r.Swaps == nil && r.Answer == nil && r.Event == nil
}

// Progress tells a waiting client that its cell still runs.
type Progress struct {
	Session     string `json:"session"`
	Cell        int    `json:"cell"`
	ElapsedMS   int64  `json:"elapsed_ms"`
	OutputChars int    `json:"output_chars"`
	// Hosts, for a group, is how many hosts it has; Done of them have
	// answered, Failed of those with a failure.
	Hosts  int `json:"hosts,omitempty"`
	Done   int `json:"done,omitempty"`
	Failed int `json:"failed,omitempty"`
}

// Error codes a client may branch on.
const (
	CodeBusy       = "busy"
	CodeNoSession  = "no_session"
	CodeDead       = "dead"
	CodeBadRequest = "bad_request"
	CodeVersion    = "version"
	CodeStart      = "start_failed"
	CodeShutdown   = "shutting_down"
	CodeInternal   = "internal"
	CodeNeedEnv    = "need_env"
	// CodeNeedPassword asks the client to run $SUDO_ASKPASS with
	// Error.Prompt and send the request again with Password.
	CodeNeedPassword = "need_password"
)

// Error is a request that failed as a whole (not a cell that raised).
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Prompt is what the askpass program is shown, for CodeNeedPassword.
	Prompt string `json:"prompt,omitempty"`
}

func (e *Error) Error() string { return e.Message }

// IsCode reports whether err is a hub *Error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// Cell statuses.
const (
	StatusOK      = "ok"
	StatusError   = "error"
	StatusRunning = "running"
	// StatusStarted is exec --no-wait's: the cell runs; wait collects it.
	StatusStarted = "started"
	StatusDead    = "dead"
	StatusIdle    = "idle" // wait on a session with nothing to collect
	// StatusFailed is a host of a group where replhub could not run the
	// cell (no connection, a busy session): HostResult.Failure says why.
	StatusFailed = "failed"
	// StatusQueued is a cell waiting its turn (exec with Queue, or a wait
	// that timed out before the cell started); Ahead says how many wait
	// before it.
	StatusQueued = "queued"
	// StatusTimeout is a run's cell that outlived its timeout: the run
	// stopped it with its session.
	StatusTimeout = "timeout"
)

// Result is the outcome of exec or wait.
type Result struct {
	Session string `json:"session"`
	Cell    int    `json:"cell"`
	Status  string `json:"status"`
	// Output is what the cell (and anything between cells) wrote, capped at
	// OutputCap characters with head and tail kept.
	Output string `json:"output"`
	// Stdout and Stderr are the same output, each stream apart, capped
	// alike (StdoutTruncated, StderrTruncated say when they were). A child
	// process's or C code's writes to the two are in the order they
	// arrived between the streams, exact within each; Python's own
	// (print, sys.stderr.write) in the order made.
	Stdout          string `json:"stdout"`
	Stderr          string `json:"stderr"`
	StdoutTruncated bool   `json:"stdout_truncated,omitempty"`
	StderrTruncated bool   `json:"stderr_truncated,omitempty"`
	// Value is the repr of the last expression, when it was not None.
	Value *string    `json:"value"`
	Error *CellError `json:"error"`
	// DurationMS is how long the cell ran (so far, when running).
	DurationMS int64 `json:"duration_ms"`
	// Truncated is set when output was left out; TruncatedChars says how much.
	Truncated      bool `json:"truncated"`
	TruncatedChars int  `json:"truncated_chars"`
	// Notes are one-line remarks shown before the output: a created session,
	// an earlier death, dropped or repaired output.
	Notes []string `json:"notes"`
	// Others is one short line about other sessions that have runs going or
	// results nobody has read; empty when there are none.
	Others string `json:"others,omitempty"`
	// Previous is the death note of an earlier session of the same name,
	// shown once, by the exec that starts its successor.
	Previous string `json:"previous,omitempty"`
	// Earlier is the result of the session's cell before this one, which
	// finished while nobody waited: an exec brings it first (a note says
	// so), apart from this cell's own output and value.
	Earlier *Result `json:"earlier,omitempty"`
	// Created is set when this exec started the session.
	Created *SessionInfo `json:"created,omitempty"`
	// Death says how the session died, when Status is dead.
	Death string `json:"death,omitempty"`
	// Display is what the cell showed beyond its text (images and
	// formatted text), in order.
	Display []Display `json:"display,omitempty"`
	// Fan is a group's answer (exec with Hosts, or a later exec or wait
	// of the group's name): one result per host. Session is then the
	// group's name and Status the worst of its hosts' (fan.go).
	Fan []HostResult `json:"fan,omitempty"`
	// Ahead is, for status queued, how many cells run before this one
	// (the running one included).
	Ahead int `json:"ahead,omitempty"`
}

// CellError is an exception raised by a cell.
type CellError struct {
	Type      string `json:"type"`
	Message   string `json:"message"`
	Traceback string `json:"traceback"`
}

// SessionInfo describes one session.
type SessionInfo struct {
	Name        string   `json:"name"`
	State       string   `json:"state"` // starting, idle, running, dead
	Host        string   `json:"host"`
	Route       string   `json:"route,omitempty"`
	Root        bool     `json:"root,omitempty"`
	Pid         int      `json:"pid"`
	Python      string   `json:"python"`
	Executable  string   `json:"executable"`
	Cwd         string   `json:"cwd"`
	UpS         float64  `json:"up_s"`
	IdleS       float64  `json:"idle_s"`
	Cells       int      `json:"cells"`
	RSS         int64    `json:"rss"`
	Names       []string `json:"names"`
	RunningCell int      `json:"running_cell,omitempty"`
	Serving     string   `json:"serving,omitempty"`
	// LinkDownS is how long a remote session's link has been down while
	// the hub reconnects (the worker lingers on its host meanwhile).
	LinkDownS   float64 `json:"link_down_s,omitempty"`
	RunningS    float64 `json:"running_s,omitempty"`
	Unread      bool    `json:"unread,omitempty"`
	Transcript  string  `json:"transcript"`
	Cloudpickle bool    `json:"cloudpickle"`
	// Queued are the cells waiting their turn, in order; UnreadCells the
	// cells that ran from a queue and whose results nobody has read.
	Queued      []QueuedCell `json:"queued,omitempty"`
	UnreadCells []int        `json:"unread_cells,omitempty"`
}

// QueuedCell is a cell waiting in a session's queue.
type QueuedCell struct {
	Cell int `json:"cell"`
	// Code is the cell's first line, capped at 80 characters.
	Code    string  `json:"code"`
	WaitedS float64 `json:"waited_s"`
}

// HubInfo describes the hub itself.
type HubInfo struct {
	Pid     int    `json:"pid"`
	Version string `json:"version"`
	// Supervisor is "systemd" when the hub runs as a transient systemd user
	// unit under a memory ceiling, else "detached" (no limit).
	Supervisor  string `json:"supervisor"`
	MemoryLimit string `json:"memory_limit"`
	// MemoryMax is the ceiling of the hub's cgroup in bytes (memory.max),
	// which its local sessions share, and MemoryUsed what the cgroup holds;
	// zero when no ceiling applies. MemoryCgroup is the cgroup's folder.
	MemoryMax    int64  `json:"memory_max,omitempty"`
	MemoryUsed   int64  `json:"memory_used,omitempty"`
	MemoryCgroup string `json:"memory_cgroup,omitempty"`
	Socket       string `json:"socket"`
	Log          string `json:"log"`
	RSS          int64  `json:"rss"`
}

// SessionList answers the sessions op.
type SessionList struct {
	Hub      HubInfo       `json:"hub"`
	Sessions []SessionInfo `json:"sessions"`
	// Dead lists names whose death note nobody has read yet.
	Dead []DeadInfo `json:"dead,omitempty"`
	// Swapped lists sessions on disk.
	Swapped []SwappedInfo `json:"swapped,omitempty"`
}

// DeadInfo is a session that died on its own, its note not yet shown.
type DeadInfo struct {
	Name string `json:"name"`
	Note string `json:"note"`
}

// Write sends v as one JSON line, in one write. A Request goes through
// WriteRequest. The line is encoded where encoding/json keeps its buffers,
// not copied out of them, then copied again to end it with a newline.
func Write(w io.Writer, v any) error {
	if err := json.NewEncoder(w).Encode(v); err != nil {
		return fmt.Errorf("wire: %w", err)
	}
	return nil
}

// ErrLineTooLong is returned for a line longer than MaxLine.
var ErrLineTooLong = errors.New("wire: line too long")

// ReadLine reads one newline-terminated line of at most max bytes. The
// returned slice is valid until the next read.
func ReadLine(r *bufio.Reader, max int) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if err == nil {
			if buf == nil {
				if len(chunk) > max {
					return nil, ErrLineTooLong
				}
				return chunk, nil
			}
			if buf = append(buf, chunk...); len(buf) > max {
				return nil, ErrLineTooLong
			}
			return buf, nil
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			buf = append(buf, chunk...)
			if len(buf) > max {
				return nil, ErrLineTooLong
			}
			continue
		}
		if err == io.EOF && len(buf)+len(chunk) > 0 {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
}
