package modules

import (
	"strings"
	"unicode"
)

// maxDoc bounds a listed docstring line, in runes.
const maxDoc = 100

// Doc returns the first non-blank line of the module docstring of Python
// source src, trimmed and at most maxDoc runes, or "" when src does not
// open with a string literal. It reads the literal only: comments and
// blank lines before it are skipped; a bytes or f-string prefix is not a
// docstring. Escapes stay as written.
func Doc(src string) string {
	s := strings.TrimPrefix(src, "\ufeff")
	for {
		s = strings.TrimLeft(s, " \t\r\n\f")
		if !strings.HasPrefix(s, "#") {
			break
		}
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return ""
		}
		s = s[i+1:]
	}
	// A prefix of r and u letters, in either case (rU is no longer
	// Python, but harmless here).
	for len(s) > 0 && strings.ContainsRune("rRuU", rune(s[0])) {
		s = s[1:]
	}
	var quote string
	switch {
	case strings.HasPrefix(s, `"""`), strings.HasPrefix(s, `'''`):
		quote = s[:3]
	case strings.HasPrefix(s, `"`), strings.HasPrefix(s, `'`):
		quote = s[:1]
	default:
		return ""
	}
	body := s[len(quote):]
	if i := strings.Index(body, quote); i >= 0 {
		body = body[:i]
	}
	for _, line := range strings.Split(body, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			return clean(line)
		}
	}
	return ""
}

// clean drops control characters (a docstring line goes into a terminal
// and into the MCP instructions) and bounds the length.
func clean(line string) string {
	var b strings.Builder
	n := 0
	for _, r := range line {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			continue
		}
		if n == maxDoc {
			b.WriteString("...")
			break
		}
		b.WriteRune(r)
		n++
	}
	return strings.TrimSpace(b.String())
}
