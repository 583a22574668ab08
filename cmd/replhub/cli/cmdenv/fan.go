package cmdenv

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/replhub/replhub/wire"
)

// FanProgress draws a group's progress ("12/40 done, 1 failed") on one
// line of stderr while hosts are pending, only when stderr is a terminal;
// nil otherwise. A single session's progress draws nothing.
func (e *Env) FanProgress() func(*wire.Progress) {
	if !IsTerminal(e.IO.Err) {
		return nil
	}
	return func(p *wire.Progress) {
		if p.Hosts == 0 || p.Done >= p.Hosts {
			e.ClearFanProgress()
			return
		}
		line := fmt.Sprintf("%s: %d/%d done", p.Session, p.Done, p.Hosts)
		if p.Failed > 0 {
			line += fmt.Sprintf(", %d failed", p.Failed)
		}
		fmt.Fprintf(e.IO.Err, "\r%-60s", line)
		e.shown = true
	}
}

// ClearFanProgress wipes the progress line, if one is shown.
func (e *Env) ClearFanProgress() {
	if e.shown {
		fmt.Fprintf(e.IO.Err, "\r%s\r", strings.Repeat(" ", 60))
		e.shown = false
	}
}

// writeJSONLines writes one compact JSON object a line: a group's hosts,
// for jq and line-by-line readers.
func writeJSONLines(w io.Writer, hosts []wire.HostResult) error {
	enc := json.NewEncoder(w)
	for _, h := range hosts {
		if err := enc.Encode(h); err != nil {
			return err
		}
	}
	return nil
}
