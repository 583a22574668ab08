package wire

// Attach: a person's console on a session (replhub attach). The client
// sends one OpAttach request and keeps the connection: the hub answers
// with Event replies for as long as the console stays, and takes further
// requests on the same connection, each an OpExec (a cell typed in the
// console) or an OpInterrupt (of that console's running cell, and of no
// other). Closing the
// connection detaches; the session goes on. The hub's last reply, when the
// session ends under the console, is a Message.
//
// An exec with Request.Stream (the CLI's, on a terminal) gets the same
// "out" events while its cell runs, then its Result, whose Output is what
// the events did not carry.
const (
	OpAttach = "attach"
	// OpCheck asks whether Request.Text is a whole statement, the way
	// Python's own REPL decides (codeop): Answer.Check says.
	OpCheck = "check"
)

// Event kinds.
const (
	// EventAttached opens an attach: Info is the session, Cell its running
	// cell (0: none), Text its output nobody has read yet.
	EventAttached = "attached"
	// EventCell is a cell that started elsewhere (Code, By).
	EventCell = "cell"
	// EventOut is output, as it was written (Text).
	EventOut = "out"
	// EventDone is a cell that finished (Result: its status, value and
	// error; its output came as out events). Mine is set for the cells of
	// this console, whose Result is the whole reply, notes included.
	EventDone = "done"
	// EventRefused is a cell of this console that did not start (Text says
	// why).
	EventRefused = "refused"
	// EventQueued is a cell of this console that waits for the cells ahead
	// of it (Text says how many).
	EventQueued = "queued"
	// EventDead says that the session died (Text: how).
	EventDead = "dead"
)

// Check answers.
const (
	CheckComplete   = "complete"
	CheckIncomplete = "incomplete"
	CheckInvalid    = "invalid"
)

// Event.By: who started a cell. Empty means a client of the hub that is
// neither (the CLI's exec, a Go program).
const (
	ByAttach = "attach" // typed in an attach console
	ByAgent  = "agent"  // run by an MCP client
)

// Event is one thing that happened in an attached session.
type Event struct {
	Kind   string       `json:"kind"`
	Cell   int          `json:"cell,omitempty"`
	Code   string       `json:"code,omitempty"`
	By     string       `json:"by,omitempty"`
	Mine   bool         `json:"mine,omitempty"`
	Text   string       `json:"text,omitempty"`
	Result *Result      `json:"result,omitempty"`
	Info   *SessionInfo `json:"info,omitempty"`
}
