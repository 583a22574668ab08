package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
}
