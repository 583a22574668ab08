package wire

import (
	"fmt"
	"sort"
	"strings"

	"github.com/replhub/replhub/nodeset"
)

// HostResult is one host's part of a group's answer: its session's
// Result (Session is NAME@HOST), or, with Status StatusFailed, why replhub
// could not run the cell there.
type HostResult struct {
	Host string `json:"host"`
	*Result
	Failure string `json:"failure,omitempty"`
	// GroupCell is the group's number for the cell (Result.Cell is the
	// host's own): wait and interrupt of the group take it.
	GroupCell int `json:"group_cell,omitempty"`
	// Connecting is set, with Status StatusRunning, on a host whose
	// session was still starting when the cell's timeout ended: the start
	// goes on, and the cell runs once it is up.
	Connecting bool `json:"connecting,omitempty"`
}

// severity orders statuses from best to worst, for a group's Status and
// exit code: a cell still running is pending, one that raised failed, a
// host replhub could not run it on failed worse, a dead session worst.
var severity = map[string]int{StatusOK: 0, StatusIdle: 0, StatusStarted: 0, StatusQueued: 0, StatusRunning: 1, StatusError: 2, StatusFailed: 3, StatusDead: 4}

// Failed says whether a host's status is listed as a failure: it raised,
// timed out, died, or could not run the cell.
func Failed(status string) bool { return severity[status] > 0 }

// Worst is the worst status of the hosts' results.
func Worst(hosts []HostResult) string {
	worst := StatusOK
	for _, h := range hosts {
		if h.Result != nil && severity[h.Status] > severity[worst] {
			worst = h.Status
		}
	}
	return worst
}

// fanKey is what makes two hosts' replies one block: the same output,
// value, exception, notes and status.
type fanKey struct {
	status, output, value, err, notes, death, display string
}

func keyOf(r *Result) fanKey {
	k := fanKey{status: r.Status, output: r.Output, notes: strings.Join(r.Notes, "\n"), death: r.Death}
	var display strings.Builder
	r.displayText(func(s string) { display.WriteString(s + "\n") })
	k.display = display.String()
	if r.Previous != "" {
		k.notes = r.Previous + "\n" + k.notes
	}
	if r.Value != nil {
		k.value = "=" + *r.Value
	}
	if e := r.Error; e != nil {
		k.err = e.Type + "\n" + e.Message + "\n" + e.Traceback
	}
	return k
}

// fanText renders a group's answer as clush -b does: hosts whose replies
// are the same share one block headed by their folded names, the biggest
// block first; then one line per failure with its reason.
func (r *Result) fanText(surface string) string {
	adv := AdviceFor(surface)
	var b lines
	line := b.line
	line("[" + r.fanSummary() + "]")
	for _, n := range r.Notes {
		b.note(n)
	}
	if c := r.hostCells(); c != "" {
		line("[" + c + "]")
	}
	type block struct {
		hosts []string
		first *Result
		cells map[int]bool
	}
	blocks := map[fanKey]*block{}
	var order []*block
	var failed []HostResult
	for _, h := range r.Fan {
		if h.Result == nil {
			continue // a reply torn or forged: no hub sends a host without one
		}
		if h.Status == StatusFailed || h.Connecting {
			failed = append(failed, h)
			continue
		}
		k := keyOf(h.Result)
		bl := blocks[k]
		if bl == nil {
			bl = &block{first: h.Result, cells: map[int]bool{}}
			blocks[k] = bl
			order = append(order, bl)
		}
		bl.hosts = append(bl.hosts, h.Host)
		bl.cells[h.Cell] = true
		if Failed(h.Status) {
			failed = append(failed, h)
		}
	}
	sort.SliceStable(order, func(i, j int) bool { return len(order[i].hosts) > len(order[j].hosts) })
	for _, bl := range order {
		head := fmt.Sprintf("%s (%d)", nodeset.Fold(bl.hosts), len(bl.hosts))
		rule := strings.Repeat("-", min(max(len(head), 15), 72))
		line(rule + "\n" + head + "\n" + rule)
		cell := bl.first.Cell
		if len(bl.cells) > 1 {
			cell = -1
		}
		b.WriteString(bl.first.hostBody(cell, r.Session, surface))
	}
	if len(failed) > 0 {
		line(fmt.Sprintf("failed on %d of %d %s:", len(failed), len(r.Fan), plural(len(r.Fan), "host", "hosts")))
		for _, f := range foldReasons(failed, r.Session, adv) {
			line("  " + Printable(f, false))
		}
	}
	if r.Others != "" {
		b.note(r.Others)
	}
	return b.String()
}

// hostCells tells, for a group's cell, the hosts on which it has another
// number of their own: "group cell 4 is cell 5 on lab-3, cell 2 on
// lab-[7-8]". Empty when every host numbered it as the group did.
func (r *Result) hostCells() string {
	if r.Cell <= 0 {
		return ""
	}
	byCell := map[int][]string{}
	var cells []int
	for _, h := range r.Fan {
		if h.Result == nil || h.Status == StatusFailed || h.Connecting || h.Cell <= 0 || h.Cell == r.Cell {
			continue
		}
		if byCell[h.Cell] == nil {
			cells = append(cells, h.Cell)
		}
		byCell[h.Cell] = append(byCell[h.Cell], h.Host)
	}
	if len(cells) == 0 {
		return ""
	}
	sort.Ints(cells)
	parts := make([]string, len(cells))
	for i, c := range cells {
		parts[i] = fmt.Sprintf("cell %d on %s", c, nodeset.Fold(byCell[c]))
	}
	return fmt.Sprintf("group cell %d is %s", r.Cell, strings.Join(parts, ", "))
}

// fanSummary counts a group's hosts by outcome.
func (r *Result) fanSummary() string {
	counts := map[string]int{}
	created := 0
	for _, h := range r.Fan {
		if h.Result == nil {
			continue
		}
		if h.Connecting {
			counts["connecting"]++
			continue
		}
		counts[h.Status]++
		if h.Result != nil && h.Created != nil {
			created++
		}
	}
	var parts []string
	for _, c := range []struct{ status, word string }{
		{StatusOK, "ok"}, {StatusStarted, "started"}, {StatusQueued, "queued"}, {StatusIdle, "idle"}, {StatusError, "raised"},
		{StatusRunning, "still running"}, {"connecting", "still connecting"}, {StatusDead, "dead"}, {StatusFailed, "could not run"},
	} {
		if n := counts[c.status]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, c.word))
		}
	}
	s := fmt.Sprintf("group '%s' on %d %s: %s", r.Session, len(r.Fan), plural(len(r.Fan), "host", "hosts"), strings.Join(parts, ", "))
	if created > 0 {
		s += fmt.Sprintf("; created %d %s %s@HOST", created, plural(created, "session", "sessions"), r.Session)
	}
	return s
}

// hostBody is one block's text: a host's reply without the lines about
// other sessions, with cell as its number (-1: the hosts' numbers differ)
// and advice that names the group.
func (r *Result) hostBody(cell int, group, surface string) string {
	adv := AdviceFor(surface)
	var b lines
	line := b.line
	if r.Previous != "" {
		b.note(r.Previous)
	}
	r.writeOutcome(&b, cell)
	switch r.Status {
	case StatusStarted:
		line(fmt.Sprintf("[cell started: %s collects its output and result]", adv.Wait(group)))
	case StatusQueued:
		line(fmt.Sprintf("[cell queued behind %d: %s collects its output and result]", r.Ahead, adv.Wait(group)))
	case StatusRunning:
		line(fmt.Sprintf("[still running after %s; it goes on: %s collects it]", Duration(float64(r.DurationMS)/1000), adv.Wait(group)))
	case StatusDead:
		b.note(r.Death)
	case StatusIdle:
		if r.Output == "" {
			line("[idle: nothing to collect]")
		}
	case StatusOK:
		if r.Output == "" && r.Value == nil {
			line("[no output, no value]")
		}
	}
	return b.String()
}

// foldReasons lists the failures, hosts with the same reason on one line.
func foldReasons(failed []HostResult, group string, adv Advice) []string {
	byReason := map[string][]string{}
	var order []string
	for _, h := range failed {
		reason := ""
		switch h.Status {
		case StatusFailed:
			msg := strings.TrimPrefix(h.Failure, "session '"+h.Session+"' did not start: ")
			reason = "could not run: " + firstLine(strings.ReplaceAll(msg, "'"+h.Session+"'", "'"+group+"@HOST'"))
		case StatusError:
			reason = "raised"
			if e := h.Error; e != nil {
				reason += " " + e.Type
				if e.Message != "" {
					reason += ": " + firstLine(e.Message)
				}
			}
		case StatusRunning:
			reason = fmt.Sprintf("timed out: the cell still runs (%s collects it)", adv.Wait(group))
			if h.Connecting {
				reason = fmt.Sprintf("still connecting: the start goes on, and the cell runs once the session is up (%s tells how it went)", adv.Wait(group))
			}
		case StatusDead:
			reason = "died: " + firstLine(h.Death)
		}
		if byReason[reason] == nil {
			order = append(order, reason)
		}
		byReason[reason] = append(byReason[reason], h.Host)
	}
	out := make([]string, len(order))
	for i, reason := range order {
		out[i] = nodeset.Fold(byReason[reason]) + ": " + reason
	}
	return out
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i] + " ..."
	}
	if len(s) > 300 {
		s = s[:300] + " ..."
	}
	return s
}
