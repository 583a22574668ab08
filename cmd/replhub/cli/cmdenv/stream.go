package cmdenv

import (
	"io"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/internal/lean"
	"github.com/replhub/replhub/wire"
)

// screen is what the command shows on a terminal before its reply (as
// package early's call does).
func (e *Env) screen() *lean.Screen {
	if e.scr == nil {
		e.scr = &lean.Screen{Out: e.IO.Out, Err: e.IO.Err}
	}
	return e.scr
}

// Notes is where a command's own notes on a terminal go (a Ctrl-C's):
// each on a line of its own (lean.Screen.Notes).
func (e *Env) Notes() io.Writer { return e.screen().Notes() }

// StreamOn makes eo stream the cell's output as it is written, when want
// and the output is a terminal; the screen it returns (nil when it does
// not stream) ends an open line before the reply (EndLine).
func (e *Env) StreamOn(eo *client.ExecOptions, want bool) *lean.Screen {
	if !want || !IsTerminal(e.IO.Out) {
		return nil
	}
	s := e.screen()
	eo.OnOutput = s.Output
	return s
}

// FanProgress draws a group's progress ("12/40 done, 1 failed") on one
// line of stderr while hosts are pending, only when stderr is a terminal;
// nil otherwise. A single session's progress draws nothing.
func (e *Env) FanProgress() func(*wire.Progress) {
	if !IsTerminal(e.IO.Err) {
		return nil
	}
	s := e.screen()
	return func(p *wire.Progress) { s.Progress(progressOf(p)) }
}

// progressOf is the part of p that a terminal shows.
func progressOf(p *wire.Progress) lean.Progress {
	return lean.Progress{Session: p.Session, Hosts: p.Hosts, Done: p.Done, Failed: p.Failed}
}

// ClearFanProgress wipes the progress line, if one is shown.
func (e *Env) ClearFanProgress() { e.scr.ClearProgress() }
