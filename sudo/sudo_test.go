package sudo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestArgs(t *testing.T) {
	assert.Equal(t, []string{"sudo", "-n", "--"}, Args("", false, ""))
	assert.Equal(t, []string{"/usr/bin/sudo", "-k", "-S", "-p", "P: ", "--"}, Args("/usr/bin/sudo", true, "P: "))
	p := NewPrompt()
	assert.NotEqual(t, p, NewPrompt(), "each start has its own prompt")
	assert.Regexp(t, `^\[replhub-sudo-[0-9a-f]{12}\] password: $`, p)
}

func TestWatcher(t *testing.T) {
	p := "[replhub-sudo-abc] password: "
	tests := []struct {
		name   string
		chunks []string
		kind   string
	}{
		{"one prompt is no verdict", []string{"We trust you…\n", p}, ""},
		{"second prompt, split", []string{p, "\n", p[:7], p[7:]}, KindWrongPassword},
		{"sorry", []string{p, "\nSorry, try again.\n"}, KindWrongPassword},
		{"password required", []string{"sudo: a password is required\n"}, KindPasswordRequired},
		{"tty", []string{"sudo: sorry, you must have a tty to run sudo\n"}, KindNoTTY},
		{"sudoers", []string{"alice is not in the sudoers file.  This incident will be reported.\n"}, KindNotSudoer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := NewWatcher(p)
			var err error
			for _, c := range tt.chunks {
				if err = w.Feed([]byte(c)); err != nil {
					break
				}
			}
			if tt.kind == "" {
				assert.NoError(t, err)
				return
			}
			assert.True(t, IsKind(err, tt.kind), "got %v", err)
		})
	}
	// A long stream with no verdict stays small.
	w := NewWatcher(p)
	for i := 0; i < 1000; i++ {
		require.NoError(t, w.Feed([]byte(strings.Repeat("x", 100))))
	}
	assert.LessOrEqual(t, len(w.buf), 256)
}

func TestAsk(t *testing.T) {
	dir := t.TempDir()
	prog := filepath.Join(dir, "askpass")
	require.NoError(t, os.WriteFile(prog, []byte("#!/bin/sh\nprintf 'pw with spaces\\nsecond line\\n'\n"), 0o755))
	pw, err := Ask(context.Background(), prog, "prompt", nil)
	require.NoError(t, err)
	assert.Equal(t, []byte("pw with spaces"), pw)
	Zero(pw)
	assert.Equal(t, make([]byte, len(pw)), pw)

	// A CR LF line end, the longest password, a longer line (refused) and
	// a long output after the password line (read to its end).
	long := strings.Repeat("x", MaxPassword)
	for _, tt := range []struct{ script, want string }{
		{`printf 'crlf\r\n'`, "crlf"},
		{"printf " + long, long},
		{"printf " + long + "x", ""},
		{"printf 'pw\\n'; head -c 1000000 /dev/zero", "pw"},
	} {
		require.NoError(t, os.WriteFile(prog, []byte("#!/bin/sh\n"+tt.script+"\n"), 0o755))
		pw, err := Ask(context.Background(), prog, "prompt", nil)
		if tt.want == "" {
			assert.ErrorContains(t, err, "longer than 4096 bytes")
			continue
		}
		require.NoError(t, err, tt.script)
		assert.Equal(t, []byte(tt.want), pw, tt.script)
	}

	_, err = Ask(context.Background(), "", "prompt", nil)
	assert.ErrorIs(t, err, ErrNoAskPass)
	require.NoError(t, os.WriteFile(prog, []byte("#!/bin/sh\nexit 1\n"), 0o755))
	_, err = Ask(context.Background(), prog, "prompt", nil)
	var ae *AskError
	assert.ErrorAs(t, err, &ae)
}
