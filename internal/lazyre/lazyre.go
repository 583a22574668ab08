// Package lazyre is a regular expression compiled at its first use rather
// than at package init. Every replhub process, a one-line CLI call too,
// runs the init of every package the binary holds; a pattern with a large
// bound ({1,253}) costs thousands of allocations to compile, so patterns
// that only the hub, the MCP server or a remote start need wait for them.
// The idea is the Go tree's own internal/lazyregexp.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a regexp.Regexp compiled on first use. Its zero value is not
// usable; call New.
type Regexp struct {
	re func() *regexp.Regexp
}

// New returns the pattern expr, compiled (with regexp.MustCompile, so a bad
// pattern panics) the first time it is used.
func New(expr string) *Regexp {
	return &Regexp{re: sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })}
}

// MatchString reports whether s contains a match.
func (r *Regexp) MatchString(s string) bool { return r.re().MatchString(s) }

// FindStringSubmatch is regexp.Regexp.FindStringSubmatch.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.re().FindStringSubmatch(s) }

// ReplaceAllString is regexp.Regexp.ReplaceAllString.
func (r *Regexp) ReplaceAllString(src, repl string) string { return r.re().ReplaceAllString(src, repl) }
