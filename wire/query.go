package wire

import (
	"fmt"
	"strings"
)

// Queries ask a session about its names without running a cell: no cell
// is counted, _ does not change, and only reset writes to the transcript
// (a note: the names went). A query waits for a running cell up to
// Request.Wait; reset never waits, and a busy session refuses it.
const (
	// OpVars lists the user's names (Request.All: _ names too; Limit).
	OpVars = "vars"
	// OpInspect describes the value of Request.Expr.
	OpInspect = "inspect"
	// OpComplete completes Request.Text (Limit).
	OpComplete = "complete"
	// OpReset clears the user's names (Request.KeepImports: modules stay).
	OpReset = "reset"
)

// DefaultQueryWait is how long a query waits for a running cell when
// Request.Wait is zero.
const DefaultQueryWait = 2.0

// Var is one name in a vars answer.
type Var struct {
	Name string `json:"name"`
	Type string `json:"type"`
	Repr string `json:"repr"`
}

// Inspection describes one value. Fields that do not apply are empty:
// Len, Shape and Dtype for objects that have them, Signature for
// callables, Doc, File and Line for what is not a plain object, Attrs
// (callables marked "()") for modules, classes and objects of types that
// are not built in.
type Inspection struct {
	Expr      string   `json:"expr"`
	Type      string   `json:"type"`
	Kind      string   `json:"kind"` // module, class, function, builtin, callable or object
	Repr      string   `json:"repr"`
	Len       *int64   `json:"len,omitempty"`
	Shape     string   `json:"shape,omitempty"`
	Dtype     string   `json:"dtype,omitempty"`
	Signature string   `json:"signature,omitempty"`
	Doc       string   `json:"doc,omitempty"`
	File      string   `json:"file,omitempty"`
	Line      int      `json:"line,omitempty"`
	Attrs     []string `json:"attrs,omitempty"`
	AttrsLeft int      `json:"attrs_left,omitempty"`
}

// Answer is a query's reply.
type Answer struct {
	Session string `json:"session"`
	Kind    string `json:"kind"`
	// WaitedMS is how long the query waited for cell WaitedFor to end.
	WaitedMS  int64 `json:"waited_ms,omitempty"`
	WaitedFor int   `json:"waited_for,omitempty"`
	// Error says why the question has no answer (inspect: the expression
	// did not evaluate).
	Error string `json:"error,omitempty"`

	Findings

	Notes []string `json:"notes,omitempty"`
}

// Findings are what a query found, by its kind: as the worker sends
// them in its answer frame (proto.Answer) and as the client reads them.
type Findings struct {
	// vars: the names shown, how many there are in all (Total), how many
	// start with _ and were not asked for (Hidden), and how many of Total
	// are not shown (Left).
	Vars   []Var `json:"vars,omitempty"`
	Total  int   `json:"total,omitempty"`
	Hidden int   `json:"hidden,omitempty"`
	Left   int   `json:"left,omitempty"`

	Inspect *Inspection `json:"inspect,omitempty"`

	// complete: each completion is the whole text, completed.
	Completions []string `json:"completions,omitempty"`

	// reset: how many names went, the modules kept, the start names put
	// back, and the user's names left.
	Removed  int      `json:"removed,omitempty"`
	Kept     []string `json:"kept,omitempty"`
	Restored []string `json:"restored,omitempty"`
	Names    []string `json:"names,omitempty"`

	// check: CheckComplete, CheckIncomplete or CheckInvalid.
	Check string `json:"check,omitempty"`
}

// Plain is a as `replhub vars`, `inspect`, `complete` or `reset` prints
// it (--json: asJSON), as a client reads it back from a reply, with the
// exit status: ExitCellError for an answer that says why it has none (an
// expression that raised). It is nil when the text is too long for a
// reply's line.
func (a *Answer) Plain(asJSON bool) *Plain {
	back, ok := readBack(a)
	if !ok {
		return nil
	}
	p := &Plain{Exit: back.ExitCode(), Text: back.Text()}
	if asJSON {
		if p.Text, ok = plainJSONText(back); !ok {
			return nil
		}
	}
	return p
}

// ExitCode is the CLI's exit status for a: ExitCellError for an answer
// that says why it has none (an expression that raised), as for a cell
// that raised; else 0.
func (a *Answer) ExitCode() int {
	if a.Error != "" {
		return ExitCellError
	}
	return 0
}

// Text renders the answer as a person reads it on the command line.
func (a *Answer) Text() string { return a.TextFor(SurfaceCLI) }

// TextFor renders the answer for a surface: its advice names that
// surface's flags or arguments. All of it is the worker's words (names,
// types, reprs, docs): it is made Printable.
func (a *Answer) TextFor(surface string) string { return Printable(a.textFor(surface), true) }

func (a *Answer) textFor(surface string) string {
	adv := AdviceFor(surface)
	var b strings.Builder
	if a.WaitedFor > 0 {
		fmt.Fprintf(&b, "[waited %s for cell %d to finish]\n", Duration(float64(a.WaitedMS)/1000), a.WaitedFor)
	}
	for _, n := range a.Notes {
		fmt.Fprintf(&b, "[%s]\n", n)
	}
	if a.Error != "" {
		b.WriteString(a.Error + "\n")
		return b.String()
	}
	switch a.Kind {
	case OpVars:
		a.varsText(&b, adv)
	case OpInspect:
		if a.Inspect != nil {
			a.Inspect.text(&b)
		}
	case OpComplete:
		for _, c := range a.Completions {
			b.WriteString(c + "\n")
		}
		if len(a.Completions) == 0 {
			b.WriteString("no completions\n")
		}
		if a.Left > 0 {
			fmt.Fprintf(&b, "[%d more not shown: type more of the name, or pass %s]\n", a.Left, adv.Option("limit"))
		}
	case OpReset:
		fmt.Fprintf(&b, "reset session '%s': %d %s removed", a.Session, a.Removed, plural(a.Removed, "name", "names"))
		if len(a.Kept) > 0 {
			fmt.Fprintf(&b, "; modules kept: %s", strings.Join(a.Kept, ", "))
		}
		if len(a.Restored) > 0 {
			fmt.Fprintf(&b, "; put back: %s", strings.Join(a.Restored, ", "))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func (a *Answer) varsText(b *strings.Builder, adv Advice) {
	if a.Total == 0 {
		fmt.Fprintf(b, "session '%s' has no names of its user\n", a.Session)
	}
	w := 0
	for _, v := range a.Vars {
		w = max(w, len(v.Name))
	}
	w = min(w, 24)
	for _, v := range a.Vars {
		fmt.Fprintf(b, "%-*s  %s  %s\n", w, v.Name, v.Type, v.Repr)
	}
	if a.Left > 0 {
		fmt.Fprintf(b, "[%d of %d names not shown: pass %s, or inspect one by name]\n", a.Left, a.Total, adv.Option("limit"))
	}
	if a.Hidden > 0 {
		fmt.Fprintf(b, "[%d %s starting with _ not shown: %s shows them]\n", a.Hidden, plural(a.Hidden, "name", "names"), adv.Set("all"))
	}
}

func (i *Inspection) text(b *strings.Builder) {
	if i.Kind == i.Type || i.Kind == "object" || i.Kind == "" {
		fmt.Fprintf(b, "%s: %s\n", i.Expr, i.Type)
	} else {
		fmt.Fprintf(b, "%s: %s (%s)\n", i.Expr, i.Type, i.Kind)
	}
	if i.Len != nil {
		fmt.Fprintf(b, "len: %d\n", *i.Len)
	}
	if i.Shape != "" {
		fmt.Fprintf(b, "shape: %s\n", i.Shape)
	}
	if i.Dtype != "" {
		fmt.Fprintf(b, "dtype: %s\n", i.Dtype)
	}
	if i.Signature != "" {
		fmt.Fprintf(b, "signature: %s\n", i.Signature)
	}
	if i.File != "" {
		if i.Line > 0 {
			fmt.Fprintf(b, "defined in: %s, line %d\n", i.File, i.Line)
		} else {
			fmt.Fprintf(b, "file: %s\n", i.File)
		}
	}
	if i.Doc != "" {
		b.WriteString("doc:\n  " + strings.ReplaceAll(i.Doc, "\n", "\n  ") + "\n")
	}
	b.WriteString("repr: " + i.Repr + "\n")
	if len(i.Attrs) > 0 {
		fmt.Fprintf(b, "attributes (%d): %s", len(i.Attrs)+i.AttrsLeft, strings.Join(i.Attrs, ", "))
		if i.AttrsLeft > 0 {
			fmt.Fprintf(b, ", ... %d more", i.AttrsLeft)
		}
		b.WriteString("\n")
	}
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
