package wire

import (
	"fmt"
	"strings"
	"time"
)

// OpSwap swaps session Name to disk now (Force: even with a background job
// running); without a Name it runs the sweep. The reply's Swaps say what
// became of each session considered.
const OpSwap = "swap"

// Swap outcomes.
const (
	SwapDone   = "swapped" // the session is on disk and ended
	SwapKept   = "kept"    // left running: idle too short, busy, root, a background job
	SwapFailed = "failed"  // tried, and the session goes on: Why says what failed
	SwapOnDisk = "on_disk" // a swap of a session on disk already: nothing to do
)

// SwapOutcome is what a swap did with one session.
type SwapOutcome struct {
	Name   string `json:"name"`
	Host   string `json:"host"`
	Status string `json:"status"`
	// Why says why a session was kept or a swap failed.
	Why string `json:"why,omitempty"`
	// Bytes is the swap's size; Names how many names it holds; Skipped the
	// names that did not pickle, each with why.
	Bytes      int64    `json:"bytes,omitempty"`
	Names      int      `json:"names,omitempty"`
	Skipped    []string `json:"skipped,omitempty"`
	DurationMS int64    `json:"duration_ms,omitempty"`
}

// Line renders an outcome as one line. Why and Skipped are the worker's
// words: they are made Printable.
func (o SwapOutcome) Line() string { return Printable(o.line(), false) }

func (o SwapOutcome) line() string {
	switch o.Status {
	case SwapDone:
		s := fmt.Sprintf("swapped '%s': %d names, %s in %s", o.Name, o.Names, MB(o.Bytes), Duration(float64(o.DurationMS)/1000))
		if len(o.Skipped) > 0 {
			s += "; not kept: " + strings.Join(o.Skipped, "; ")
		}
		return s
	case SwapKept:
		return fmt.Sprintf("kept '%s' running: %s", o.Name, o.Why)
	case SwapOnDisk:
		return fmt.Sprintf("'%s' is on disk already: %s", o.Name, o.Why)
	}
	return fmt.Sprintf("could not swap '%s': %s", o.Name, o.Why)
}

// SwappedInfo is a session on disk: the next exec or session() under its
// name starts it again where it was and loads it.
type SwappedInfo struct {
	Name   string    `json:"name"`
	Host   string    `json:"host"`
	Route  string    `json:"route,omitempty"`
	Python string    `json:"python"`
	Cwd    string    `json:"cwd"`
	When   time.Time `json:"when"`
	Cells  int       `json:"cells"`
	Bytes  int64     `json:"bytes"`
	Names  []string  `json:"names"`
	// Unread is set when output or a result nobody read waits in it.
	Unread bool `json:"unread,omitempty"`
	// Expires is when it is deleted unrestored; zero means never.
	Expires time.Time `json:"expires,omitzero"`
	Path    string    `json:"path"`
}

// Line is the one-line summary of a swapped session.
func (s *SwappedInfo) Line() string {
	where := ""
	if s.Host != "" && s.Host != "local" {
		where = "  on " + s.Route
	}
	unread := ""
	if s.Unread {
		unread = "  (unread output)"
	}
	return fmt.Sprintf("%s%s  swapped %s ago  python %s  %d cells  %s on disk  cwd %s%s",
		s.Name, where, Duration(time.Since(s.When).Seconds()), Printable(s.Python, false), s.Cells, MB(s.Bytes), Printable(s.Cwd, false), unread)
}
