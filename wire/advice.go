package wire

import (
	"fmt"
	"unicode/utf16"
	"unicode/utf8"
)

// Surfaces: who reads a reply. Advice in a reply names what that reader
// can do: a shell command for the CLI, a tool and its arguments for an
// MCP client.
const (
	SurfaceCLI = ""    // the CLI and Go programs
	SurfaceMCP = "mcp" // an MCP client
)

// Advice words the next steps a reply suggests, for one surface. The hub
// and Result.TextFor word every piece of advice through it, so that the
// CLI and the MCP server say the same thing in their own terms. The zero
// value words them for the CLI.
type Advice struct{ mcp bool }

// AdviceFor returns the Advice for a surface (SurfaceCLI or SurfaceMCP).
func AdviceFor(surface string) Advice { return Advice{mcp: surface == SurfaceMCP} }

// Surface is the surface a is for.
func (a Advice) Surface() string {
	if a.mcp {
		return SurfaceMCP
	}
	return SurfaceCLI
}

func (a Advice) op(op, name string) string {
	if a.mcp {
		return fmt.Sprintf("call %s with name '%s'", op, name)
	}
	return fmt.Sprintf("`replhub %s %s`", op, name)
}

// Wait collects a cell of session name.
func (a Advice) Wait(name string) string { return a.op("wait", name) }

// WaitCell collects cell n of session name.
func (a Advice) WaitCell(name string, n int) string {
	if a.mcp {
		return fmt.Sprintf("call wait with name '%s' and cell %d", name, n)
	}
	return fmt.Sprintf("`replhub wait %s --cell %d`", name, n)
}

// Interrupt stops the running cell of session name.
func (a Advice) Interrupt(name string) string { return a.op("interrupt", name) }

// InterruptCell stops cell n of session name, or takes it out of the queue.
func (a Advice) InterruptCell(name string, n int) string {
	if a.mcp {
		return fmt.Sprintf("call interrupt with name '%s' and cell %d", name, n)
	}
	return fmt.Sprintf("`replhub interrupt %s --cell %d`", name, n)
}

// ExecWith runs code in session name with a boolean option set.
func (a Advice) ExecWith(name, option string) string {
	if a.mcp {
		return fmt.Sprintf("exec with %s true", option)
	}
	return fmt.Sprintf("`replhub exec %s --%s CODE`", name, option)
}

// Kill ends session name.
func (a Advice) Kill(name string) string { return a.op("kill", name) }

// Exec runs code in session name (and creates it).
func (a Advice) Exec(name string) string {
	if a.mcp {
		return a.op("exec", name)
	}
	return fmt.Sprintf("`replhub exec %s CODE`", name)
}

// ExecOn runs code in session name on host.
func (a Advice) ExecOn(name, host string) string {
	if a.mcp {
		return fmt.Sprintf("call exec with name '%s' and host '%s'", name, host)
	}
	return fmt.Sprintf("`replhub exec %s CODE --host %s`", name, host)
}

// Sessions lists the sessions.
func (a Advice) Sessions() string {
	if a.mcp {
		return "call sessions"
	}
	return "`replhub sessions`"
}

// Without says to leave an option out: "without --host", "omit host".
func (a Advice) Without(option string) string {
	if a.mcp {
		return "omit " + option
	}
	return "without --" + option
}

// With says to give a boolean option: "with --sudo", "with sudo true".
func (a Advice) With(option string) string { return "with " + a.Set(option) }

// Option names an option to pass a value to: "--limit", "limit".
func (a Advice) Option(option string) string {
	if a.mcp {
		return option
	}
	return "--" + option
}

// Set names a boolean option given: "--all", "all true".
func (a Advice) Set(option string) string {
	if a.mcp {
		return option + " true"
	}
	return "--" + option
}

// Fit caps s at max characters as a JavaScript client counts them (UTF-16
// code units), keeping its head and its tail (where a reply's value,
// traceback and status are) around one line that says how much was left
// out. A reply that fits is returned as it is.
func Fit(s string, max int) string {
	n := utf16Len(s)
	if n <= max {
		return s
	}
	// The marker's own length depends on the count; 80 covers it.
	keep := max - 80
	if keep < 0 {
		keep = 0
	}
	head := cutUTF16(s, keep/4)
	tail := tailUTF16(s, keep-utf16Len(head))
	cut := n - utf16Len(head) - utf16Len(tail)
	return head + fmt.Sprintf("\n[... %d characters of this reply left out ...]\n", cut) + tail
}

func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}

// cutUTF16 returns the longest prefix of s of at most n UTF-16 units.
func cutUTF16(s string, n int) string {
	used := 0
	for i, r := range s {
		l := utf16.RuneLen(r)
		if used+l > n {
			return s[:i]
		}
		used += l
	}
	return s
}

// tailUTF16 returns the longest suffix of s of at most n UTF-16 units.
func tailUTF16(s string, n int) string {
	used := 0
	i := len(s)
	for i > 0 {
		r, size := utf8.DecodeLastRuneInString(s[:i])
		l := utf16.RuneLen(r)
		if used+l > n {
			break
		}
		used += l
		i -= size
	}
	return s[i:]
}
