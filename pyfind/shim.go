// Package pyfind tells which real interpreter a Python command means, and
// its version, without running it wherever a version manager's own rules
// and layout can tell: a pyenv shim costs about 0.3 s a run, the
// interpreter behind it 20 ms.
//
// Resolve follows pyenv's rules (PYENV_VERSION, then .python-version from
// the folder upwards, then $(pyenv root)/version; prefixes such as "3.12"
// resolve to the newest installed 3.12.x) and asdf's (ASDF_PYTHON_VERSION,
// then .tool-versions from the folder upwards, then ~/.tool-versions).
// Minor reads a version from where an interpreter lives (python3.N, pyenv's
// versions/3.N.x, asdf's installs/python/3.N.x, uv's cpython-3.N.x-…, rye's
// cpython@3.N.x, Homebrew's python@3.N, a conda prefix's
// conda-meta/python-3.N.x-BUILD.json) and runs it only when that tells
// nothing, once per interpreter, keeping the answer in a Cache.
// CondaPythons lists the conda installs and envs, the activated one first.
//
// The remote finder (boot/finder.sh) applies the same rules on a host.
package pyfind

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/replhub/replhub/internal/atomicfile"
)

// Choice is the interpreter a command runs.
type Choice struct {
	// Path is the executable: the command itself, or what its shim execs.
	Path string
	// Env holds what the manager sets for the interpreter (pyenv puts the
	// version's bin folder first on PATH and exports PYENV_VERSION), as
	// KEY=VALUE, to append to the caller's environment.
	Env []string
	// Shim is the shim that was resolved, or "".
	Shim string
}

// Resolve returns the interpreter that the command at path runs for a
// caller with environment getenv in folder cwd. A path that is no shim is
// its own choice. ok is false for a shim whose choice cannot be read (a
// version that is not installed, a manager this package does not know):
// then the caller runs the shim itself.
func Resolve(path string, getenv func(string) string, cwd string) (c Choice, ok bool) {
	dir := filepath.Dir(path)
	if filepath.Base(dir) != "shims" {
		return Choice{Path: path}, true
	}
	prog := filepath.Base(path)
	root := filepath.Dir(dir)
	if r := shimRoot(path); r != "" {
		root = r
	}
	if isDir(filepath.Join(root, "versions")) {
		return pyenv(root, prog, path, getenv, cwd)
	}
	if isDir(filepath.Join(root, "installs")) {
		return asdf(root, prog, path, getenv, cwd)
	}
	return Choice{Path: path}, false
}

// shimRoot reads PYENV_ROOT from a pyenv shim, which names it:
// `export PYENV_ROOT="/home/me/.pyenv"`.
func shimRoot(path string) string {
	b, err := atomicfile.ReadUserHead(path, 4096)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), `export PYENV_ROOT="`); ok {
			if v, ok := strings.CutSuffix(v, `"`); ok && filepath.IsAbs(v) {
				return v
			}
		}
	}
	return ""
}

func pyenv(root, prog, shim string, getenv func(string) string, cwd string) (Choice, bool) {
	names := getenv("PYENV_VERSION")
	if names == "" {
		start := getenv("PYENV_DIR")
		if start == "" {
			start = cwd
		}
		f := findUp(start, ".python-version")
		if f == "" && start != cwd {
			f = findUp(cwd, ".python-version")
		}
		if f == "" {
			f = filepath.Join(root, "version")
		}
		names = strings.Join(readVersionFile(f, true), ":")
	}
	if names == "" {
		names = "system"
	}
	versions := filepath.Join(root, "versions")
	// pyenv exec exports the names as it resolved them (3.12 → 3.12.10).
	var resolved []string
	for _, name := range strings.Split(names, ":") {
		name = strings.TrimPrefix(name, "python-")
		if v := latest(versions, name); v != "" {
			name = v
		}
		resolved = append(resolved, name)
	}
	names = strings.Join(resolved, ":")
	for _, name := range resolved {
		if name == "system" {
			if p := lookPathWithout(prog, getenv("PATH"), filepath.Dir(shim)); p != "" {
				return Choice{Path: p, Shim: shim, Env: []string{"PYENV_VERSION=" + names}}, true
			}
			continue
		}
		if !isDir(filepath.Join(versions, name)) || !safeName(name) {
			continue
		}
		bin := filepath.Join(versions, name, "bin")
		if p := filepath.Join(bin, prog); isExec(p) {
			return Choice{Path: p, Shim: shim, Env: []string{
				"PATH=" + bin + string(filepath.ListSeparator) + getenv("PATH"), "PYENV_VERSION=" + names}}, true
		}
	}
	return Choice{Path: shim}, false
}

func asdf(root, prog, shim string, getenv func(string) string, cwd string) (Choice, bool) {
	var names []string
	if v := getenv("ASDF_PYTHON_VERSION"); v != "" {
		names = strings.Fields(v)
	} else {
		file := getenv("ASDF_DEFAULT_TOOL_VERSIONS_FILENAME")
		if file == "" {
			file = ".tool-versions"
		}
		f := findUp(cwd, file)
		if f == "" && getenv("HOME") != "" {
			f = filepath.Join(getenv("HOME"), file)
		}
		for _, line := range readVersionFile(f, false) {
			if fields := strings.Fields(line); len(fields) > 1 && fields[0] == "python" {
				names = fields[1:]
				break
			}
		}
	}
	installs := filepath.Join(root, "installs", "python")
	for _, name := range names {
		if name == "system" {
			if p := lookPathWithout(prog, getenv("PATH"), filepath.Dir(shim)); p != "" {
				return Choice{Path: p, Shim: shim}, true
			}
			continue
		}
		if !safeName(name) {
			continue
		}
		if p := filepath.Join(installs, name, "bin", prog); isExec(p) {
			return Choice{Path: p, Shim: shim}, true
		}
	}
	return Choice{Path: shim}, false
}

// findUp looks for name in dir and each folder above it.
func findUp(dir, name string) string {
	if dir == "" || !filepath.IsAbs(dir) {
		return ""
	}
	for i := 0; i < 256; i++ {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
		up := filepath.Dir(dir)
		if up == dir {
			break
		}
		dir = up
	}
	return ""
}

// readVersionFile reads a version file as pyenv does: the first word of
// each line, blank lines and # comments skipped, names that could leave
// the versions folder dropped; with firstWord false, whole lines.
func readVersionFile(path string, firstWord bool) []string {
	b, err := atomicfile.ReadUserHead(path, 64<<10)
	if err != nil {
		return nil
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() && len(out) < 64 {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !firstWord {
			out = append(out, line)
			continue
		}
		if w := strings.Fields(line)[0]; safeName(w) {
			out = append(out, w)
		}
	}
	return out
}

// safeName refuses a version name that could point outside the versions
// folder (pyenv's is_version_safe).
func safeName(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") || len(name) > 255 {
		return false
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}

// latest resolves a version name as pyenv-latest does: an installed
// folder of that name, else the newest installed prefix-[.-]… that is not
// a dev, source, pre-release or free-threaded build.
func latest(versions, name string) string {
	if !safeName(name) {
		return ""
	}
	if isDir(filepath.Join(versions, name)) {
		return name
	}
	ents, err := os.ReadDir(versions)
	if err != nil {
		return ""
	}
	var cands []string
	for _, e := range ents {
		v := e.Name()
		rest, ok := strings.CutPrefix(v, name)
		if !ok || rest == "" || (rest[0] != '.' && rest[0] != '-') || preRelease(v) {
			continue
		}
		cands = append(cands, v)
	}
	if len(cands) == 0 {
		return ""
	}
	sort.Slice(cands, func(i, j int) bool { return versionLess(cands[i], cands[j]) })
	return cands[len(cands)-1]
}

func preRelease(v string) bool {
	for _, s := range []string{"-dev", "-src", "-latest"} {
		if strings.HasSuffix(v, s) {
			return true
		}
	}
	n := len(v)
	i := n
	for i > 0 && v[i-1] >= '0' && v[i-1] <= '9' {
		i--
	}
	if i < n && i > 0 && (v[i-1] == 'a' || v[i-1] == 'b' || (i > 1 && v[i-2:i] == "rc")) {
		return true
	}
	return n > 1 && v[n-1] == 't' && v[n-2] >= '0' && v[n-2] <= '9'
}

// versionLess orders dotted versions number by number.
func versionLess(a, b string) bool {
	pa, pb := strings.FieldsFunc(a, isSep), strings.FieldsFunc(b, isSep)
	for i := 0; i < len(pa) && i < len(pb); i++ {
		na, ea := strconv.Atoi(pa[i])
		nb, eb := strconv.Atoi(pb[i])
		if ea == nil && eb == nil {
			if na != nb {
				return na < nb
			}
			continue
		}
		if pa[i] != pb[i] {
			return pa[i] < pb[i]
		}
	}
	return len(pa) < len(pb)
}

func isSep(r rune) bool { return r == '.' || r == '-' }

// lookPathWithout finds prog on path, skipping the folder skip (the
// manager's shims: its "system" is the next one on PATH).
func lookPathWithout(prog, path, skip string) string {
	for _, d := range filepath.SplitList(path) {
		if d == "" || filepath.Clean(d) == filepath.Clean(skip) {
			continue
		}
		if p := filepath.Join(d, prog); isExec(p) {
			return p
		}
	}
	return ""
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}
