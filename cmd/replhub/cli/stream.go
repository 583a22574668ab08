package cli

import (
	"io"
	"strings"

	"github.com/replhub/replhub/client"
)

// streamOn makes eo stream the cell's output as it is written, when want
// and the output is a terminal; the writer it returns (nil when it does
// not stream) ends an open line before the reply.
func (e *env) streamOn(eo *client.ExecOptions, want bool) *streamWriter {
	if !want || !isTerminal(e.io.Out) {
		return nil
	}
	s := &streamWriter{w: e.io.Out}
	eo.OnOutput = s.write
	return s
}

// streamWriter (exec on a terminal) writes a cell's output as it comes, and remembers whether
// the last of it ended a line.
type streamWriter struct {
	w    io.Writer
	open bool // the last output did not end with a newline
}

func (s *streamWriter) write(text string) {
	if text == "" {
		return
	}
	io.WriteString(s.w, text)
	s.open = !strings.HasSuffix(text, "\n")
}

// endLine ends an open line when more text follows.
func (s *streamWriter) endLine(more bool) {
	if s != nil && s.open && more {
		io.WriteString(s.w, "\n")
		s.open = false
	}
}
