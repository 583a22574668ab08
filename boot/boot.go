// Package boot holds the code that travels to sessions, and nothing else.
//
//   - worker.py is the session loop the hub talks to (DESIGN.md, "Hub ↔
//     worker"). Locally the hub writes it once into its runtime folder, under
//     a name that carries its hash, and starts `python worker.py --stdio`.
//   - finder.sh runs under `exec /bin/sh -s` on a remote host: it finds a
//     Python and execs it on stub.py.
//   - stub.py is the `python -c` program: it reads the payload (boot.py and
//     a module table, zlib-compressed) byte-exact from stdin and runs it.
//   - boot.py serves the payload's modules from memory and runs the worker.
//   - replhub_toolkit/ is the package the worker loads, one module per job:
//     relay (session(), put/get/call, transfers), swap (a namespace to a
//     swap and back), query (vars, inspect, complete, reset), and the
//     helpers every session starts with: files, shell, memory, display.
//     Each has its tests; the Python unit tests in replhub_toolkit/tests
//     run under every Python found (toolkit_test.go).
//   - modules/NAME.py are the shipped modules, `from replhub import NAME`
//     in a session: not preloaded, sent by the hub at their import (see
//     package modules). Every file there is one; their tests (modules/tests)
//     do not travel.
//
// The Python must run on 3.6 through 3.13 with the standard library only.
package boot

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"sync"

	"github.com/replhub/replhub/internal/atomicfile"
)

// Worker is the source of worker.py.
//
//go:embed worker.py
var Worker []byte

// toolkitFS holds the package replhub_toolkit (see the package doc). Its
// tests/ folder does not travel.
//
//go:embed replhub_toolkit/*.py
var toolkitFS embed.FS

// ToolkitModule is one module of the toolkit package: its dotted name, its
// file name in the package folder, and its source.
type ToolkitModule struct {
	Name, File string
	Src        []byte
	Pkg        bool
}

// ToolkitPackage lists the package's modules, __init__ (the package) first.
func ToolkitPackage() []ToolkitModule {
	ents, _ := fs.ReadDir(toolkitFS, "replhub_toolkit")
	var mods []ToolkitModule
	for _, e := range ents {
		b, _ := toolkitFS.ReadFile(path.Join("replhub_toolkit", e.Name()))
		base := e.Name()[:len(e.Name())-len(".py")]
		m := ToolkitModule{Name: "replhub_toolkit." + base, File: e.Name(), Src: b}
		if base == "__init__" {
			m.Name, m.Pkg = "replhub_toolkit", true
		}
		mods = append(mods, m)
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Pkg || (!mods[j].Pkg && mods[i].Name < mods[j].Name) })
	return mods
}

// shippedFS holds the shipped modules (see the package doc).
//
//go:embed modules/*.py
var shippedFS embed.FS

// Shipped returns the shipped modules' sources by name (NAME.py is NAME),
// read once; callers must not change the map or its slices.
var Shipped = sync.OnceValue(func() map[string][]byte {
	ents, _ := fs.ReadDir(shippedFS, "modules")
	mods := make(map[string][]byte, len(ents))
	for _, e := range ents {
		b, _ := shippedFS.ReadFile(path.Join("modules", e.Name()))
		mods[e.Name()[:len(e.Name())-len(".py")]] = b
	}
	return mods
})

// Boot is the source of boot.py.
//
//go:embed boot.py
var Boot []byte

// Stub is the source of the `python -c` stub; it holds no single quote, so
// the finder script can quote it.
//
//go:embed stub.py
var Stub string

// Finder is the remote finder script, with @…@ fields to fill.
//
//go:embed finder.sh
var Finder string

// Hash is a short hex digest of the boot sources; it names installed copies
// so that a rebuilt binary never runs a stale worker. It is computed at its
// first use, not at init: a CLI call that installs nothing need not hash.
var Hash = sync.OnceValue(func() string {
	h := sha256.New()
	for _, b := range [][]byte{Worker, Boot, []byte(Stub + Finder)} {
		h.Write(b)
	}
	for _, m := range ToolkitPackage() {
		h.Write([]byte(m.File))
		h.Write(m.Src)
	}
	return hex.EncodeToString(h.Sum(nil)[:6])
})

// Install writes worker.py and the replhub_toolkit package into
// dir/boot-HASH/ unless they are already there, and returns the worker's
// path. The folders are 0700 and the files
// 0600.
func Install(dir string) (string, error) {
	d := filepath.Join(dir, "boot-"+Hash())
	if err := os.MkdirAll(filepath.Join(d, "replhub_toolkit"), 0o700); err != nil {
		return "", fmt.Errorf("boot: %w", err)
	}
	for _, m := range ToolkitPackage() {
		if err := installFile(filepath.Join(d, "replhub_toolkit", m.File), m.Src); err != nil {
			return "", err
		}
	}
	p := filepath.Join(d, "worker.py")
	return p, installFile(p, Worker)
}

func installFile(p string, content []byte) error {
	// Read back no further than the file should be, and only a file: a
	// FIFO or a device left there would hang the hub or fill its memory.
	if b, err := atomicfile.ReadFile(p, int64(len(content))); err == nil && string(b) == string(content) {
		return nil
	}
	if err := atomicfile.WriteFile(p, content, 0o600); err != nil {
		return fmt.Errorf("boot: %w", err)
	}
	return nil
}
