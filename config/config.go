package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gobwas/glob"

	"github.com/replhub/replhub/internal/atomicfile"
)

// File is config.json. Every field is optional; the zero File is the
// embedded defaults.
//
//	{
//	  "pythons": ["python3.11"],
//	  "hosts": {
//	    "lab-*":  {"jump": ["gw1"], "pythons": ["/opt/py*/bin/python3"], "reach": ["lab-*"]},
//	    "lab-7":  {"jump": []}
//	  }
//	}
//
// Host patterns are globs (github.com/gobwas/glob) matched against the host
// as the user gave it; every matching pattern applies, in file order, so a
// later key wins.
type File struct {
	// Pythons are tried, after a request's own, before the built-in list
	// (python3.14 … python3.6, python3, python) when a remote session starts.
	Pythons []string `json:"pythons,omitempty"`
	// Sudo is the default sudo mode: auto, nopasswd or askpass.
	Sudo string `json:"sudo,omitempty"`
	// SudoTimeout bounds, in seconds, a root start where sudo says nothing
	// recognisable; zero means 40.
	SudoTimeout float64 `json:"sudo_timeout,omitempty"`
	// MaxObjectMB bounds, in MiB, one pickled object (a put, a get's or a
	// call's value) that a session sends through the hub; zero means 1024.
	// A session that sends a bigger one is ended: the hub would have to
	// hold it whole.
	MaxObjectMB int64 `json:"max_object_mb,omitempty"`
	// MaxHostOpens bounds the live sessions that the sessions on one
	// host may have opened through session("NAME"); zero means 64.
	MaxHostOpens int `json:"max_host_opens,omitempty"`
	// Linger: see linger.go. Also settable per host.
	Linger *float64 `json:"linger,omitempty"`
	// SwapAfterHours and SwapKeepDays: see swap.go.
	SwapAfterHours *float64 `json:"swap_after_hours,omitempty"`
	SwapKeepDays   *float64 `json:"swap_keep_days,omitempty"`
	// Groups and Fanout: see groups.go.
	Groups map[string][]string `json:"groups,omitempty"`
	Fanout int                 `json:"fanout,omitempty"`
	// Hosts are per-host settings by pattern, in file order.
	Hosts []HostRule `json:"-"`
}

// HostRule is one entry of "hosts".
type HostRule struct {
	Pattern string
	Settings
	match glob.Glob
	reach []glob.Glob // Reach, compiled
}

// Settings for a host. A nil Jump is unset; an empty one turns a jump that an
// earlier rule (or ssh_config's ProxyJump) set off.
type Settings struct {
	Jump    *[]string `json:"jump,omitempty"`
	Pythons []string  `json:"pythons,omitempty"`
	Sudo    string    `json:"sudo,omitempty"`
	// Linger: see linger.go; nil is unset.
	Linger *float64 `json:"linger,omitempty"`
	// Reach are host patterns (globs, as for "hosts"; Local names this
	// machine) whose sessions a session on this host may act on, besides
	// those of its own host. Nil is unset: a session reaches its own host
	// only. Only a rule under "hosts" may set it; see MayReach.
	Reach []string `json:"reach,omitempty"`
}

// Local is the name of this machine: the host of a local session, and the
// pattern in "reach" that lets a remote session act on local ones.
const Local = "local"

// ConfigFile is config.json's path.
func (p Paths) ConfigFile() string { return filepath.Join(p.Config, "config.json") }

// MaxFile is the largest config.json read; a real one is a few KiB.
const MaxFile = 4 << 20

// Load reads config.json; a missing file is the zero File. It is read at
// every session start, so edits need no restart. A FIFO or device in its
// place, or a file past MaxFile, is an error, not a hang.
func Load(path string) (*File, error) {
	b, err := atomicfile.ReadUserFile(path, MaxFile)
	if errors.Is(err, os.ErrNotExist) {
		return &File{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return Parse(b, path)
}

// Parse decodes config.json's bytes; name is used in errors. Unknown keys
// are errors, so that a typo does not silently do nothing.
func Parse(b []byte, name string) (*File, error) {
	// File's own tags name the top-level keys; "hosts" keeps its order,
	// so it is read apart (parseHosts).
	var top struct {
		File
		Hosts json.RawMessage `json:"hosts"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("config: %s: %w", name, err)
	}
	f := &top.File
	if err := f.checkGroups(name); err != nil {
		return nil, err
	}
	if err := f.checkSwap(name); err != nil {
		return nil, err
	}
	if err := checkLinger(f.Linger, name, "linger"); err != nil {
		return nil, err
	}
	if f.SudoTimeout < 0 {
		return nil, fmt.Errorf("config: %s: sudo_timeout must be a number of seconds", name)
	}
	if f.MaxObjectMB < 0 || f.MaxObjectMB > 1<<20 {
		return nil, fmt.Errorf("config: %s: max_object_mb must be a number of MiB from 1 to %d", name, 1<<20)
	}
	if f.MaxHostOpens < 0 || f.MaxHostOpens > 100000 {
		return nil, fmt.Errorf("config: %s: max_host_opens must be a number of sessions from 1 to 100000", name)
	}
	if err := checkSudo(f.Sudo, name, "sudo"); err != nil {
		return nil, err
	}
	if len(top.Hosts) > 0 && string(top.Hosts) != "null" {
		rules, err := parseHosts(top.Hosts, name)
		if err != nil {
			return nil, err
		}
		f.Hosts = rules
	}
	return f, nil
}

// parseHosts decodes the "hosts" object keeping its keys' order.
func parseHosts(b []byte, name string) ([]HostRule, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("config: %s: \"hosts\" must be an object of pattern: settings", name)
	}
	var rules []HostRule
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("config: %s: hosts: %w", name, err)
		}
		pattern := tok.(string)
		var s Settings
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, fmt.Errorf("config: %s: hosts[%q]: %w", name, pattern, err)
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&s); err != nil {
			return nil, fmt.Errorf("config: %s: hosts[%q]: %w", name, pattern, err)
		}
		g, err := glob.Compile(pattern)
		if err != nil {
			return nil, fmt.Errorf("config: %s: hosts[%q]: bad pattern: %w", name, pattern, err)
		}
		if err := checkSudo(s.Sudo, name, fmt.Sprintf("hosts[%q].sudo", pattern)); err != nil {
			return nil, err
		}
		if err := checkLinger(s.Linger, name, fmt.Sprintf("hosts[%q].linger", pattern)); err != nil {
			return nil, err
		}
		var reach []glob.Glob
		for _, rp := range s.Reach {
			rg, err := glob.Compile(rp)
			if err != nil {
				return nil, fmt.Errorf("config: %s: hosts[%q].reach: bad pattern %q: %w", name, pattern, rp, err)
			}
			reach = append(reach, rg)
		}
		rules = append(rules, HostRule{Pattern: pattern, Settings: s, match: g, reach: reach})
	}
	return rules, nil
}

func checkSudo(mode, name, field string) error {
	switch mode {
	case "", "auto", "nopasswd", "askpass":
		return nil
	}
	return fmt.Errorf("config: %s: %s is %q: use auto, nopasswd or askpass", name, field, mode)
}

// HostOpens is MaxHostOpens, 64 when unset.
func (f *File) HostOpens() int {
	if f.MaxHostOpens == 0 {
		return 64
	}
	return f.MaxHostOpens
}

// MaxObject is MaxObjectMB in bytes; zero when unset.
func (f *File) MaxObject() int64 { return f.MaxObjectMB << 20 }

// Top is the top-level settings alone: those of local sessions.
func (f *File) Top() Settings {
	return Settings{Pythons: f.Pythons, Sudo: f.Sudo, Linger: f.Linger}
}

// For merges the settings of every rule whose pattern matches host, in file
// order, over the top-level ones.
func (f *File) For(host string) Settings {
	s := Settings{Pythons: f.Pythons, Sudo: f.Sudo, Linger: f.Linger}
	for _, r := range f.Hosts {
		if !r.match.Match(host) {
			continue
		}
		if r.Jump != nil {
			s.Jump = r.Jump
		}
		if r.Pythons != nil {
			s.Pythons = r.Pythons
		}
		if r.Sudo != "" {
			s.Sudo = r.Sudo
		}
		if r.Linger != nil {
			s.Linger = r.Linger
		}
		if r.Reach != nil {
			s.Reach = r.Reach
		}
	}
	return s
}

// MayReach reports whether a session on host from may act on (open, put,
// get, call, push, pull, kill …) a session on host to; both are hosts as
// the user gave them, or Local. A local session reaches everything, and a
// session reaches its own host (its root twin there included). Beyond
// that, the last rule matching from that sets "reach" decides, as for
// every other key: to must match one of its patterns; "*" matches every
// host and this machine. rule is that rule's pattern, or "" when no rule
// sets "reach" for from, so that a refusal can say which key to change.
func (f *File) MayReach(from, to string) (ok bool, rule string) {
	if from == Local || from == to {
		return true, ""
	}
	var decide *HostRule
	for i := range f.Hosts {
		if r := &f.Hosts[i]; r.Reach != nil && r.match.Match(from) {
			decide = r
		}
	}
	if decide == nil {
		return false, ""
	}
	for _, g := range decide.reach {
		if g.Match(to) {
			return true, decide.Pattern
		}
	}
	return false, decide.Pattern
}
