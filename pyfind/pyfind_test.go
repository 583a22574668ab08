package pyfind

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/replhub/replhub/tests/pyenvtest"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestResolvePyenv(t *testing.T) {
	dir := t.TempDir()
	// The links need only exist: nothing here runs them.
	tr := pyenvtest.New(t, dir, map[string]string{"3.11.9": "/bin/sh", "3.12.1": "/bin/sh", "3.12.10": "/bin/sh", "3.13.0rc1": "/bin/sh"}, "3.11.9")
	sysdir := filepath.Join(dir, "sys")
	os.Mkdir(sysdir, 0o755)
	os.Symlink("/bin/sh", filepath.Join(sysdir, "python3"))
	shim := filepath.Join(tr.Shims, "python3")
	path := tr.Shims + ":" + sysdir
	proj := filepath.Join(dir, "proj", "sub")
	os.MkdirAll(proj, 0o755)
	v := func(name string) string { return filepath.Join(tr.Root, "versions", name, "bin", "python3") }
	for _, c := range []struct {
		name    string
		env     map[string]string
		cwd     string
		project string // .python-version in dir/proj
		want    string
		ok      bool
	}{
		{"the global", nil, dir, "", v("3.11.9"), true},
		{"PYENV_VERSION first", map[string]string{"PYENV_VERSION": "3.12.1"}, proj, "3.11.9", v("3.12.1"), true},
		{"a project's file wins over the global", nil, proj, "3.12.1\n", v("3.12.1"), true},
		{"a prefix is the newest installed", nil, proj, "3.12", v("3.12.10"), true},
		{"python- prefix and comments", nil, proj, "# pinned\npython-3.11.9", v("3.11.9"), true},
		{"a pre-release is no prefix match", nil, proj, "3.13", "", false},
		{"the first installed of several", nil, proj, "3.10.1\n3.12.1", v("3.12.1"), true},
		{"system is the next on PATH", map[string]string{"PYENV_VERSION": "system"}, dir, "", filepath.Join(sysdir, "python3"), true},
		{"no way out of versions", map[string]string{"PYENV_VERSION": "../../sys"}, dir, "", "", false},
		{"not installed", map[string]string{"PYENV_VERSION": "3.9.1"}, dir, "", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(filepath.Join(dir, "proj", ".python-version"))
			if c.project != "" {
				os.WriteFile(filepath.Join(dir, "proj", ".python-version"), []byte(c.project), 0o644)
			}
			env := map[string]string{"PATH": path}
			for k, val := range c.env {
				env[k] = val
			}
			got, ok := Resolve(shim, envOf(env), c.cwd)
			if ok != c.ok || (ok && got.Path != c.want) {
				t.Fatalf("Resolve = %+v, %v; want %s, %v", got, ok, c.want, c.ok)
			}
			if !ok && got.Path != shim {
				t.Fatalf("an unresolved shim is run as it is, got %s", got.Path)
			}
			if ok && strings.HasPrefix(got.Path, tr.Root) && !strings.HasPrefix(got.Env[0], "PATH="+filepath.Dir(c.want)+":") {
				t.Fatalf("pyenv puts the version's bin first on PATH: %q", got.Env)
			}
		})
	}
	os.WriteFile(filepath.Join(dir, "proj", ".python-version"), []byte("3.12\n"), 0o644)
	if c, _ := Resolve(shim, envOf(map[string]string{"PATH": path}), proj); c.Env[1] != "PYENV_VERSION=3.12.10" {
		t.Fatalf("pyenv exec exports the names as resolved: %q", c.Env)
	}
	if runs := tr.Runs(); runs != "" {
		t.Fatalf("a shim ran: %s", runs)
	}
	if c, ok := Resolve("/usr/bin/python3", envOf(nil), dir); !ok || c.Path != "/usr/bin/python3" {
		t.Fatalf("a real path is its own choice: %+v", c)
	}
}

func TestResolveAsdf(t *testing.T) {
	dir := t.TempDir()
	root := filepath.Join(dir, ".asdf")
	bin := filepath.Join(root, "installs", "python", "3.12.2", "bin")
	os.MkdirAll(bin, 0o755)
	os.MkdirAll(filepath.Join(root, "shims"), 0o755)
	os.Symlink("/bin/sh", filepath.Join(bin, "python3"))
	shim := filepath.Join(root, "shims", "python3")
	os.WriteFile(shim, []byte("#!/usr/bin/env bash\nexec asdf exec python3 \"$@\"\n"), 0o755)
	os.WriteFile(filepath.Join(dir, ".tool-versions"), []byte("nodejs 20.1.0\npython 3.9.0 3.12.2\n"), 0o644)
	got, ok := Resolve(shim, envOf(map[string]string{"HOME": dir}), "/")
	if !ok || got.Path != filepath.Join(bin, "python3") {
		t.Fatalf("asdf: %+v %v", got, ok)
	}
	if MinorFromPath(got.Path) != "3.12" {
		t.Fatalf("minor of %s: %q", got.Path, MinorFromPath(got.Path))
	}
}

func TestMinorFromPath(t *testing.T) {
	for p, want := range map[string]string{
		"/usr/bin/python3.11":                                      "3.11",
		"/x/.pyenv/versions/3.9.18/bin/python3":                    "3.9",
		"/x/.asdf/installs/python/3.12.2/bin/python":               "3.12",
		"/x/uv/python/cpython-3.13.0-linux-x86_64-gnu/bin/python3": "3.13",
		"/x/.rye/py/cpython@3.10.4/install/bin/python3":            "3.10",
		"/opt/homebrew/opt/python@3.12/libexec/bin/python3":        "3.12",
		"/nonexistent/bin/python3":                                 "",
		"/x/versions/pypy3.10-7.3.12/bin/python3":                  "",
		"/x/versions/miniconda3-latest/bin/python3":                "",
		"/x/python3.1234":                                          "",
		"/x/versions/3.x/bin/python3":                              "",
	} {
		if got := MinorFromPath(p); got != want {
			t.Errorf("MinorFromPath(%s) = %q, want %q", p, got, want)
		}
	}
}

// An interpreter whose path tells nothing is asked once, and its answer
// is kept across caches (a new hub) until it changes.
func TestCacheAsksOnce(t *testing.T) {
	dir := t.TempDir()
	py := filepath.Join(dir, "bin", "python3")
	os.MkdirAll(filepath.Dir(py), 0o755)
	cp := filepath.Join(dir, "cloudpickle")
	os.Mkdir(cp, 0o755)
	runs := filepath.Join(dir, "runs")
	os.WriteFile(py, []byte("#!/bin/sh\necho run >> "+runs+"\nprintf '3.10\\n"+cp+"\\n'\n"), 0o755)
	file := filepath.Join(dir, "pythons.json")
	for i := 0; i < 3; i++ {
		c := &Cache{File: file}
		if got := c.Minor(py); got != "3.10" {
			t.Fatalf("Minor = %q", got)
		}
		if got := c.CloudpickleDir(py); got != cp {
			t.Fatalf("CloudpickleDir = %q", got)
		}
	}
	if b, _ := os.ReadFile(runs); string(b) != "run\n" {
		t.Fatalf("asked %d times, want once", strings.Count(string(b), "run"))
	}
	// A changed interpreter is asked again.
	later := time.Now().Add(time.Hour)
	os.Chtimes(py, later, later)
	(&Cache{File: file}).Minor(py)
	if b, _ := os.ReadFile(runs); strings.Count(string(b), "run") != 2 {
		t.Fatalf("a changed interpreter was not asked again: %q", b)
	}
	// A cache file that is not ours is ignored, not trusted.
	os.WriteFile(file, []byte(`{"`+py+`":{"stamp":"x","minor":"3.10; rm -rf /"}}`), 0o600)
	if got := (&Cache{File: file}).Minor(py); got != "3.10" {
		t.Fatalf("Minor after a bad cache = %q", got)
	}
}

func FuzzVersionNames(f *testing.F) {
	for _, s := range []string{"3.11.9", "3.12", "python-3.12", "../x", "3.13t", "3.12.0rc1", "system", "a/b", "3.1.2.3-dev"} {
		f.Add(s)
	}
	versions := f.TempDir()
	for _, v := range []string{"3.11.9", "3.12.1", "3.12.10", "3.13.0t"} {
		os.MkdirAll(filepath.Join(versions, v), 0o755)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if v := latest(versions, s); v != "" {
			if !strings.HasPrefix(filepath.Join(versions, v), versions+"/") || !isDir(filepath.Join(versions, v)) {
				t.Fatalf("latest(%q) = %q, outside versions", s, v)
			}
		}
		if m := minorOf(s); m != "" && !strings.HasPrefix(s, m) {
			t.Fatalf("minorOf(%q) = %q", s, m)
		}
		p := filepath.Join(versions, "f")
		os.WriteFile(p, []byte(s), 0o644)
		for _, n := range readVersionFile(p, true) {
			if !safeName(n) || strings.ContainsAny(n, " \t\n") {
				t.Fatalf("readVersionFile gave %q", n)
			}
		}
	})
}

// A version file or a shim that a FIFO took the place of (between the
// look that found a file there and the read), or a link to one, is not
// read: the open would wait for a writer for good, and with it the start
// of the session that asked. Anyone may put /tmp/.python-version there.
func TestVersionFileThatIsAFIFO(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, ".python-version")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	link := filepath.Join(dir, "version")
	os.Symlink(fifo, link)
	done := make(chan []string, 1)
	go func() {
		var got []string
		for _, p := range []string{fifo, link} {
			got = append(got, readVersionFile(p, true)...)
			got = append(got, shimRoot(p))
		}
		done <- got
	}()
	select {
	case got := <-done:
		if strings.Join(got, "") != "" {
			t.Errorf("read %q from a FIFO", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("reading a version file that is a FIFO did not return")
	}
}
