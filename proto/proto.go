// Package proto is the hub ↔ worker protocol (DESIGN.md, "Hub ↔ worker"):
// one Go type per frame op, the one Reader that validates a frame's header
// before it allocates anything for it, the Writer side, and the pool of
// transfer chunk buffers.
//
// A frame is one line of UTF-8 JSON whose "op" names its type; when the
// header has "len": N, exactly N raw bytes follow the newline. The Python
// side (boot/worker.py, boot/replhub_toolkit/relay.py) reads and writes the same frames; the
// golden file testdata/golden.json pins the JSON of every op, and the tests
// hold both sides to it, so a misspelt key is a failing test, not a silent
// bug.
//
// Bounds: a header line is at most MaxHeader bytes; a chunk's payload at
// most ChunkSize; a req's or served's blob at most the Reader's MaxBlob; a
// done frame's display items at most DisplaySize; every other op carries
// no payload. A header that breaks a bound is a
// *Violation: the stream cannot be trusted past it, and the hub ends that
// session alone. A line that is not a well-formed frame of a known op, but
// leaves the stream in step, is *Malformed: dropped, and the stream goes on.
//
// The package does not know sessions, cells or transfers; package hub does.
package proto

import (
	"github.com/replhub/replhub/wire"
)

// Version is the protocol version; the worker's ready frame carries it.
const Version = 2

// Bounds on what a worker may send.
const (
	// MaxHeader bounds one header line, newline included. The worker caps
	// everything that goes into a header (a value's repr, a traceback, a
	// function's source) far below it.
	MaxHeader = 1 << 20
	// ChunkSize is the largest chunk of a file transfer.
	ChunkSize = wire.ChunkSize
	// OutSize is the largest out frame's payload.
	OutSize = 1 << 20
	// DefaultMaxBlob bounds a pickled object (a put, get or call) when the
	// Reader's MaxBlob is zero.
	DefaultMaxBlob = 1 << 30
	// DisplaySize bounds a done frame's payload: the display items of one
	// cell, which the worker keeps to MaxDisplayItems and this size.
	DisplaySize = 32 << 20
	// MaxDisplayItems bounds a done frame's display list.
	MaxDisplayItems = 16
)

// Ops, as the "op" key spells them.
const (
	// worker → hub
	OpReady       = "ready"
	OpDone        = "done"
	OpInterrupted = "interrupted"
	OpPong        = "pong"
	OpReq         = "req"
	OpServed      = "served"
	OpOut         = "out"
	OpDetached    = "detached"
	OpClosed      = "closed"
	// hub → worker
	OpExec      = "exec"
	OpInterrupt = "interrupt"
	OpCancel    = "cancel"
	OpPing      = "ping"
	OpReply     = "reply"
	OpServe     = "serve"
	OpAdopt     = "adopt"
	OpExit      = "exit"
	OpDetach    = "detach"
	// both ways
	OpCells = "cells"
	OpChunk = "chunk"
	OpAck   = "ack"
	OpError = "error"
)

// Msg is one frame's header. Data, where a type has it, is the payload
// that follows the header (len is set from it when the frame is written).
type Msg interface {
	// Op is the frame's op.
	Op() string
	head() *Head
}

// Head is the part every frame has: its op and its payload's length.
// Writers set both; a type's own fields follow.
type Head struct {
	O   string `json:"op"`
	Len int64  `json:"len,omitempty"`
}

func (h *Head) head() *Head { return h }

// Ready is the worker's first frame: it runs and speaks Proto.
type Ready struct {
	Head
	Proto       int    `json:"proto"`
	Python      string `json:"python"`
	Pid         int    `json:"pid"`
	Cwd         string `json:"cwd"`
	Executable  string `json:"executable"`
	Cloudpickle bool   `json:"cloudpickle"`
	// An adopted worker (one answering Adopt) also says where it is: the
	// last cell it was given, whether that cell still runs, and its fence.
	Adopted bool   `json:"adopted,omitempty"`
	Cell    int    `json:"cell,omitempty"`
	Running bool   `json:"running,omitempty"`
	Fence   string `json:"fence,omitempty"`
	// Elapsed is how long, in seconds, the running cell has run.
	Elapsed float64 `json:"elapsed,omitempty"`
	// Names are the session's names as the last hub was last sent them
	// (Done.Names), for the list until the next cell's done frame.
	Names []string `json:"names,omitempty"`
	// A worker on a host that lingers after its link drops says where its
	// socket is, and where it moves if its folder goes (a runtime folder
	// removed at logout); or why it cannot linger.
	Sock        string `json:"sock,omitempty"`
	SockAlt     string `json:"sock_alt,omitempty"`
	LingerError string `json:"linger_error,omitempty"`
	// Streams is the token the worker marks its stdout runs with in its
	// output (see Splitter), the same for its whole life.
	Streams string `json:"streams,omitempty"`
	// Bytecode is a remote worker's word on the host's bytecode cache of
	// the payload: "cached", "compiled, cached (why it missed)" or
	// "compiled: why it was not kept (why it missed)"; empty locally.
	Bytecode string `json:"bytecode,omitempty"`
	// Cells says that the worker reads exec frames on the pipe of their
	// own that a local hub gives it (its fd 3, with --cells); without it
	// they go on its stdin, as all other frames do.
	Cells bool `json:"cells,omitempty"`
	// CellsToken is what a cell link's Cells frame shows (once): given by
	// a worker's answer to an Adopt that offered a link, and by the first
	// ready frame of a durable worker that has no cell pipe (under sudo,
	// on a host).
	CellsToken string `json:"cells_token,omitempty"`
}

// Done ends a cell: its status ("ok" or "error"), the repr of its last
// expression, the exception it raised, and the namespace's top names when
// they changed since the last done frame that listed them (nil: as before;
// empty: none).
type Done struct {
	Head
	Cell     int             `json:"cell"`
	Status   string          `json:"status"`
	Value    *string         `json:"value"`
	Error    *wire.CellError `json:"error"`
	Duration float64         `json:"duration"`
	Names    []string        `json:"names,omitempty"`
	// RSS is the worker's resident memory; zero when not measured.
	RSS int64 `json:"rss,omitempty"`
	// Display lists what the cell showed beyond its text (images,
	// Markdown, HTML, JSON), in order; their bytes follow one another in
	// Data. Dropped counts the items the worker left out (over its
	// bounds).
	Display []DisplayItem `json:"display,omitempty"`
	Dropped int           `json:"dropped,omitempty"`
	// Quiet says that nothing went to the output stream since the last
	// cell's fence, so this cell's was not written: its output is what
	// the hub has read.
	Quiet bool `json:"quiet,omitempty"`

	Data []byte `json:"-"`
}

// DisplayItem is one thing a cell showed: its MIME type and its size in
// the done frame's payload.
type DisplayItem struct {
	MIME string `json:"mime"`
	Size int64  `json:"size"`
}

// How an interrupt went, in an Interrupted frame.
const (
	// HowDelivered: the cell's code was running; KeyboardInterrupt was raised in it.
	HowDelivered = "delivered"
	// HowParked: the cell had not begun running; it ends with
	// KeyboardInterrupt as it starts, without running.
	HowParked = "parked"
	// HowNone: the cell was not running.
	HowNone = "none"
)

// Interrupted answers an Interrupt: what the worker did with it.
type Interrupted struct {
	Head
	Cell int    `json:"cell"`
	How  string `json:"how"`
}

// Pong answers a Ping.
type Pong struct {
	Head
	ID int64 `json:"id"`
}

// Req is code in the session asking the hub: open, sessions, kill, put,
// get, call, pull, push, or cancel (of its request ID). Data is the
// pickled blob of a put or call.
type Req struct {
	Head
	ID     int64             `json:"id"`
	Kind   string            `json:"kind"`
	Py     string            `json:"py"`
	Target string            `json:"target,omitempty"`
	Names  []string          `json:"names,omitempty"`
	Into   *string           `json:"into,omitempty"`
	Src    string            `json:"src,omitempty"`
	Cells  map[string]string `json:"cells,omitempty"`
	// Targets, for put, get and call, are several sessions served at
	// once (a group's); Hosts, for open, opens the session Name@HOST on
	// each (node-set expressions). The reply's Fan has one item each.
	Targets []string `json:"targets,omitempty"`
	Hosts   []string `json:"hosts,omitempty"`
	// open
	Name   string    `json:"name,omitempty"`
	Host   string    `json:"host,omitempty"`
	Sudo   *bool     `json:"sudo,omitempty"`
	Python string    `json:"python,omitempty"`
	Jump   *[]string `json:"jump,omitempty"`
	// pull, push
	Path string `json:"path,omitempty"`
	Size int64  `json:"size,omitempty"`
	Mode uint32 `json:"mode,omitempty"`
	// sh: a command run on Host (Data is its input), in Cwd, with Env
	// added, for at most Timeout seconds.
	Argv    []string          `json:"argv,omitempty"`
	Cwd     string            `json:"cwd,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	Timeout float64           `json:"timeout,omitempty"`
	// Streamed objects (put, get, call; see hub/objstream.go): Bufs are
	// the sizes of the buffers that follow Data as chunks, out of band,
	// and Kinds what each becomes, a letter each ("b" bytes, "a" a
	// bytearray); Oob says that the sender takes a value's buffers that
	// way too.
	Bufs  []int64 `json:"bufs,omitempty"`
	Kinds string  `json:"kinds,omitempty"`
	Oob   bool    `json:"oob,omitempty"`

	Data []byte `json:"-"`
}

// Served is a session's answer to a Serve: a put/get/call's outcome (Data,
// a get's or call's pickled value), or a transfer's first answer (First,
// with the file's Size and Mode) and then its last.
type Served struct {
	Head
	Sid   int64  `json:"sid"`
	Py    string `json:"py"`
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	Kept  string `json:"kept,omitempty"`
	First bool   `json:"first,omitempty"`
	Size  int64  `json:"size,omitempty"`
	Mode  uint32 `json:"mode,omitempty"`
	// Bufs and Kinds, on a First answer to a get or call, are the
	// value's buffers, which follow as chunks (a streamed object; see Req).
	Bufs  []int64 `json:"bufs,omitempty"`
	Kinds string  `json:"kinds,omitempty"`

	Data []byte `json:"-"`
}

// Out is the session's output (Data) from a worker that a hub adopted: its
// own output stream went with the hub that started it.
type Out struct {
	Head
	Data []byte `json:"-"`
}

// Adopt is a new hub's first frame on a durable worker's socket; the
// worker answers with Ready (Adopted set), then any done frame and output
// that waited for a hub.
type Adopt struct {
	Head
	// Cells offers a cell link: the worker's ready frame then gives a
	// CellsToken.
	Cells bool `json:"cells,omitempty"`
}

// Cells is the first frame of a cell link, a second connection that a
// hub makes to a durable worker's socket (directly, or through ssh to a
// host's), with a ready frame's CellsToken: its exec frames go on it,
// which the worker's main thread reads while it waits, as on the cell
// pipe a local hub gives the workers it starts. The worker answers with
// a Cells frame of its own (no token), or closes the link.
type Cells struct {
	Head
	Token string `json:"token,omitempty"`
}

// Detach is a hub's last word to a durable worker before it hands the
// worker over (replhub restart): the worker ends its output to this hub
// with Fence, sends Detached, and from then on keeps its output and its
// done frames for the next hub. What the hub read up to both is all there
// was, and goes into its hand-over.
type Detach struct {
	Head
	Fence string `json:"fence"`
}

// Detached answers Detach, after every frame sent to this hub.
type Detached struct {
	Head
}

// Closed is a worker's last frame on a channel its own code closed (a
// cell's os.close of a descriptor it did not open): the hub takes the
// worker's frames for ended (see hub's framesEnded), where another
// process's copy of the channel (sudo's, of a root worker's) keeps the
// stream's end from coming.
type Closed struct {
	Head
}

// Exit ends the worker at once: a durable worker outlives the end of its
// frame stream, so ending one takes this frame (or a signal).
type Exit struct {
	Head
}

// Exec runs Code as cell Cell; Fence is written to the output stream after
// the cell's output.
type Exec struct {
	Head
	Cell  int    `json:"cell"`
	Code  string `json:"code"`
	Fence string `json:"fence"`
	// Names asks for the session's names in the cell's done frame, changed
	// or not: the hub may have missed the last list sent (Done.Names).
	Names bool `json:"names,omitempty"`
}

// Interrupt asks for KeyboardInterrupt in cell Cell; the worker answers
// with Interrupted.
type Interrupt struct {
	Head
	Cell int `json:"cell"`
}

// Cancel stops what the session serves as Sid (a transfer between chunks,
// a put/get/call by KeyboardInterrupt); its last Served says so.
type Cancel struct {
	Head
	Sid int64 `json:"sid"`
}

// Ping asks for a Pong.
type Ping struct {
	Head
	ID int64 `json:"id"`
}

// Reply answers a Req. Data is a get's or call's pickled value.
type Reply struct {
	Head
	ID       int64              `json:"id"`
	OK       bool               `json:"ok"`
	Error    string             `json:"error,omitempty"`
	Py       string             `json:"py,omitempty"`
	Kept     string             `json:"kept,omitempty"`
	Message  string             `json:"message,omitempty"`
	Info     *wire.SessionInfo  `json:"info,omitempty"`
	Sessions []wire.SessionInfo `json:"sessions,omitempty"`
	Size     int64              `json:"size,omitempty"`
	Mode     uint32             `json:"mode,omitempty"`
	// sh: the command's exit status (Signal when a signal ended it); Data
	// is its stdout (the first Size bytes) then its stderr.
	Code   int    `json:"code,omitempty"`
	Signal string `json:"signal,omitempty"`
	// Fan answers a request with Targets or Hosts, an item per session
	// in their order; Data is then the items' blobs one after another.
	Fan []FanItem `json:"fan,omitempty"`
	// First and Bufs pass on a served object's First answer (see Served):
	// the request goes on, and its last Reply follows.
	First bool    `json:"first,omitempty"`
	Bufs  []int64 `json:"bufs,omitempty"`
	Kinds string  `json:"kinds,omitempty"`

	Data []byte `json:"-"`
}

// FanItem is one session's part of a Reply's Fan: its outcome, and the
// length of its blob (a get's or call's value) within the Reply's Data.
type FanItem struct {
	Host   string            `json:"host,omitempty"`
	Target string            `json:"target,omitempty"`
	OK     bool              `json:"ok"`
	Error  string            `json:"error,omitempty"`
	Py     string            `json:"py,omitempty"`
	Kept   string            `json:"kept,omitempty"`
	Len    int64             `json:"len,omitempty"`
	Info   *wire.SessionInfo `json:"info,omitempty"`
}

// Serve asks a session to serve a put, get or call (Data: the pickled
// names or call) or a file read or write for another session or a client.
type Serve struct {
	Head
	Sid   int64             `json:"sid"`
	Kind  string            `json:"kind"`
	From  string            `json:"from"`
	Py    string            `json:"py,omitempty"`
	Names []string          `json:"names,omitempty"`
	Into  *string           `json:"into,omitempty"`
	Cells map[string]string `json:"cells,omitempty"`
	Path  string            `json:"path,omitempty"`
	Size  int64             `json:"size,omitempty"`
	Mode  uint32            `json:"mode,omitempty"`
	// Bufs, Kinds and Oob pass on a streamed object's (see Req).
	Bufs  []int64 `json:"bufs,omitempty"`
	Kinds string  `json:"kinds,omitempty"`
	Oob   bool    `json:"oob,omitempty"`

	Data []byte `json:"-"`
}

// Chunk is one piece of a file transfer, in order by Seq; ID names the
// session's own request, Sid what it serves. The last chunk has EOF (a
// pull's, with Error if it failed) or Done (a push's end, with OK and
// Error).
type Chunk struct {
	Head
	ID    int64  `json:"id,omitempty"`
	Sid   int64  `json:"sid,omitempty"`
	Seq   int64  `json:"seq"`
	EOF   bool   `json:"eof,omitempty"`
	Done  bool   `json:"done,omitempty"`
	OK    bool   `json:"ok,omitempty"`
	Error string `json:"error,omitempty"`

	Data []byte `json:"-"`
}

// Ack acknowledges chunk Seq of a transfer.
type Ack struct {
	Head
	ID  int64 `json:"id,omitempty"`
	Sid int64 `json:"sid,omitempty"`
	Seq int64 `json:"seq"`
}

// Error is a frame the other side could not use, or a failure of its own.
type Error struct {
	Head
	ID    int64  `json:"id,omitempty"`
	Error string `json:"error"`
}

func (*Ready) Op() string       { return OpReady }
func (*Done) Op() string        { return OpDone }
func (*Interrupted) Op() string { return OpInterrupted }
func (*Pong) Op() string        { return OpPong }
func (*Req) Op() string         { return OpReq }
func (*Served) Op() string      { return OpServed }
func (*Out) Op() string         { return OpOut }
func (*Adopt) Op() string       { return OpAdopt }
func (*Exit) Op() string        { return OpExit }
func (*Detach) Op() string      { return OpDetach }
func (*Detached) Op() string    { return OpDetached }
func (*Closed) Op() string      { return OpClosed }
func (*Exec) Op() string        { return OpExec }
func (*Interrupt) Op() string   { return OpInterrupt }
func (*Cancel) Op() string      { return OpCancel }
func (*Ping) Op() string        { return OpPing }
func (*Reply) Op() string       { return OpReply }
func (*Serve) Op() string       { return OpServe }
func (*Cells) Op() string       { return OpCells }
func (*Chunk) Op() string       { return OpChunk }
func (*Ack) Op() string         { return OpAck }
func (*Error) Op() string       { return OpError }

// payload returns a pointer to m's Data, or nil for an op without one.
func payload(m Msg) *[]byte {
	switch m := m.(type) {
	case *Req:
		return &m.Data
	case *Served:
		return &m.Data
	case *Reply:
		return &m.Data
	case *Serve:
		return &m.Data
	case *Chunk:
		return &m.Data
	case *Out:
		return &m.Data
	case *Done:
		return &m.Data
	}
	return nil
}

// Data returns m's payload; nil for an op without one.
func Data(m Msg) []byte {
	if p := payload(m); p != nil {
		return *p
	}
	return nil
}

// fromWorker makes an empty frame of each op a worker may send.
var fromWorker = map[string]func() Msg{
	OpReady:       func() Msg { return new(Ready) },
	OpDone:        func() Msg { return new(Done) },
	OpInterrupted: func() Msg { return new(Interrupted) },
	OpPong:        func() Msg { return new(Pong) },
	OpReq:         func() Msg { return new(Req) },
	OpServed:      func() Msg { return new(Served) },
	OpOut:         func() Msg { return new(Out) },
	OpDetached:    func() Msg { return new(Detached) },
	OpClosed:      func() Msg { return new(Closed) },
	OpCells:       func() Msg { return new(Cells) },
	OpChunk:       func() Msg { return new(Chunk) },
	OpAck:         func() Msg { return new(Ack) },
	OpError:       func() Msg { return new(Error) },
}

// fromHub makes an empty frame of each op the hub may send; a worker
// stand-in in tests reads them.
var fromHub = map[string]func() Msg{
	OpExec:      func() Msg { return new(Exec) },
	OpInterrupt: func() Msg { return new(Interrupt) },
	OpCancel:    func() Msg { return new(Cancel) },
	OpPing:      func() Msg { return new(Ping) },
	OpReply:     func() Msg { return new(Reply) },
	OpServe:     func() Msg { return new(Serve) },
	OpAdopt:     func() Msg { return new(Adopt) },
	OpExit:      func() Msg { return new(Exit) },
	OpDetach:    func() Msg { return new(Detach) },
	OpCells:     func() Msg { return new(Cells) },
	OpChunk:     func() Msg { return new(Chunk) },
	OpAck:       func() Msg { return new(Ack) },
	OpError:     func() Msg { return new(Error) },
}
