// Package modules serves the modules that code in a session imports as
// replhub.NAME: the shipped ones (boot/modules, embedded in the binary) and
// the user's, each NAME.py of the user's modules folder, which shadows a
// shipped module of the same name.
//
// A user's file is read at every import and every listing, never cached,
// so an edit reaches the next import or importlib.reload and a file made
// after a session started is found. The hub's relay answers a session's
// "module" request with Load; the worker's import hook owns the name
// replhub (boot/worker.py). This package reads; it sends nothing.
package modules

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/replhub/replhub/boot"
	"github.com/replhub/replhub/internal/lazyre"
)

// Prefix is what every module's dotted name starts with.
const Prefix = "replhub."

// MaxSize bounds a module's source: a bigger file is refused, not read.
const MaxSize = 4 << 20

// A Module is one module's source and where it came from.
type Module struct {
	Name string // NAME, without Prefix
	Src  string
	// File names it in tracebacks: the user's file, or
	// <replhub>/modules/NAME.py for a shipped one.
	File string
	User bool
}

// Info describes a module for a listing.
type Info struct {
	Name string `json:"name"`
	// Doc is the first line of its docstring, or "".
	Doc  string `json:"doc"`
	User bool   `json:"user,omitempty"`
	// Shadows says that a user's module hides a shipped one.
	Shadows bool `json:"shadows,omitempty"`
	// Error says why a user's file cannot be imported ("" when it can).
	Error string `json:"error,omitempty"`
}

// An Error is a module that cannot be served; its text is one line that
// says what to do.
type Error struct {
	Name     string // as asked
	Reason   string
	NotFound bool
}

func (e *Error) Error() string {
	if e.NotFound {
		return fmt.Sprintf("No module named '%s': %s", e.Name, e.Reason)
	}
	return e.Name + ": " + e.Reason
}

// IsNotFound says whether err is a module that does not exist.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.NotFound
}

var validName = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]{0,99}$`)

// ValidName says whether name (without Prefix) can be a module's name.
func ValidName(name string) bool { return validName.MatchString(name) }

// Load returns module dotted (replhub.NAME): the user's NAME.py in dir if
// there is one, else the shipped one. dir "" means no user modules.
func Load(dir, dotted string) (Module, error) {
	name, ok := strings.CutPrefix(dotted, Prefix)
	if !ok || !ValidName(name) {
		return Module{}, &Error{Name: clip(dotted), Reason: "not a module name: replhub.NAME takes letters, digits and _ (not first), at most 100"}
	}
	if dir != "" {
		m, err := readUser(dir, name)
		if err == nil || !errors.Is(err, fs.ErrNotExist) {
			return m, err
		}
	}
	if src, ok := boot.Shipped()[name]; ok {
		return Module{Name: name, Src: string(src), File: "<replhub>/modules/" + name + ".py"}, nil
	}
	where := name + ".py in the modules folder"
	if dir != "" {
		where = filepath.Join(dir, name+".py")
	}
	return Module{}, &Error{Name: dotted, NotFound: true, Reason: "modules() lists them; write " + where + " to add it"}
}

// clip keeps a refused name short enough for a one-line error.
func clip(s string) string {
	if len(s) > 60 {
		s = s[:60] + "..."
	}
	return fmt.Sprintf("%q", s)
}

// readUser reads dir/NAME.py, bounded; an error wrapping fs.ErrNotExist
// means there is none.
func readUser(dir, name string) (Module, error) {
	return readUserAtMost(dir, name, MaxSize)
}

// readUserAtMost is readUser that reads the first limit bytes only (a
// listing needs the docstring, not the whole file); its checks are the
// same, on what it read.
func readUserAtMost(dir, name string, limit int64) (Module, error) {
	file := filepath.Join(dir, name+".py")
	dotted := Prefix + name
	// O_NONBLOCK: a FIFO put there must not hang the hub; it is refused
	// below like any file that is not a regular one.
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return Module{}, err
		}
		return Module{}, &Error{Name: dotted, Reason: fmt.Sprintf("cannot read %s: %v", file, errors.Unwrap(err))}
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Module{}, &Error{Name: dotted, Reason: fmt.Sprintf("cannot read %s: %v", file, err)}
	}
	if !fi.Mode().IsRegular() {
		return Module{}, &Error{Name: dotted, Reason: file + " is not a regular file"}
	}
	if fi.Size() > MaxSize {
		return Module{}, tooBig(dotted, file, fi.Size())
	}
	b, err := io.ReadAll(io.LimitReader(f, min(limit, MaxSize)+1))
	if err != nil {
		return Module{}, &Error{Name: dotted, Reason: fmt.Sprintf("cannot read %s: %v", file, err)}
	}
	if len(b) > MaxSize {
		return Module{}, tooBig(dotted, file, int64(len(b)))
	}
	if int64(len(b)) > limit {
		// Drop a rune the cut split, so that it is not taken for bad UTF-8.
		b = b[:limit]
		for n := 1; n <= utf8.UTFMax && n <= len(b); n++ {
			if utf8.RuneStart(b[len(b)-n]) {
				if !utf8.FullRune(b[len(b)-n:]) {
					b = b[:len(b)-n]
				}
				break
			}
		}
	}
	src, err := source(b)
	if err != nil {
		return Module{}, &Error{Name: dotted, Reason: file + " " + err.Error()}
	}
	return Module{Name: name, Src: src, File: file, User: true}, nil
}

func tooBig(dotted, file string, n int64) error {
	return &Error{Name: dotted, Reason: fmt.Sprintf("%s is %.1f MiB, over the %d MiB a module may be", file, float64(n)/(1<<20), MaxSize>>20)}
}

// source checks that b is Python source a session can compile: UTF-8 (a
// byte-order mark is dropped) without NUL bytes.
func source(b []byte) (string, error) {
	b = trimBOM(b)
	if !utf8.Valid(b) {
		n := 0
		for n < len(b) {
			r, size := utf8.DecodeRune(b[n:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			n += size
		}
		return "", fmt.Errorf("is not UTF-8 (byte %d): save it as UTF-8", n)
	}
	if i := strings.IndexByte(string(b), 0); i >= 0 {
		return "", fmt.Errorf("holds a NUL byte (byte %d): it is not Python source", i)
	}
	return string(b), nil
}

func trimBOM(b []byte) []byte {
	if len(b) >= 3 && b[0] == 0xEF && b[1] == 0xBB && b[2] == 0xBF {
		return b[3:]
	}
	return b
}

// listPeek is how much of a user's file a listing reads; MaxList bounds
// how many of the user's files it reads.
const (
	listPeek = 64 << 10
	MaxList  = 500
)

// List describes every module, shipped and the user's (in dir, "" for
// none), sorted by name; names starting with _ are left out, and the
// user's files past the first MaxList (by name).
func List(dir string) []Info {
	byName := map[string]Info{}
	for name, src := range boot.Shipped() {
		byName[name] = Info{Name: name, Doc: Doc(string(src))}
	}
	if dir != "" {
		files, _ := filepath.Glob(filepath.Join(dir, "*.py"))
		if len(files) > MaxList {
			files = files[:MaxList]
		}
		for _, f := range files {
			name := strings.TrimSuffix(filepath.Base(f), ".py")
			if !ValidName(name) {
				continue
			}
			_, shipped := byName[name]
			in := Info{Name: name, User: true, Shadows: shipped}
			if m, err := readUserAtMost(dir, name, listPeek); err != nil {
				in.Error = err.Error()
			} else {
				in.Doc = Doc(m.Src)
			}
			byName[name] = in
		}
	}
	out := make([]Info, 0, len(byName))
	for _, in := range byName {
		if !strings.HasPrefix(in.Name, "_") {
			out = append(out, in)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Text is the listing as modules() and `replhub modules` show it: a head
// line that names where the user's go (dir), then a module a line.
func Text(list []Info, dir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "from replhub import NAME  (yours: %s)\n", filepath.Join(dir, "NAME.py"))
	width := 4
	for _, m := range list {
		width = max(width, len(m.Name))
	}
	for _, m := range list {
		who, about := "shipped", m.Doc
		if m.User {
			who = "yours"
		}
		switch {
		case m.Error != "":
			about = "cannot be imported: " + m.Error
		case m.Shadows:
			about = strings.TrimSpace(about + " (shadows the shipped one)")
		}
		fmt.Fprintf(&b, "  %-*s  %-7s  %s\n", width, m.Name, who, about)
	}
	if len(list) == 0 {
		b.WriteString("  (none)\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
