package config

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/internal/testbound"
)

func TestConfigHostsInFileOrder(t *testing.T) {
	f, err := Parse([]byte(`{
		"pythons": ["python3.11"],
		"hosts": {
			"lab-*": {"jump": ["gw1"], "pythons": ["/opt/py/bin/python3"]},
			"lab-7": {"jump": []},
			"*.example.com": {"sudo": "askpass"}
		}
	}`), "config.json")
	require.NoError(t, err)

	s := f.For("lab-3")
	require.NotNil(t, s.Jump)
	assert.Equal(t, []string{"gw1"}, *s.Jump)
	assert.Equal(t, []string{"/opt/py/bin/python3"}, s.Pythons)

	s = f.For("lab-7")
	require.NotNil(t, s.Jump)
	assert.Empty(t, *s.Jump, "jump: [] turns an earlier jump off")

	s = f.For("db.example.com")
	assert.Nil(t, s.Jump)
	assert.Equal(t, []string{"python3.11"}, s.Pythons)
	assert.Equal(t, "askpass", s.Sudo)
}

func TestConfigErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{"pyhtons": []}`:                     `unknown field "pyhtons"`,
		`{"sudo": "always"}`:                  `use auto, nopasswd or askpass`,
		`{"hosts": []}`:                       `"hosts" must be an object`,
		`{"hosts": {"a": {"jumps": ["x"]}}}`:  `unknown field "jumps"`,
		`{"hosts": {"[": {}}}`:                `bad pattern`,
		`{"hosts": {"a": {"sudo": "maybe"}}}`: `hosts["a"].sudo`,
		`{"max_host_opens": -1}`:              `max_host_opens must be a number of sessions from 1 to 100000`,
	} {
		_, err := Parse([]byte(in), "config.json")
		assert.ErrorContains(t, err, want, in)
	}
}

func TestLoadMissingIsDefaults(t *testing.T) {
	f, err := Load(filepath.Join(t.TempDir(), "none.json"))
	require.NoError(t, err)
	assert.Empty(t, f.For("x").Pythons)
	p := filepath.Join(t.TempDir(), "c.json")
	require.NoError(t, os.WriteFile(p, []byte(`{"sudo":"nopasswd"}`), 0o600))
	f, err = Load(p)
	require.NoError(t, err)
	assert.Equal(t, "nopasswd", f.For("x").Sudo)
	assert.Equal(t, 64, f.HostOpens(), "the default")
}

// config.json is read at every session start: one kept in a dotfiles
// folder and linked is read; a FIFO in its place is an error at once, not
// a hub that hangs; nor is a file of many megabytes read.
func TestLoadUserFile(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "dotfiles.json")
	require.NoError(t, os.WriteFile(real, []byte(`{"sudo":"nopasswd"}`), 0o600))
	link := filepath.Join(dir, "config.json")
	require.NoError(t, os.Symlink(real, link))
	f, err := Load(link)
	require.NoError(t, err)
	assert.Equal(t, "nopasswd", f.For("x").Sudo)

	big := filepath.Join(dir, "big.json")
	require.NoError(t, os.WriteFile(big, []byte(`{"hosts":{}}`+strings.Repeat(" ", MaxFile)), 0o600))
	_, err = Load(big)
	assert.ErrorContains(t, err, "more than")

	fifo := filepath.Join(dir, "fifo.json")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	testbound.Within(t, 10*time.Second, "Load of a FIFO", func() {
		_, err := Load(fifo)
		assert.ErrorContains(t, err, "not a regular file")
	})
}

func TestMayReach(t *testing.T) {
	f, err := Parse([]byte(`{
		"hosts": {
			"lab-*": {"reach": ["lab-*"]},
			"lab-7": {"sudo": "askpass"},
			"lab-9": {"reach": ["local", "db.example.com"]},
			"gpu?": {"reach": ["*"]},
			"edge": {"reach": []},
			"edge-*": {"jump": ["gw1"]}
		}
	}`), "config.json")
	require.NoError(t, err)
	for _, c := range []struct {
		from, to string
		ok       bool
		rule     string
	}{
		{Local, Local, true, ""},
		{Local, "lab-1", true, ""},
		{Local, "anything.example.com", true, ""},
		{"web", "web", true, ""},
		{"web", Local, false, ""},
		{"web", "lab-1", false, ""},
		{"edge-1", "edge-2", false, ""}, // a rule without "reach" grants nothing
		{"lab-1", "lab-1", true, ""},
		{"lab-1", "lab-2", true, "lab-*"},
		{"lab-7", "lab-2", true, "lab-*"}, // a later rule that does not set reach keeps it
		{"lab-1", Local, false, "lab-*"},
		{"lab-1", "web", false, "lab-*"},
		{"lab-9", Local, true, "lab-9"}, // a later rule replaces an earlier reach
		{"lab-9", "db.example.com", true, "lab-9"},
		{"lab-9", "lab-2", false, "lab-9"},
		{"gpu1", Local, true, "gpu?"},
		{"gpu1", "web", true, "gpu?"},
		{"edge", "edge", true, ""},
		{"edge", Local, false, "edge"},
	} {
		t.Run(c.from+"→"+c.to, func(t *testing.T) {
			ok, rule := f.MayReach(c.from, c.to)
			assert.Equal(t, c.ok, ok)
			assert.Equal(t, c.rule, rule)
		})
	}
	assert.Equal(t, []string{"local", "db.example.com"}, f.For("lab-9").Reach)
	assert.Nil(t, f.For("web").Reach)

	var none File
	ok, _ := none.MayReach("web", Local)
	assert.False(t, ok, "without config.json a host reaches only itself")
	ok, _ = none.MayReach(Local, "web")
	assert.True(t, ok)
}

func TestReachErrors(t *testing.T) {
	for in, want := range map[string]string{
		`{"reach": ["*"]}`:                       `unknown field "reach"`,
		`{"hosts": {"a": {"reach": "local"}}}`:   `hosts["a"]`,
		`{"hosts": {"a": {"reach": ["lab-["]}}}`: `hosts["a"].reach: bad pattern "lab-["`,
	} {
		_, err := Parse([]byte(in), "config.json")
		assert.ErrorContains(t, err, want, in)
	}
}

func TestLinger(t *testing.T) {
	f, err := Parse([]byte(`{"linger": 2, "hosts": {"lab-*": {"linger": 0.5}, "lab-7": {"linger": 0}}}`), "c")
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]time.Duration{"web": 2 * time.Minute, "lab-1": 30 * time.Second, "lab-7": 0} {
		if got := f.For(host).LingerFor(); got != want {
			t.Errorf("%s: linger %v, want %v", host, got, want)
		}
	}
	if got := (&File{}).For("x").LingerFor(); got != 10*time.Minute {
		t.Errorf("default linger %v", got)
	}
	for _, bad := range []string{`{"linger": -1}`, `{"linger": "10m"}`, `{"hosts": {"a": {"linger": 1e9}}}`} {
		if _, err := Parse([]byte(bad), "c"); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

func TestGroups(t *testing.T) {
	f, err := Parse([]byte(`{"groups": {"lab": ["lab-[1-40]", "gw-2"]}, "fanout": 4}`), "c")
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := f.Group("lab"); !ok || len(m) != 2 {
		t.Errorf("group lab: %v %v", m, ok)
	}
	if _, ok := f.Group("nope"); ok {
		t.Error("a group nobody defined")
	}
	if f.FanoutOr(0) != 4 || f.FanoutOr(9) != 9 || (&File{}).FanoutOr(0) != DefaultFanout {
		t.Error("fanout bound")
	}
	for _, bad := range []string{`{"groups": {"a b": ["x"]}}`, `{"groups": {"a": []}}`, `{"groups": ["x"]}`, `{"fanout": -1}`, `{"fanout": 5000}`} {
		if _, err := Parse([]byte(bad), "c"); err == nil {
			t.Errorf("%s parsed", bad)
		}
	}
}

// Whatever config.json holds, Parse answers with settings or an error,
// and what it accepts answers every question about hosts.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"pythons": ["python3.12"], "sudo": "auto", "hosts": {"lab-*": {"jump": ["bastion"], "reach": ["lab-*", "local"], "linger": 60}, "gpu[0-9]": {"sudo": "nopasswd"}}}`))
	f.Add([]byte(`{"groups": {"web": ["web1", "web2"]}, "swap": {"after": "1h"}, "max_object_mb": 64, "max_host_opens": 8}`))
	f.Add([]byte(`{"hosts": {"{a,b}*": {"jump": []}}}`))
	f.Add([]byte(`{"hosts": null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := Parse(b, "config.json")
		if err != nil {
			require.Nil(t, cfg)
			return
		}
		for _, host := range []string{"lab-7", "gpu1", "local", "", "a.b.c", "web1"} {
			cfg.For(host)
			cfg.MayReach(host, "lab-7")
			cfg.MayReach("local", host)
		}
		cfg.Group("web")
		cfg.Top()
	})
}
