package remote

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAliases(t *testing.T) {
	home := t.TempDir()
	ssh := filepath.Join(home, ".ssh")
	require.NoError(t, os.MkdirAll(filepath.Join(ssh, "conf.d"), 0o700))
	write := func(p, s string) { require.NoError(t, os.WriteFile(filepath.Join(ssh, p), []byte(s), 0o600)) }
	write("config", "Include conf.d/*\nInclude config\nHost lab-7 lab-8 *.corp !bad\n  HostName 10.0.0.7\nHost=gw1\nhost \"quoted\" # a comment\nMatch host x\n")
	write("conf.d/a", "Host inc-1 web?\nHost *\n")
	got := Aliases(home)
	assert.Subset(t, got, []string{"gw1", "inc-1", "lab-7", "lab-8", "quoted"})
	for _, a := range got {
		assert.NotContains(t, a, "*")
		assert.NotContains(t, a, "?")
		assert.NotContains(t, a, "!")
	}
}

func FuzzHostNames(f *testing.F) {
	for _, s := range []string{"Host a b", "Host=a", "host \"q\" # c", "Host *", "HostName x", "Host", "Host !a a?b a%h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		for _, n := range hostNames(line) {
			if n == "" {
				t.Fatalf("empty name from %q", line)
			}
			for _, c := range "*?!% \t" {
				for _, d := range n {
					if c == d {
						t.Fatalf("pattern character %q in %q from %q", c, n, line)
					}
				}
			}
		}
	})
}
