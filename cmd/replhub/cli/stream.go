package cli

import (
	"io"
	"strings"
)

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
	if s.open && more {
		io.WriteString(s.w, "\n")
		s.open = false
	}
}
