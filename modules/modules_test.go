package modules

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/boot"
)

func TestShippedNamesAreModuleNames(t *testing.T) {
	require.NotEmpty(t, boot.Shipped())
	for name, src := range boot.Shipped() {
		assert.True(t, ValidName(name), name)
		assert.True(t, utf8.Valid(src), name)
		assert.NotEmpty(t, Doc(string(src)), "%s has a docstring for modules()", name)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, b []byte) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), b, 0o600))
	}
	write("mine.py", []byte("\ufeff\"\"\"Mine.\"\"\"\nX = 1\n"))
	write("systemd.py", []byte("X = 'shadow'\n"))
	write("latin.py", []byte("s = '\xe9t\xe9'\n"))
	write("nul.py", []byte("x = 1\x00\n"))
	big, err := os.Create(filepath.Join(dir, "big.py"))
	require.NoError(t, err)
	require.NoError(t, big.Truncate(MaxSize+1))
	big.Close()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo.py"), 0o600))
	require.NoError(t, os.Mkdir(filepath.Join(dir, "folder.py"), 0o700))

	m, err := Load(dir, "replhub.mine")
	require.NoError(t, err)
	assert.Equal(t, Module{Name: "mine", Src: "\"\"\"Mine.\"\"\"\nX = 1\n", File: filepath.Join(dir, "mine.py"), User: true}, m, "the BOM is dropped")
	m, err = Load(dir, "replhub.systemd")
	require.NoError(t, err)
	assert.True(t, m.User, "the user's file shadows the shipped one")
	m, err = Load("", "replhub.systemd")
	require.NoError(t, err)
	assert.False(t, m.User)
	assert.Equal(t, "<replhub>/modules/systemd.py", m.File)

	for _, c := range []struct{ name, want string }{
		{"replhub.latin", "is not UTF-8 (byte 5): save it as UTF-8"},
		{"replhub.nul", "holds a NUL byte (byte 5)"},
		{"replhub.big", "is 4.0 MiB, over the 4 MiB a module may be"},
		{"replhub.fifo", "fifo.py is not a regular file"},
		{"replhub.folder", "folder.py is not a regular file"},
		{"replhub.nosuch", "No module named 'replhub.nosuch': modules() lists them; write " + filepath.Join(dir, "nosuch.py")},
		{"replhub.../etc/passwd", `"replhub.../etc/passwd": not a module name`},
		{"replhub.a.b", "not a module name"},
		{"replhub.", "not a module name"},
		{"replhub.9x", "not a module name"},
		{"os", "not a module name"},
		{"replhub." + strings.Repeat("x", 101), "not a module name"},
		{"replhub.caf\u00e9", "not a module name"},
	} {
		_, err := Load(dir, c.name)
		require.Error(t, err, c.name)
		assert.Contains(t, err.Error(), c.want, c.name)
		assert.NotContains(t, err.Error(), "\n")
		assert.Equal(t, strings.HasPrefix(c.want, "No module"), IsNotFound(err), c.name)
	}
}

func TestList(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "cad.py"), []byte("# cad\n'''\n  Drawings.\n'''\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "systemd.py"), []byte("x = 1\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "_private.py"), nil, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad-name.py"), nil, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "latin.py"), []byte("\xff"), 0o600))
	// A listing reads the head of a big file; a rune its cut splits is no
	// error.
	doc := `"""Long."""` + "\n#"
	head := doc + strings.Repeat("x", listPeek-len(doc)-1) + "é\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "long.py"), []byte(head+strings.Repeat("y", 2*listPeek)), 0o600))
	got := map[string]Info{}
	for _, in := range List(dir) {
		got[in.Name] = in
	}
	assert.Equal(t, Info{Name: "cad", Doc: "Drawings.", User: true}, got["cad"])
	assert.Equal(t, Info{Name: "systemd", User: true, Shadows: true}, got["systemd"])
	assert.Contains(t, got["latin"].Error, "not UTF-8")
	assert.Equal(t, Info{Name: "long", Doc: "Long.", User: true}, got["long"])
	assert.NotContains(t, got, "_private")
	assert.NotContains(t, got, "bad-name")
	for name := range boot.Shipped() {
		if name != "systemd" {
			assert.False(t, got[name].User, name)
		}
	}
	listed := 0
	for name := range boot.Shipped() {
		if !strings.HasPrefix(name, "_") {
			listed++
		}
	}
	assert.Len(t, List(""), listed, "a shipped helper module (_NAME) is not listed")
}

func TestDoc(t *testing.T) {
	for src, want := range map[string]string{
		`"""One line."""`: "One line.",
		"#!/usr/bin/env python\n# x\n\n'''\n\n  First.\nSecond.'''": "First.",
		`r"raw\d"`:                           `raw\d`,
		`b"bytes"`:                           "",
		`f"fmt"`:                             "",
		"x = 1\n\"\"\"late\"\"\"":            "",
		`"unclosed`:                          "unclosed",
		"":                                   "",
		"# only a comment":                   "",
		"\"tab\there\"":                      "tabhere",
		`"` + strings.Repeat("é", 150) + `"`: strings.Repeat("é", 100) + "...",
	} {
		assert.Equal(t, want, Doc(src), "%q", src)
	}
}

func FuzzDoc(f *testing.F) {
	for _, s := range []string{`"""x"""`, "# c\n'y'", "ru'''\n\nz'''", "\ufeff\"a\"", "\x00\"", `"\xff"`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		d := Doc(src)
		if strings.ContainsAny(d, "\n\r\x00") {
			t.Fatalf("Doc(%q) = %q holds a control character", src, d)
		}
		if utf8.RuneCountInString(d) > maxDoc+3 {
			t.Fatalf("Doc(%q) is %d runes", src, utf8.RuneCountInString(d))
		}
		if utf8.ValidString(src) && !utf8.ValidString(d) {
			t.Fatalf("Doc(%q) = %q is not UTF-8", src, d)
		}
	})
}

// Whatever a session asks for, the hub reads only a NAME.py right in the
// modules folder, or a shipped module.
func FuzzLoad(f *testing.F) {
	dir := f.TempDir()
	os.WriteFile(filepath.Join(dir, "ok.py"), []byte("x = 1\n"), 0o600)
	for _, s := range []string{"replhub.ok", "replhub.systemd", "replhub.../ok", "replhub./etc/passwd", "replhub.ok\x00", "replhub.ok.py"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		m, err := Load(dir, name)
		if err != nil {
			if strings.Contains(err.Error(), "\n") && ValidName(strings.TrimPrefix(name, Prefix)) {
				t.Fatalf("Load(%q): a multi-line error: %v", name, err)
			}
			return
		}
		if m.User && filepath.Dir(m.File) != dir {
			t.Fatalf("Load(%q) read %s", name, m.File)
		}
		if !m.User && boot.Shipped()[m.Name] == nil {
			t.Fatalf("Load(%q) served %q", name, m.Name)
		}
	})
}

func TestText(t *testing.T) {
	got := Text([]Info{
		{Name: "cad", Doc: "Drawings.", User: true},
		{Name: "systemd", Doc: "Units.", User: true, Shadows: true},
		{Name: "bad", User: true, Error: "replhub.bad: it is not UTF-8"},
		{Name: "git", Doc: "Repositories."},
	}, "/m")
	assert.Equal(t, `from replhub import NAME  (yours: /m/NAME.py)
  cad      yours    Drawings.
  systemd  yours    Units. (shadows the shipped one)
  bad      yours    cannot be imported: replhub.bad: it is not UTF-8
  git      shipped  Repositories.`, got)
	assert.Equal(t, "from replhub import NAME  (yours: /m/NAME.py)\n  (none)", Text(nil, "/m"))
}
