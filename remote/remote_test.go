package remote

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseSpec(t *testing.T) {
	tests := []struct {
		in         string
		user, host string
		port       int
		err        string
	}{
		{in: "lab", host: "lab"},
		{in: "me@lab-7.example.com:2222", user: "me", host: "lab-7.example.com", port: 2222},
		{in: "[::1]:22", host: "[::1]", port: 22},
		{in: "a b", err: "bad host"},
		{in: "x;rm -rf /", err: "bad host"},
		{in: "lab:99999", err: "bad port"},
		{in: "lab:x", err: "bad port"},
		{in: "127.0.0.1:0", err: "bad port in \"127.0.0.1:0\": 1 to 65535"},
		{in: "[::1]:0", err: "bad port"},
		{in: "lab:-1", err: "bad port"},
		{in: "m'e@lab", err: "bad user"},
	}
	for _, tt := range tests {
		u, h, p, err := ParseSpec(tt.in)
		if tt.err != "" {
			assert.ErrorContains(t, err, tt.err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, []any{tt.user, tt.host, tt.port}, []any{u, h, p}, tt.in)
	}
}

func writeSSHConfig(t *testing.T, files map[string]string) string {
	home := t.TempDir()
	for name, body := range files {
		p := filepath.Join(home, ".ssh", name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	}
	return home
}

func TestResolve(t *testing.T) {
	var warnings []string
	Warnf = func(f string, a ...any) { warnings = append(warnings, f) }
	defer func() { Warnf = func(string, ...any) {} }()
	home := writeSSHConfig(t, map[string]string{
		"config": `Include conf.d/*.conf
Host lab-7
  HostName 10.1.2.3
  Port 2200
  User alice
  IdentityFile ~/.ssh/lab_%r_%h
  IdentitiesOnly yes
  ProxyJump gw1
  ServerAliveInterval 5
  ConnectTimeout 7
  StrictHostKeyChecking accept-new
  UserKnownHostsFile ~/.ssh/kh_lab
Match canonical
  User nobody
Host gw1
  HostName gw1.example.com
  User bob
Host gw2
  ProxyJump gw1
Host proxied
  ProxyCommand nc %h %p
`,
		"conf.d/a.conf": "Host inc\n  HostName included.example.com\n",
	})
	r, err := NewResolver(home, "me")
	require.NoError(t, err)

	route, err := r.Resolve("lab-7", nil)
	require.NoError(t, err)
	require.Len(t, route.Hops, 2)
	gw, lab := route.Hops[0], route.Hops[1]
	assert.Equal(t, "bob@gw1.example.com:22", gw.String())
	assert.Equal(t, "alice@10.1.2.3:2200", lab.String())
	assert.Equal(t, []string{filepath.Join(home, ".ssh", "lab_alice_10.1.2.3")}, lab.IdentityFiles)
	assert.True(t, lab.IdentitiesOnly)
	assert.Equal(t, 5*time.Second, lab.ServerAliveInterval)
	assert.Equal(t, 7*time.Second, lab.ConnectTimeout)
	assert.Equal(t, "accept-new", lab.StrictHostKeyChecking)
	assert.Equal(t, filepath.Join(home, ".ssh", "kh_lab"), lab.KnownHosts[0])
	assert.Equal(t, "yes", gw.StrictHostKeyChecking)
	assert.Equal(t, filepath.Join(home, ".ssh", "known_hosts"), gw.KnownHosts[0])
	assert.Equal(t, "lab-7 via gw1", route.String())
	assert.Len(t, warnings, 1, "the unsupported Match is reported once")

	none := []string{}
	route, err = r.Resolve("lab-7", &none)
	require.NoError(t, err)
	assert.Len(t, route.Hops, 1, "an empty jump list turns ProxyJump off")

	route, err = r.Resolve("carol@gw2:2022", &[]string{"gw2"})
	require.NoError(t, err)
	assert.Equal(t, "gw2 via gw1, gw2", route.String(), "a jump's own ProxyJump comes first")
	assert.Equal(t, "carol@gw2:2022", route.Target().String())

	route, err = r.Resolve("inc", nil)
	require.NoError(t, err)
	assert.Equal(t, "included.example.com", route.Target().HostName, "Include with ~ as $HOME")

	route, err = r.Resolve("proxied", nil)
	require.NoError(t, err)
	assert.Equal(t, "nc proxied 22", route.Target().ProxyCommand)
	assert.Equal(t, "me", route.Target().User, "the local user by default")
}

func TestScriptRefusesShellSyntax(t *testing.T) {
	for _, bad := range []string{"python3; rm -rf ~", "$(reboot)", "py thon", "a'b", "`x`"} {
		_, err := Script(StartSpec{Pythons: []string{bad}}, "tok")
		assert.Error(t, err, bad)
		_, err = Script(StartSpec{Python: bad}, "tok")
		assert.Error(t, err, bad)
	}
	_, err := Script(StartSpec{Python: "/opt/py*/bin/python3"}, "tok")
	assert.Error(t, err, "a pinned python is one interpreter")
	s, err := Script(StartSpec{Pythons: []string{"~/py/bin/python3", "/opt/*/bin/python3.*"}, Prefer: "3.11"}, "tok")
	require.NoError(t, err)
	assert.Contains(t, s, `each '~/py/bin/python3' '/opt/*/bin/python3.*' || each 'python3.11' || managed || each 'python3.14' 'python3.13' 'python3.12' 'python3.10'`)
	assert.NotRegexp(t, `@[A-Z]+@`, s)
}

func TestCommandQuoting(t *testing.T) {
	got := Command(RunSpec{Argv: []string{"bash", "--norc", "-c", "echo 'hi' $HOME"}, Dir: "/tmp/a b", Env: map[string]string{"B": "2", "A": "x'y"}})
	assert.Equal(t, `echo replhub-pid $$ >&2; cd -- '/tmp/a b' && exec env 'A=x'\''y' 'B=2' 'bash' '--norc' '-c' 'echo '\''hi'\'' $HOME'`, got)
	out, err := exec.Command("sh", "-c", "cd / && "+Command(RunSpec{Argv: []string{"printf", "%s|", "a'b", "$X"}, Env: map[string]string{"X": "1"}})+" 2>/dev/null").Output()
	require.NoError(t, err)
	assert.Equal(t, "a'b|$X|", string(out))
}

func TestCappedKeepsHeadAndTail(t *testing.T) {
	c := &capped{limit: 10}
	for i := 0; i < 1000; i++ {
		c.Write([]byte("0123456789"))
	}
	b := string(c.bytes())
	assert.True(t, strings.HasPrefix(b, "01234\n[... 9990 bytes left out ...]\n"), b)
	assert.True(t, strings.HasSuffix(b, "56789"), b)
	c = &capped{limit: 100}
	c.Write([]byte("short"))
	assert.Equal(t, "short", string(c.bytes()))
}
