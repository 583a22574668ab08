package pyfind

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replhub/replhub/internal/testbound"
)

// A cache file read back keeps only entries as lookup makes them (a real
// path, a minor, an absolute cloudpickle folder or none), keeps each of
// those as it was written, and reads the same once written again.
func FuzzCache(f *testing.F) {
	dir := f.TempDir()
	file := filepath.Join(dir, "pythons.json")
	c := &Cache{File: file, loaded: true, entries: map[string]cacheEntry{
		"/usr/bin/python3.12":               {Stamp: "6240048@1714000000000000000", Minor: "3.12", Cloudpickle: "/usr/lib/python3/dist-packages/cloudpickle"},
		"/home/u/.pyenv/versions/3.9/bin/x": {Stamp: "1@2", Minor: "3.9"},
		"/opt/py":                           {Stamp: "1@2"},
	}}
	c.saveLocked()
	b, err := os.ReadFile(file)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	for _, k := range []int{1, len(b) / 2, len(b) - 1} {
		f.Add(b[:k])
	}
	for _, s := range []string{`{"x":{"minor":"3.10"}}`, `{"/p":{"minor":"3.10; rm -rf /"}}`, `{"/p":{"minor":"3.1","cloudpickle":"../cp"}}`,
		`{"/p":null}`, `null`, `[]`, `{"/p":{"stamp":1}}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got := parseCache(b)
		for k, e := range got {
			if !filepath.IsAbs(k) || minorOf(e.Minor) != e.Minor || (e.Cloudpickle != "" && !filepath.IsAbs(e.Cloudpickle)) {
				t.Fatalf("kept %q: %+v", k, e)
			}
		}
		var all map[string]cacheEntry
		if json.Unmarshal(b, &all) == nil {
			for k, e := range got {
				if all[k] != e {
					t.Fatalf("%q read as %+v, written %+v", k, e, all[k])
				}
			}
		}
		// Through the file, as a new hub reads it.
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}
		c := &Cache{File: file}
		c.mu.Lock()
		c.loadLocked()
		c.saveLocked()
		c.mu.Unlock()
		if len(b) <= maxCacheFile && !reflect.DeepEqual(c.entries, got) {
			t.Fatalf("loaded %+v, parsed %+v", c.entries, got)
		}
		again, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if back := parseCache(again); !reflect.DeepEqual(back, c.entries) {
			t.Fatalf("saved %+v, read back %+v", c.entries, back)
		}
	})
}

// A cache file that is not one the cache wrote is not read: a FIFO would
// block every lookup for ever, a link to /dev/zero fill the memory. The
// interpreter is asked instead.
func TestCacheOddFiles(t *testing.T) {
	dir := t.TempDir()
	py := filepath.Join(dir, "bin", "python3")
	os.MkdirAll(filepath.Dir(py), 0o755)
	os.WriteFile(py, []byte("#!/bin/sh\nprintf '3.10\\n\\n'\n"), 0o755)
	fifo := filepath.Join(dir, "fifo.json")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero.json")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{fifo, zero} {
		var got string
		testbound.Within(t, 10*time.Second, "a lookup with the cache file "+file, func() { got = (&Cache{File: file}).Minor(py) })
		if got != "3.10" {
			t.Fatalf("Minor with the cache file %s = %q", file, got)
		}
	}
}

// A cloudpickle folder the file names by a relative path is not taken:
// it would be found from wherever the hub runs.
func TestCacheRelativeCloudpickle(t *testing.T) {
	dir := t.TempDir()
	py := filepath.Join(dir, "bin", "python3")
	os.MkdirAll(filepath.Dir(py), 0o755)
	os.WriteFile(py, []byte("#!/bin/sh\nprintf '3.10\\n\\n'\n"), 0o755)
	_, stamp := stampOf(py)
	real, _ := filepath.EvalSymlinks(py)
	os.Mkdir(filepath.Join(dir, "cp"), 0o755)
	t.Chdir(dir)
	file := filepath.Join(dir, "pythons.json")
	b, _ := json.Marshal(map[string]cacheEntry{real: {Stamp: stamp, Minor: "3.10", Cloudpickle: "cp"}})
	os.WriteFile(file, b, 0o600)
	if got := (&Cache{File: file}).CloudpickleDir(py); got != "" {
		t.Fatalf("CloudpickleDir = %q, from the file's relative %q", got, "cp")
	}
	if b, _ := os.ReadFile(file); strings.Contains(string(b), `"cp"`) {
		t.Fatalf("the cache was written again with the relative folder: %s", b)
	}
}
