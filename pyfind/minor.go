package pyfind

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/replhub/replhub/internal/atomicfile"
)

// MinorFromPath reads "3.N" from where the interpreter at path lives, or
// else from where its symlinks lead: a python3.N name, a version
// manager's folder (pyenv's versions/3.N.x, asdf's installs/python/3.N.x,
// uv's cpython-3.N.x-…, rye's cpython@3.N.x, Homebrew's python@3.N), or
// the record a conda prefix keeps of its python package. "" when none
// tells.
func MinorFromPath(path string) string {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		real = path
	}
	for _, read := range []func(string) string{minorIn, condaMinor} {
		if v := read(path); v != "" {
			return v
		}
		if real != path {
			if v := read(real); v != "" {
				return v
			}
		}
	}
	return ""
}

// minorIn reads "3.N" from path's own name and folders.
func minorIn(path string) string {
	base := filepath.Base(path)
	if strings.HasPrefix(base, "python3.") {
		if v := minorOf(base[len("python"):]); v != "" {
			return v
		}
	}
	parts := strings.Split(filepath.ToSlash(path), "/")
	for i := len(parts) - 2; i >= 1; i-- {
		p, up := parts[i], parts[i-1]
		var v string
		switch {
		case up == "versions" || (up == "python" && i >= 2 && parts[i-2] == "installs"):
			v = minorOf(p)
		case strings.HasPrefix(p, "cpython-"), strings.HasPrefix(p, "cpython@"):
			v = minorOf(p[len("cpython-"):])
		case strings.HasPrefix(p, "python@"):
			v = minorOf(p[len("python@"):])
		}
		if v != "" {
			return v
		}
	}
	return ""
}

// minorOf reads "3.N" from the start of s ("3.11.7", "3.12-…", "3.9"), or
// "".
func minorOf(s string) string {
	rest, ok := strings.CutPrefix(s, "3.")
	if !ok {
		return ""
	}
	n := 0
	for n < len(rest) && n < 3 && rest[n] >= '0' && rest[n] <= '9' {
		n++
	}
	if n == 0 || n > 2 || (n < len(rest) && rest[n] != '.' && rest[n] != '-' && rest[n] != '+' && rest[n] != 't') {
		return ""
	}
	return "3." + rest[:n]
}

// Cache keeps what running an interpreter told (its minor, where its
// cloudpickle lives), keyed by its real path, size and modification
// time, in a file, so that a new hub does not ask again. It is safe for
// concurrent use; a Cache with an empty File keeps answers in memory only.
type Cache struct {
	File string

	mu      sync.Mutex
	loaded  bool
	entries map[string]cacheEntry
}

type cacheEntry struct {
	Stamp       string `json:"stamp"`
	Minor       string `json:"minor"`
	Cloudpickle string `json:"cloudpickle"`
}

// maxCacheFile bounds what a cache file may hold before it is ignored.
const maxCacheFile = 1 << 20

// Minor is the interpreter's "3.N": read from its path where that tells,
// else asked of it once (its answer kept), else "".
func (c *Cache) Minor(path string) string {
	if v := MinorFromPath(path); v != "" {
		return v
	}
	e, _ := c.lookup(path)
	return e.Minor
}

// CloudpickleDir is the folder of the cloudpickle package the interpreter
// imports, or "" when it has none.
func (c *Cache) CloudpickleDir(path string) string {
	e, _ := c.lookup(path)
	if e.Cloudpickle != "" && !isDir(e.Cloudpickle) {
		c.forget(path)
		e, _ = c.lookup(path)
	}
	return e.Cloudpickle
}

// probe is what the interpreter is asked, once: its minor, and where
// cloudpickle is (an empty line without it).
const probe = `import sys
print("%d.%d" % sys.version_info[:2])
try:
    import os, cloudpickle
    print(os.path.dirname(cloudpickle.__file__))
except Exception:
    print("")`

func (c *Cache) lookup(path string) (cacheEntry, bool) {
	real, stamp := stampOf(path)
	if stamp == "" {
		return cacheEntry{}, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.loadLocked()
	if e, ok := c.entries[real]; ok && e.Stamp == stamp {
		return e, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, real, "-c", probe).Output()
	if err != nil {
		return cacheEntry{}, false
	}
	lines := strings.SplitN(string(out), "\n", 3)
	e := cacheEntry{Stamp: stamp, Minor: minorOf(strings.TrimSpace(lines[0]))}
	if len(lines) > 1 && filepath.IsAbs(strings.TrimSpace(lines[1])) {
		e.Cloudpickle = strings.TrimSpace(lines[1])
	}
	c.entries[real] = e
	// A shim that could not be resolved answers for whatever its manager
	// selects today: kept for this process only.
	if filepath.Base(filepath.Dir(real)) != "shims" {
		c.saveLocked()
	}
	return e, true
}

func (c *Cache) forget(path string) {
	real, _ := stampOf(path)
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, real)
}

// stampOf is the interpreter's real path and what says it is unchanged.
func stampOf(path string) (string, string) {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return "", ""
	}
	fi, err := os.Stat(real)
	if err != nil || !fi.Mode().IsRegular() {
		return "", ""
	}
	return real, strconv.FormatInt(fi.Size(), 10) + "@" + strconv.FormatInt(fi.ModTime().UnixNano(), 10)
}

func (c *Cache) loadLocked() {
	if c.loaded {
		return
	}
	c.loaded = true
	c.entries = map[string]cacheEntry{}
	if c.File == "" {
		return
	}
	if b, err := atomicfile.ReadFile(c.File, maxCacheFile); err == nil {
		c.entries = parseCache(b)
	}
}

// parseCache reads a cache file's entries, leaving out those that are not
// as lookup makes them: a real path, a minor, a cloudpickle folder that
// is an absolute path or none.
func parseCache(b []byte) map[string]cacheEntry {
	entries := map[string]cacheEntry{}
	var m map[string]cacheEntry
	if json.Unmarshal(b, &m) != nil {
		return entries
	}
	for k, e := range m {
		if filepath.IsAbs(k) && minorOf(e.Minor) == e.Minor && (e.Cloudpickle == "" || filepath.IsAbs(e.Cloudpickle)) {
			entries[k] = e
		}
	}
	return entries
}

// saveLocked writes the cache whole, through a temporary file and a
// rename, so that a reader never sees half of it.
func (c *Cache) saveLocked() {
	if c.File == "" {
		return
	}
	b, err := json.Marshal(c.entries)
	if err != nil || len(b) > maxCacheFile {
		return
	}
	atomicfile.WriteFile(c.File, b, 0o600) // a cache: one not written is read anew
}
