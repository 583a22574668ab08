package memory

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/replhub/replhub/internal/atomicfile"
	"github.com/replhub/replhub/internal/lazyre"
)

// MaxName is the longest entry name, ".md" included. Claude Code's own names
// are short snake_case words; this only stops the absurd.
const MaxName = 200

// MaxHook is the longest index hook, in characters. The index is loaded
// into every session and cut at 200 lines or 25 KB, so a hook is one short
// line.
const MaxHook = 300

// MaxEntry is the largest entry, or index, read or written: an entry is
// read into an agent's context whole, and a FIFO or /dev/zero in its place
// must not hang or fill the reader.
const MaxEntry = 1 << 20

// CleanName checks an entry name and returns its file name: a bare name of
// ASCII letters, digits, '.', '_' and '-', not starting with a dot, without
// "..", with ".md" added when it does not end so (the docs speak of markdown
// topic files only), at most MaxName bytes, and not the index itself.
// The strict alphabet keeps a name safe as a path and as the target of a
// markdown link in the index.
func CleanName(name string) (string, error) {
	switch {
	case name == "":
		return "", errors.New("memory: empty name; give a file name like notes.md")
	case strings.ContainsRune(name, 0):
		return "", errors.New("memory: the name contains a NUL byte")
	case strings.ContainsAny(name, `/\`):
		return "", fmt.Errorf("memory: %q is a path; give a bare file name like notes.md", name)
	case name[0] == '.':
		return "", fmt.Errorf("memory: %q starts with a dot; give a file name like notes.md", name)
	}
	for _, c := range []byte(name) {
		if !nameByte(c) {
			return "", fmt.Errorf("memory: %q has a character other than letters, digits, '.', '_' and '-'", name)
		}
	}
	if !strings.HasSuffix(name, ".md") {
		name += ".md"
	}
	if strings.Contains(name, "..") {
		return "", fmt.Errorf("memory: %q contains '..'", name)
	}
	if len(name) > MaxName {
		return "", fmt.Errorf("memory: the name is %d characters long; at most %d", len(name), MaxName)
	}
	if strings.EqualFold(name, Index) {
		return "", errors.New("memory: MEMORY.md is the index, kept by write and delete; choose another name")
	}
	return name, nil
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}

// checkHook refuses an index hook that is not one short line.
func checkHook(hook string) error {
	switch {
	case strings.ContainsAny(hook, "\r\n"):
		return errors.New("memory: the index hook must be one line")
	case strings.ContainsRune(hook, 0):
		return errors.New("memory: the index hook contains a NUL byte")
	case utf8.RuneCountInString(hook) > MaxHook:
		return fmt.Errorf("memory: the index hook is %d characters long; keep it to one short line (at most %d)", utf8.RuneCountInString(hook), MaxHook)
	}
	return nil
}

// indexRE matches an index line: a markdown list item whose first thing is
// a link, then an optional dash or colon, then the hook. Claude Code writes
// "- [Title](file.md) — hook"; the docs do not fix the format, so reading
// is lenient and writing uses that form (indexLine).
var indexRE = lazyre.New(`^[ \t]*[-*+][ \t]+\[([^\]]*)\]\(([^) \t]+)\)[ \t]*(?:(?:—|–|-|:)[ \t]*)?(.*)$`)

// checkSize refuses a text of n bytes past MaxEntry.
func checkSize(n int) error {
	if n > MaxEntry {
		return fmt.Errorf("memory: the text is %d bytes; an entry holds at most %d (1 MiB): split it, or keep the bulk in a file and its path here", n, MaxEntry)
	}
	return nil
}

// indexLine is the line write adds for an entry.
func indexLine(title, name, hook string) string {
	if hook == "" {
		return "- [" + title + "](" + name + ")"
	}
	return "- [" + title + "](" + name + ") — " + hook
}

// parseLine returns the title, target file name and hook of an index line,
// ok false when the line is no entry.
func parseLine(line string) (title, name, hook string, ok bool) {
	m := indexRE.FindStringSubmatch(strings.TrimSuffix(line, "\r"))
	if m == nil {
		return "", "", "", false
	}
	return m[1], strings.TrimPrefix(m[2], "./"), strings.Trim(m[3], " \t"), true
}

// Store is one memory folder. Its zero value is unusable; Dir must be set.
type Store struct {
	Dir string
}

// Open returns the Store of the project that cwd belongs to (see Dir).
func Open(cwd string) (*Store, error) {
	d, err := Dir(cwd)
	if err != nil {
		return nil, err
	}
	return &Store{Dir: d}, nil
}

// Entry is one memory: a file, an index line, or both.
type Entry struct {
	Name    string // file name, e.g. "notes.md"
	Title   string // the index line's link text; "" without one
	Hook    string // the index line's text after the link
	Indexed bool   // MEMORY.md has a line for it
	Missing bool   // MEMORY.md has a line for it but the file is gone
}

// List returns the entries in index order, then the files that have no
// index line, by name. Index lines whose target is not a valid entry name
// (links elsewhere) are left out.
func (s *Store) List() ([]Entry, error) {
	lines, err := s.indexLines()
	if err != nil {
		return nil, err
	}
	files, err := s.files()
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []Entry
	for _, l := range lines {
		title, name, hook, ok := parseLine(l)
		if !ok || seen[name] {
			continue
		}
		if n, err := CleanName(name); err != nil || n != name {
			continue
		}
		seen[name] = true
		out = append(out, Entry{Name: name, Title: title, Hook: hook, Indexed: true, Missing: !files[name]})
	}
	var rest []string
	for n := range files {
		if !seen[n] {
			rest = append(rest, n)
		}
	}
	sort.Strings(rest)
	for _, n := range rest {
		out = append(out, Entry{Name: n})
	}
	return out, nil
}

// ListText is List as text, one line an entry, under a line naming the folder.
func (s *Store) ListText() (string, error) {
	es, err := s.List()
	if err != nil {
		return "", err
	}
	return FormatList(s.Dir, es), nil
}

// FormatList renders entries as List's text; memory.py renders the same.
func FormatList(dir string, es []Entry) string {
	var b strings.Builder
	switch len(es) {
	case 0:
		fmt.Fprintf(&b, "memory: %s (no entries)\n", dir)
	case 1:
		fmt.Fprintf(&b, "memory: %s (1 entry)\n", dir)
	default:
		fmt.Fprintf(&b, "memory: %s (%d entries)\n", dir, len(es))
	}
	for _, e := range es {
		switch {
		case !e.Indexed:
			fmt.Fprintf(&b, "%s  (no line in MEMORY.md)\n", e.Name)
		case e.Missing:
			fmt.Fprintf(&b, "%s  %s  (file missing)\n", e.Name, e.Hook)
		default:
			fmt.Fprintf(&b, "%s  %s\n", e.Name, e.Hook)
		}
	}
	return b.String()
}

// Read returns an entry's text.
func (s *Store) Read(name string) (string, error) {
	n, err := CleanName(name)
	if err != nil {
		return "", err
	}
	b, err := atomicfile.ReadUserFile(filepath.Join(s.Dir, n), MaxEntry)
	if err != nil {
		return "", s.notFound(n, err)
	}
	return string(b), nil
}

func (s *Store) notFound(n string, err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("memory: no entry %s in %s", n, s.Dir)
	}
	return fmt.Errorf("memory: %s: %v", n, unwrapPath(err))
}

// Write sets an entry's text, creating the folder when needed, and gives it
// one line in MEMORY.md: a new line when it had none, its old line with the
// hook replaced when hook is not empty (the title is kept), its old line
// untouched otherwise. It returns what it did, in one line.
func (s *Store) Write(name, text, hook string) (string, error) {
	n, err := CleanName(name)
	if err != nil {
		return "", err
	}
	if err := checkHook(hook); err != nil {
		return "", err
	}
	if err := checkSize(len(text)); err != nil {
		return "", err
	}
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return "", fmt.Errorf("memory: %v", err)
	}
	if err := writeAtomic(filepath.Join(s.Dir, n), []byte(text)); err != nil {
		return "", err
	}
	lines, err := s.indexLines()
	if err != nil {
		return "", err
	}
	what := "kept"
	var out []string
	found := false
	for _, l := range lines {
		title, target, _, ok := parseLine(l)
		if !ok || target != n {
			out = append(out, l)
			continue
		}
		if found {
			what = "updated" // a duplicate line goes
			continue
		}
		found = true
		if hook != "" {
			nl := indexLine(title, n, hook)
			if strings.HasSuffix(l, "\r") {
				nl += "\r"
			}
			if nl != l {
				what = "updated"
			}
			l = nl
		}
		out = append(out, l)
	}
	if !found {
		out = append(out, indexLine(strings.TrimSuffix(n, ".md"), n, hook))
		what = "added"
	}
	if what != "kept" {
		if err := s.writeIndex(out); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("wrote %s (%d bytes); MEMORY.md line %s", n, len(text), what), nil
}

// Edit replaces the one occurrence of old in an entry with new. It refuses
// when old is empty, absent or there more than once, and changes nothing then.
func (s *Store) Edit(name, old, new string) (string, error) {
	n, err := CleanName(name)
	if err != nil {
		return "", err
	}
	if old == "" {
		return "", errors.New("memory: old is empty; give the exact text to replace")
	}
	p := filepath.Join(s.Dir, n)
	b, err := atomicfile.ReadUserFile(p, MaxEntry)
	if err != nil {
		return "", s.notFound(n, err)
	}
	text := string(b)
	switch c := strings.Count(text, old); c {
	case 0:
		return "", fmt.Errorf("memory: old text not found in %s; read it and copy the text exactly", n)
	case 1:
	default:
		return "", fmt.Errorf("memory: old text occurs %d times in %s; include more of its surroundings to make it unique", c, n)
	}
	text = strings.Replace(text, old, new, 1)
	if err := checkSize(len(text)); err != nil {
		return "", err
	}
	if err := writeAtomic(p, []byte(text)); err != nil {
		return "", err
	}
	return fmt.Sprintf("edited %s (%d bytes)", n, len(text)), nil
}

// Delete removes an entry's file and its lines in MEMORY.md.
func (s *Store) Delete(name string) (string, error) {
	n, err := CleanName(name)
	if err != nil {
		return "", err
	}
	lines, err := s.indexLines()
	if err != nil {
		return "", err
	}
	var out []string
	for _, l := range lines {
		if _, target, _, ok := parseLine(l); ok && target == n {
			continue
		}
		out = append(out, l)
	}
	hadLine := len(out) != len(lines)
	err = os.Remove(filepath.Join(s.Dir, n))
	hadFile := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("memory: %s: %v", n, unwrapPath(err))
	}
	if hadLine {
		if err := s.writeIndex(out); err != nil {
			return "", err
		}
	}
	switch {
	case hadFile && hadLine:
		return fmt.Sprintf("deleted %s and its MEMORY.md line", n), nil
	case hadFile:
		return fmt.Sprintf("deleted %s (it had no MEMORY.md line)", n), nil
	case hadLine:
		return fmt.Sprintf("deleted the MEMORY.md line of %s (its file was already gone)", n), nil
	}
	return "", fmt.Errorf("memory: no entry %s in %s", n, s.Dir)
}

// indexLines returns MEMORY.md split at "\n" without the final newline;
// nil when there is no index yet.
func (s *Store) indexLines() ([]string, error) {
	b, err := atomicfile.ReadUserFile(filepath.Join(s.Dir, Index), MaxEntry)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("memory: %s: %v", Index, unwrapPath(err))
	}
	if len(b) == 0 {
		return nil, nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n"), nil
}

func (s *Store) writeIndex(lines []string) error {
	text := ""
	if len(lines) > 0 {
		text = strings.Join(lines, "\n") + "\n"
	}
	if err := checkSize(len(text)); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(s.Dir, Index), []byte(text))
}

// files returns the names of the entry files in the folder: regular files
// (or links to them) with valid names, the index left out.
func (s *Store) files() (map[string]bool, error) {
	names, err := readDirNames(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("memory: %v", unwrapPath(err))
	}
	out := map[string]bool{}
	for _, n := range names {
		if c, err := CleanName(n); err != nil || c != n {
			continue
		}
		if fi, err := os.Stat(filepath.Join(s.Dir, n)); err == nil && fi.Mode().IsRegular() {
			out[n] = true
		}
	}
	return out, nil
}

// writeAtomic replaces path with data through a temporary file in the same
// folder, so a reader sees the old text or the new, never a part. A file
// that exists keeps its mode; a new one is 0600.
func writeAtomic(path string, data []byte) error {
	if err := atomicfile.WriteFileSync(path, data, 0); err != nil {
		return fmt.Errorf("memory: writing %s: %v", filepath.Base(path), unwrapPath(err))
	}
	return nil
}
