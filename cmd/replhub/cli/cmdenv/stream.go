package cmdenv

import (
	"io"
	"strings"

	"github.com/replhub/replhub/client"
)

// StreamOn makes eo stream the cell's output as it is written, when want
// and the output is a terminal; the writer it returns (nil when it does
// not stream) ends an open line before the reply.
func (e *Env) StreamOn(eo *client.ExecOptions, want bool) *StreamWriter {
	if !want || !IsTerminal(e.IO.Out) {
		return nil
	}
	s := &StreamWriter{w: e.IO.Out}
	eo.OnOutput = s.write
	return s
}

// StreamWriter (exec on a terminal) writes a cell's output as it comes, and remembers whether
// the last of it ended a line.
type StreamWriter struct {
	w    io.Writer
	open bool // the last output did not end with a newline
}

func (s *StreamWriter) write(text string) {
	if text == "" {
		return
	}
	io.WriteString(s.w, text)
	s.open = !strings.HasSuffix(text, "\n")
}

// EndLine ends an open line when more text follows.
func (s *StreamWriter) EndLine(more bool) {
	if s != nil && s.open && more {
		io.WriteString(s.w, "\n")
		s.open = false
	}
}
