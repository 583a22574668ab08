package mcp

import (
	"strings"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/modules"
)

// maxInstructions bounds the instructions: clients may cut what is longer.
const maxInstructions = 2047

// modulesDir is the user's modules folder, or "" when the client has no
// paths.
func modulesDir(c *client.Client) string {
	if c.Paths.Config == "" {
		return ""
	}
	return c.Paths.Modules()
}

// instructions are Instructions with the modules of list (read when the
// server starts) in place of {modules}: with the first line of each one's
// docstring where that fits, else with the start of it, else names alone.
func instructions(list []modules.Info) string {
	for _, docLen := range []int{100, 48, 24, 0} {
		s := strings.Replace(Instructions, "{modules}", modulesLine(list, docLen, len(list)), 1)
		if len(s) <= maxInstructions {
			return s
		}
	}
	for n := len(list) - 1; ; n-- {
		s := strings.Replace(Instructions, "{modules}", modulesLine(list, 0, n), 1)
		if len(s) <= maxInstructions || n == 0 {
			return s
		}
	}
}

// modulesLine lists the first n modules, each doc cut to docLen bytes.
func modulesLine(list []modules.Info, docLen, n int) string {
	var b strings.Builder
	b.WriteString("- More on import, everywhere: from replhub import NAME; modules() lists them; yours: ~/.config/replhub/modules/NAME.py.")
	for i, m := range list[:n] {
		if i == 0 {
			b.WriteString(" ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(m.Name)
		if m.User {
			b.WriteString(" (yours)")
		}
		if doc := cut(strings.TrimPrefix(m.Doc, m.Name+": "), docLen); doc != "" {
			b.WriteString(": " + doc)
		}
	}
	if n < len(list) {
		b.WriteString("; and more")
	}
	return b.String()
}

// cut keeps s within n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	// At a word's end where there is one in the second half.
	if i := strings.LastIndexByte(s[:n], ' '); i > n/2 {
		n = i
	}
	return strings.TrimRight(s[:n], " ,;:") + "..."
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
