// Package config owns where replhub keeps things (the XDG folders of
// DESIGN.md, "Files on disk") and the user's config.json.
//
// It does not create folders with security meaning (the socket folder is
// checked and made by safesock) nor read ssh configuration.
package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/replhub/replhub/internal/lean"
)

// Paths are the folders replhub uses. A zero Paths is not usable; call
// FromEnv.
type Paths struct {
	// Runtime holds the hub's socket, its log and pid file, and the
	// installed boot files: $XDG_RUNTIME_DIR/replhub, or /tmp/replhub-UID.
	Runtime string
	// State holds transcripts, death notes, live records and swap, per host name:
	// $XDG_STATE_HOME/replhub/HOST (default ~/.local/state).
	State string
	// Config holds config.json and user modules: $XDG_CONFIG_HOME/replhub
	// (default ~/.config).
	Config string
	// RuntimeFromXDG reports whether Runtime came from $XDG_RUNTIME_DIR;
	// the /tmp fallback must already be ours to be used.
	RuntimeFromXDG bool
}

// FromEnv computes Paths from an environment lookup (os.Getenv in the CLI,
// the caller's environment in tests).
func FromEnv(getenv func(string) string) (Paths, error) {
	var p Paths
	home := getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return p, fmt.Errorf("config: no home folder: %w", err)
		}
		home = h
	}
	p.Runtime, p.RuntimeFromXDG = lean.RuntimeDir(getenv)
	state := getenv("XDG_STATE_HOME")
	if state == "" {
		state = filepath.Join(home, ".local", "state")
	}
	p.State = filepath.Join(state, "replhub", Hostname())
	cfg := getenv("XDG_CONFIG_HOME")
	if cfg == "" {
		cfg = filepath.Join(home, ".config")
	}
	p.Config = filepath.Join(cfg, "replhub")
	return p, nil
}

// Getenv looks key up in an environment given as KEY=VALUE strings (a
// caller's, sent with a request); the last setting wins, as in exec.
func Getenv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

// Socket is the hub's socket path.
func (p Paths) Socket() string { return filepath.Join(p.Runtime, lean.SocketName) }

// Log is the hub's log file.
func (p Paths) Log() string { return filepath.Join(p.Runtime, "hub.log") }

// PidFile holds the hub's pid while it runs.
func (p Paths) PidFile() string { return filepath.Join(p.Runtime, "hub.pid") }

// Modules is the folder of the user's modules: each NAME.py there is
// replhub.NAME in every session, sent by the hub at its import (package
// modules), so that functions in it travel by reference.
func (p Paths) Modules() string { return filepath.Join(p.Config, "modules") }

// Transcript is the file every cell of session name is appended to.
func (p Paths) Transcript(name string) string { return filepath.Join(p.State, name+".py") }

// WorkerDir holds the sockets of durable local workers, one per session,
// on which a new hub adopts them.
func (p Paths) WorkerDir() string { return filepath.Join(p.Runtime, "w") }

// DeadDir holds death notes.
func (p Paths) DeadDir() string { return filepath.Join(p.State, "dead") }

// LiveDir holds a record of each running session, so that a hub that
// finds one left over knows the session was lost with its predecessor.
func (p Paths) LiveDir() string { return filepath.Join(p.State, "live") }

// SwapDir holds swapped sessions: NAME.pickle and NAME.json, 0600, in a
// folder of mode 0700.
func (p Paths) SwapDir() string { return filepath.Join(p.State, "swap") }

// DisplayDir holds the images that cells showed, as the CLI wrote them.
func (p Paths) DisplayDir() string { return filepath.Join(p.State, "display") }

// PythonCache holds what interpreters said of themselves when asked (their
// version, where their cloudpickle is), keyed by path, size and mtime.
func (p Paths) PythonCache() string { return filepath.Join(p.State, "pythons.json") }

// Hostname is this machine's host name, made safe for a path component, so
// that a shared home keeps each machine's state apart.
func Hostname() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		return "localhost"
	}
	return safeName(h)
}

// safeName is s with each character other than A-Z, a-z, 0-9, '.', '_'
// and '-' (each byte of invalid UTF-8 too) replaced by '_'. Every CLI call
// runs it: a loop, not a regexp compiled for one use.
func safeName(s string) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

// BytecodeKey holds the key that the bytecode caches on hosts are made
// under (see package payload).
func (p Paths) BytecodeKey() string { return filepath.Join(p.State, "bytecode.key") }
