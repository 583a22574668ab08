package proto

import "github.com/replhub/replhub/wire"

// Query frames (boot/replhub_toolkit/query.py): the hub asks a worker about its names
// without running a cell, and the worker answers between cells, on a
// thread of its own, waiting for a running cell up to Wait seconds. No
// payload either way: the worker caps every list and text in an answer
// far below MaxHeader.

// Ops of the query frames.
const (
	OpQuery  = "query"  // hub → worker
	OpAnswer = "answer" // worker → hub
)

// Query asks a question of kind Kind (wire.OpVars, OpInspect, OpComplete,
// OpReset) with the request's fields; ID comes back in the Answer.
type Query struct {
	Head
	ID          int64   `json:"id"`
	Kind        string  `json:"kind"`
	Expr        string  `json:"expr,omitempty"`
	Text        string  `json:"text,omitempty"`
	All         bool    `json:"all,omitempty"`
	KeepImports bool    `json:"keep_imports,omitempty"`
	Limit       int     `json:"limit,omitempty"`
	Wait        float64 `json:"wait,omitempty"`
	// Cell is the last cell the hub sent and has not seen end: a query
	// that waits for a running cell waits for its exec frame too, which
	// may come after the query (a cell link on a host).
	Cell int `json:"cell,omitempty"`
}

// Answer answers the Query of ID: OK with the findings of its kind; or
// not OK with Error, or Busy (the main thread stayed busy for Waited
// seconds, with cell Cell, or 0 for a put/get/call or swap). An OK answer
// that waited says for which Cell, and how long. The findings are the
// client's wire.Findings as they are: this protocol builds on the
// client's types, never the other way round.
type Answer struct {
	Head
	ID     int64   `json:"id"`
	OK     bool    `json:"ok"`
	Error  string  `json:"error,omitempty"`
	Busy   bool    `json:"busy,omitempty"`
	Cell   int     `json:"cell,omitempty"`
	Waited float64 `json:"waited,omitempty"`
	Note   string  `json:"note,omitempty"`
	wire.Findings
}

func (*Query) Op() string  { return OpQuery }
func (*Answer) Op() string { return OpAnswer }

func init() {
	fromWorker[OpAnswer] = func() Msg { return new(Answer) }
	fromHub[OpQuery] = func() Msg { return new(Query) }
}
