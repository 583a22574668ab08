package wire

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Text renders r as the CLI prints it.
func (r *Result) Text() string { return r.TextFor(SurfaceCLI) }

// The CLI's exit codes, decided here and nowhere else.
const (
	ExitOK        = 0
	ExitCellError = 1 // the cell raised
	ExitFailure   = 2 // replhub could not do what was asked
	ExitRunning   = 3 // the cell still runs after the timeout
	ExitDead      = 4 // the session died
)

// ExitCode is the CLI's exit code for r.
func (r *Result) ExitCode() int {
	switch r.Status {
	case StatusError:
		return ExitCellError
	case StatusRunning, StatusTimeout:
		return ExitRunning
	case StatusDead:
		return ExitDead
	case StatusFailed:
		return ExitFailure
	}
	return ExitOK
}

// WaitExitCode is the CLI's exit code for r as the reply to a wait: a
// queued cell, which has not even started, is still running.
func (r *Result) WaitExitCode() int {
	if r.Status == StatusQueued {
		return ExitRunning
	}
	return r.ExitCode()
}

// Plain is r as `replhub exec` prints it, or nil when printing it takes
// more than its text (printsAsText).
func (r *Result) Plain() *Plain {
	if !r.printsAsText() {
		return nil
	}
	return &Plain{Exit: r.ExitCode(), Text: r.Text()}
}

// printsAsText reports whether the CLI prints r as a text and nothing
// else: no display items that go to files, no group's hosts.
func (r *Result) printsAsText() bool { return len(r.Display) == 0 && r.Fan == nil }

// maxPlainJSON bounds PlainJSON's text: escaped once more in the reply's
// line (a quote, a backslash or a line feed takes two bytes), it must
// stay under MaxLine.
const maxPlainJSON = MaxLine / 4

// PlainJSON is r as `replhub exec --json` prints it, or nil where Plain is
// nil or the text is too long for a reply's line. That command decodes
// the Result from its reply and writes it (WriteJSON); so does this, to
// print the same bytes: a string that is not UTF-8 is written \ufffd at
// first, and as the character itself once read back.
func (r *Result) PlainJSON() *Plain {
	if !r.printsAsText() {
		return nil
	}
	back, ok := readBack(r)
	if !ok {
		return nil
	}
	var text strings.Builder
	if back.WriteJSON(&text) != nil || text.Len() > maxPlainJSON {
		return nil
	}
	return &Plain{Exit: r.ExitCode(), Text: text.String()}
}

// WriteJSON writes r as `replhub exec --json` prints it (WriteJSON), its
// notes a list even when there are none, for a program to read.
func (r *Result) WriteJSON(w io.Writer) error {
	if r.Notes == nil {
		c := *r
		c.Notes = []string{}
		r = &c
	}
	return WriteJSON(w, r)
}

// plainJSONText is v as WriteJSON writes it, or false where it cannot be
// or is longer than a plain reply may carry (maxPlainJSON).
func plainJSONText(v any) (string, bool) {
	var text strings.Builder
	if WriteJSON(&text, v) != nil || text.Len() > maxPlainJSON {
		return "", false
	}
	return text.String(), true
}

// readBack is v as a client reads it from a reply: encoded and decoded
// again; false if it cannot be, or its JSON is longer than a plain
// reply may carry (maxPlainJSON).
func readBack[T any](v *T) (*T, bool) {
	b, err := json.Marshal(v)
	if err != nil || len(b) > maxPlainJSON {
		return nil, false
	}
	var back T
	if json.Unmarshal(b, &back) != nil {
		return nil, false
	}
	return &back, true
}

// Plain is l as `replhub sessions [NAME]` prints it (--json, asJSON), as
// a client reads it back from a reply (Print). It is nil when no session
// is so named, which the command line says, or when l is too long for a
// plain reply. l is left as it was.
func (l *SessionList) Plain(name string, asJSON bool) *Plain {
	back, ok := readBack(l)
	if !ok {
		return nil
	}
	var text strings.Builder
	if found, err := back.Print(&text, name, asJSON); !found || err != nil || text.Len() > maxPlainJSON {
		return nil
	}
	return &Plain{Exit: ExitOK, Text: text.String()}
}

// Print writes l as `replhub sessions [NAME]` prints it (--json, asJSON):
// of session name alone (Only), in detail, when name is set. It writes
// nothing, and reports false, when no session is so named.
func (l *SessionList) Print(w io.Writer, name string, asJSON bool) (found bool, err error) {
	if name != "" && !l.Only(name) {
		return false, nil
	}
	if asJSON {
		return true, WriteJSON(w, l)
	}
	_, err = io.WriteString(w, l.Text(name != ""))
	return true, err
}

// WriteJSON writes v as the CLI's --json prints it: indented JSON and a
// line feed.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// TextFor renders r for a surface: the MCP server returns the CLI's text
// with advice in terms of its tools, and one line for a cell that wrote
// nothing and returned nothing, where the CLI prints nothing at all.
func (r *Result) TextFor(surface string) string {
	if r.Fan != nil {
		return r.fanText(surface)
	}
	adv := AdviceFor(surface)
	var b lines
	line := b.line
	if r.Previous != "" {
		b.note(r.Previous)
	}
	if c := r.Created; c != nil {
		where := ""
		if c.Host != "" && c.Host != "local" {
			where = " on " + c.Route
		}
		if c.Root {
			where += " as root"
		}
		b.note(fmt.Sprintf("created session '%s'%s (python %s, cwd %s)", c.Name, where, Printable(c.Python, false), Printable(c.Cwd, false)))
	}
	r.writeOutcome(&b, r.Cell)
	switch r.Status {
	case StatusStarted:
		line(fmt.Sprintf("[cell %d started: %s collects its output and result]", r.Cell, adv.WaitCell(r.Session, r.Cell)))
	case StatusQueued:
		line(fmt.Sprintf("[cell %d queued, %d %s ahead of it: %s collects its output and result, %s takes it out]",
			r.Cell, r.Ahead, plural(r.Ahead, "cell", "cells"), adv.WaitCell(r.Session, r.Cell), adv.InterruptCell(r.Session, r.Cell)))
	case StatusRunning:
		line(fmt.Sprintf("[cell %d still running after %s; it goes on: %s collects its output and result, %s stops it]",
			r.Cell, Duration(float64(r.DurationMS)/1000), adv.Wait(r.Session), adv.Interrupt(r.Session)))
	case StatusTimeout:
		line(fmt.Sprintf("[cell still running after %s, so the run stopped it and ended its session; -t gives it longer]", Duration(float64(r.DurationMS)/1000)))
	case StatusDead:
		b.note(r.Death)
	case StatusIdle:
		if r.Output == "" {
			line(fmt.Sprintf("[session '%s' is idle: nothing to collect]", r.Session))
		}
	case StatusOK:
		if surface == SurfaceMCP && r.Output == "" && r.Value == nil && r.Error == nil && len(r.Display) == 0 {
			line(fmt.Sprintf("[cell %d ran: no output, no value]", r.Cell))
		}
	}
	if r.Others != "" {
		b.note(r.Others)
	}
	return b.String()
}

// lines builds a reply a line at a time.
type lines struct{ strings.Builder }

// line adds s, with a newline unless it ends with one.
func (b *lines) line(s string) {
	b.WriteString(s)
	if !strings.HasSuffix(s, "\n") {
		b.WriteByte('\n')
	}
}

// note adds s as a line of replhub's own, in brackets: what a worker or a
// host said in it (a death's reason, a note) is made Printable.
func (b *lines) note(s string) {
	b.line("[" + Printable(s, true) + "]")
}

// Printable is s with its control characters written as escapes (\x1b,
// \u009b), and every byte that is not UTF-8 as \xNN; line feeds and tabs
// stay when lines is true. The marks that reorder text on the screen
// (bidirectional overrides and isolates) and the line and paragraph
// separators are escaped too: a name with U+202E in it shows its end
// first. What a host sends (its worker's cwd, a note,
// a name, what a failed start printed) goes into replhub's own lines and
// errors through here, so that it cannot put a control sequence on the
// user's terminal; a cell's own output, the user's, does not.
func Printable(s string, lines bool) string {
	// bad says whether the rune r, n bytes long, is escaped.
	bad := func(r rune, n int) bool {
		if lines && (r == '\n' || r == '\t') {
			return false
		}
		return r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == utf8.RuneError && n == 1 || reorders(r)
	}
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if bad(r, n) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case !bad(r, n):
			b.WriteString(s[i : i+n])
		case r < 0x80 || n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
		i += n
	}
	return b.String()
}

// reorders says whether r changes the order or the lines in which a
// terminal shows the text around it: the bidirectional marks, embeddings,
// overrides and isolates, and the line and paragraph separators.
func reorders(r rune) bool {
	return r == 0x200e || r == 0x200f || r >= 0x2028 && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x061c
}

// writeOutcome writes r's notes, output, exception and value, the value
// as Out[cell] (as Out when cell is negative).
func (r *Result) writeOutcome(b *lines, cell int) {
	for _, n := range r.Notes {
		b.note(n)
	}
	if e := r.Earlier; e != nil {
		e.writeOutcome(b, e.Cell)
	}
	if r.Output != "" {
		b.line(r.Output)
	}
	if e := r.Error; e != nil {
		if e.Traceback != "" {
			b.line(e.Traceback)
		} else {
			b.line(e.Type + ": " + e.Message)
		}
	}
	r.displayText(b.line)
	if r.Value != nil {
		if cell < 0 {
			b.line("Out: " + *r.Value)
		} else {
			b.line(fmt.Sprintf("Out[%d]: %s", cell, *r.Value))
		}
	}
}

// Text renders the session list as the CLI prints it; with detail, every
// field of each session.
func (l *SessionList) Text(detail bool) string { return l.TextFor(detail, SurfaceCLI) }

// TextFor renders the session list for a surface.
func (l *SessionList) TextFor(detail bool, surface string) string {
	adv := AdviceFor(surface)
	var b strings.Builder
	if len(l.Sessions) == 0 && len(l.Dead) == 0 && len(l.Swapped) == 0 {
		b.WriteString("no sessions\n")
	}
	for _, s := range l.Sessions {
		b.WriteString(s.Line())
		b.WriteByte('\n')
		if len(s.Names) > 0 {
			fmt.Fprintf(&b, "    names: %s\n", Printable(strings.Join(s.Names, ", "), false))
		}
		if detail {
			fmt.Fprintf(&b, "    host: %s\n", s.Host)
			if s.Route != "" {
				fmt.Fprintf(&b, "    route: %s\n", s.Route)
			}
			fmt.Fprintf(&b, "    python: %s\n    transcript: %s\n    cloudpickle: %v\n",
				Printable(s.Executable, false), s.Transcript, s.Cloudpickle)
			if s.Unread {
				fmt.Fprintf(&b, "    an unread result waits: %s\n", adv.Wait(s.Name))
			}
			for _, q := range s.Queued {
				fmt.Fprintf(&b, "    queued: cell %d (waiting %s): %s\n", q.Cell, Duration(q.WaitedS), q.Code)
			}
			for _, c := range s.UnreadCells {
				fmt.Fprintf(&b, "    unread: cell %d (%s)\n", c, adv.WaitCell(s.Name, c))
			}
		}
	}
	for _, d := range l.Dead {
		fmt.Fprintf(&b, "%s  dead: %s\n", d.Name, Printable(d.Note, false))
	}
	for _, s := range l.Swapped {
		b.WriteString(s.Line() + "\n")
		if detail {
			fmt.Fprintf(&b, "    names: %s\n    swap: %s\n", Printable(strings.Join(s.Names, ", "), false), s.Path)
		}
	}
	if h := l.Hub; h.MemoryMax > 0 {
		fmt.Fprintf(&b, "memory ceiling: %s in use of %s (the hub's cgroup, shared by the hub and its local sessions)\n", MB(h.MemoryUsed), MB(h.MemoryMax))
	}
	if detail {
		h := l.Hub
		fmt.Fprintf(&b, "hub: pid %d, %s, memory limit %s, %s\n    socket %s\n    log %s\n",
			h.Pid, h.Supervisor, h.MemoryLimit, MB(h.RSS), h.Socket, h.Log)
	}
	return b.String()
}

// Line is the one-line summary of a session.
func (s *SessionInfo) Line() string {
	state := "idle " + Duration(s.IdleS)
	switch s.State {
	case "running":
		state = fmt.Sprintf("running for %s (cell %d)", Duration(s.RunningS), s.RunningCell)
		if s.Serving != "" {
			state = fmt.Sprintf("serving a %s for %s", s.Serving, Duration(s.RunningS))
		}
	case "starting", "dead":
		state = s.State
	}
	where := ""
	if s.Host != "" && s.Host != "local" {
		where = "  on " + s.Route
	}
	if s.Root {
		where += "  as root"
	}
	cells := "cells"
	if s.Cells == 1 {
		cells = "cell"
	}
	unread := ""
	if s.Unread {
		unread = "  (unread result)"
	}
	if n := len(s.Queued); n > 0 {
		unread += fmt.Sprintf("  (%d queued)", n)
	}
	if n := len(s.UnreadCells); n > 0 {
		unread += fmt.Sprintf("  (%d unread %s)", n, plural(n, "result", "results"))
	}
	if s.LinkDownS > 0 {
		unread += fmt.Sprintf("  (link down for %s, reconnecting)", Duration(s.LinkDownS))
	}
	return fmt.Sprintf("%s%s  pid %d  python %s  up %s  %s  %d %s  %s  cwd %s%s",
		s.Name, where, s.Pid, Printable(s.Python, false), Duration(s.UpS), state, s.Cells, cells, MB(s.RSS), Printable(s.Cwd, false), unread)
}

// Duration renders seconds as 0.4s, 40s, 2m, 1h3m.
func Duration(sec float64) string {
	switch {
	case sec < 10:
		return fmt.Sprintf("%.1fs", sec)
	case sec < 60:
		return fmt.Sprintf("%ds", int(sec))
	case sec < 3600:
		return fmt.Sprintf("%dm", int(sec/60))
	default:
		return fmt.Sprintf("%dh%dm", int(sec/3600), int(sec/60)%60)
	}
}

// MB renders a byte count in MB (of 2^20 bytes), rounded to the nearest.
func MB(n int64) string { return mb(n + 1<<19) }

// MBUp renders a byte count in MB rounded up, for a size said to be too
// large: it never reads as 0 MB.
func MBUp(n int64) string { return mb(n + 1<<20 - 1) }

func mb(n int64) string { return fmt.Sprintf("%d MB", n>>20) }

// Only keeps session name (live or dead), or the sessions NAME@HOST of
// group name, and reports whether it was there.
func (l *SessionList) Only(name string) bool {
	live := l.Sessions[:0]
	for _, s := range l.Sessions {
		if s.Name == name || !strings.Contains(name, "@") && strings.HasPrefix(s.Name, name+"@") {
			live = append(live, s)
		}
	}
	l.Sessions = live
	dead := l.Dead[:0]
	for _, d := range l.Dead {
		if d.Name == name {
			dead = append(dead, d)
		}
	}
	l.Dead = dead
	swapped := l.Swapped[:0]
	for _, s := range l.Swapped {
		if s.Name == name {
			swapped = append(swapped, s)
		}
	}
	l.Swapped = swapped
	return len(live)+len(dead)+len(swapped) > 0
}
