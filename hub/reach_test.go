package hub

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/proto"
)

// reachHub is a hub with no workers: live sessions are table entries whose
// start is over, on the hosts given.
func reachHub(t *testing.T, hosts map[string]string) *Hub {
	t.Helper()
	dir := t.TempDir()
	p := config.Paths{Runtime: filepath.Join(dir, "run"), State: filepath.Join(dir, "state"), Config: filepath.Join(dir, "config")}
	require.NoError(t, os.MkdirAll(p.DeadDir(), 0o700))
	require.NoError(t, os.MkdirAll(p.Config, 0o700))
	h := &Hub{paths: p, sessions: map[string]*Session{}, groups: map[string]groupRecord{}, dead: map[string]bool{},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for name, host := range hosts {
		s := newSession(h, name)
		s.info.Host = host
		close(s.ready)
		h.sessions[name] = s
	}
	return h
}

func TestCheckReach(t *testing.T) {
	h := reachHub(t, map[string]string{
		"loc": "local", "ops": "local",
		"web": "lab-7", "web.root": "lab-7", "peer": "lab-7",
		"db": "lab-8", "far": "gpu1",
	})
	require.NoError(t, h.writeDeathNote(deathNote{Name: "gone", When: time.Now(), How: "killed by signal 9", LastOutput: "secret"}))
	require.NoError(t, h.writeDeathNote(deathNote{Name: "wasweb", When: time.Now(), How: "exited", Host: "lab-7"}))
	cfgPath := h.paths.ConfigFile()
	grant := `{"hosts": {"lab-*": {"reach": ["lab-*"]}, "gpu*": {"reach": ["*"]}}}`

	for _, c := range []struct {
		name   string
		config string // "" is no config.json
		from   string
		f      proto.Req
		want   string // "" is allowed
	}{
		{"local reaches local", "", "loc", proto.Req{Kind: "call", Target: "ops"}, ""},
		{"local reaches a host", "", "loc", proto.Req{Kind: "kill", Target: "web"}, ""},
		{"local opens anywhere", "", "loc", proto.Req{Kind: "open", Name: "new", Host: "lab-9"}, ""},
		{"same host", "", "web", proto.Req{Kind: "put", Target: "peer"}, ""},
		{"root twin", "", "web", proto.Req{Kind: "open", Name: "web.root", Host: "lab-7"}, ""},
		{"own dead name", "", "web", proto.Req{Kind: "open", Name: "wasweb"}, ""},
		{"new name, no host", "", "web", proto.Req{Kind: "open", Name: "brand-new"}, ""},
		{"no such target", "", "web", proto.Req{Kind: "get", Target: "nobody"}, ""},
		{"bad name is the request's to report", "", "web", proto.Req{Kind: "get", Target: "../x"}, ""},
		{"cancel names nothing", "", "web", proto.Req{Kind: "cancel"}, ""},
		{"sessions names nothing", "", "web", proto.Req{Kind: "sessions"}, ""},

		{"call local", "", "web", proto.Req{Kind: "call", Target: "loc"},
			`session 'web' on lab-7 may not reach 'loc' (local): add "reach": ["local"] for "lab-7" under "hosts" in ` + cfgPath},
		{"put local", "", "web", proto.Req{Kind: "put", Target: "loc"}, "may not reach 'loc' (local)"},
		{"get local", "", "web", proto.Req{Kind: "get", Target: "loc"}, "may not reach 'loc' (local)"},
		{"push local", "", "web", proto.Req{Kind: "push", Target: "loc"}, "may not reach 'loc' (local)"},
		{"pull local", "", "web", proto.Req{Kind: "pull", Target: "loc"}, "may not reach 'loc' (local)"},
		{"kill local", "", "web", proto.Req{Kind: "kill", Target: "loc"}, "may not reach 'loc' (local)"},
		{"a later kind with a target", "", "web", proto.Req{Kind: "interrupt", Target: "loc"}, "may not reach 'loc' (local)"},
		{"attach to local", "", "web", proto.Req{Kind: "open", Name: "loc"}, "may not reach 'loc' (local)"},
		{"open on this machine", "", "web", proto.Req{Kind: "open", Name: "new", Host: "local"}, "may not reach 'new' (local)"},
		{"local dead name", "", "web", proto.Req{Kind: "open", Name: "gone"}, "may not reach 'gone' (local)"},
		{"kill local dead name", "", "web", proto.Req{Kind: "kill", Target: "gone"}, "may not reach 'gone' (local)"},
		{"other host", "", "web", proto.Req{Kind: "call", Target: "db"},
			`may not reach 'db' (on lab-8): add "reach": ["lab-8"] for "lab-7"`},
		{"open on other host", "", "web", proto.Req{Kind: "open", Name: "x", Host: "lab-8"}, "may not reach 'x' (on lab-8)"},
		{"host asked for, name elsewhere", "", "web", proto.Req{Kind: "open", Name: "loc", Host: "lab-7"}, "may not reach 'loc' (local)"},
		{"name implies this machine", "", "web", proto.Req{Kind: "open", Name: "pwn@local"}, "may not reach 'pwn@local' (local)"},
		{"name implies this machine, as root", "", "web", proto.Req{Kind: "open", Name: "pwn@local", Sudo: yes()}, "may not reach 'pwn@local' (local)"},
		{"name implies another host", "", "web", proto.Req{Kind: "open", Name: "pwn@lab-8"}, "may not reach 'pwn@lab-8' (on lab-8)"},
		{"name implies the own host", "", "web", proto.Req{Kind: "open", Name: "ok@lab-7"}, ""},
		{"name and host disagree", "", "web", proto.Req{Kind: "open", Name: "pwn@local", Host: "lab-7"}, "runs on local, as its name says, not lab-7"},

		{"granted host", grant, "web", proto.Req{Kind: "call", Target: "db"}, ""},
		{"granted open", grant, "web", proto.Req{Kind: "open", Name: "x", Host: "lab-8"}, ""},
		{"grant names the rule to change", grant, "web", proto.Req{Kind: "call", Target: "loc"},
			`session 'web' on lab-7 may not reach 'loc' (local): add "local" to the "reach" of "lab-*" under "hosts" in ` + cfgPath},
		{"star", grant, "far", proto.Req{Kind: "call", Target: "loc"}, ""},
		{"star, dead local", grant, "far", proto.Req{Kind: "kill", Target: "gone"}, ""},
		{"local grant", `{"hosts": {"lab-7": {"reach": ["local"]}}}`, "web", proto.Req{Kind: "pull", Target: "loc"}, ""},
		{"local grant only", `{"hosts": {"lab-7": {"reach": ["local"]}}}`, "web", proto.Req{Kind: "pull", Target: "db"}, "may not reach 'db' (on lab-8)"},
		{"broken config refuses", `{"hosts": `, "web", proto.Req{Kind: "call", Target: "db"}, "may not reach 'db' (on lab-8): config: "},
		{"broken config keeps the own host", `{"hosts": `, "web", proto.Req{Kind: "call", Target: "peer"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(cfgPath)
			if c.config != "" {
				require.NoError(t, os.WriteFile(cfgPath, []byte(c.config), 0o600))
			}
			f := c.f
			err := h.checkReach(h.sessions[c.from], &f)
			if c.want == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			if c.f.Name != "" && c.f.Host != "" && c.f.Name != "loc" {
				return // a bad request, not a refusal
			}
			var re *ReachError
			assert.True(t, errors.As(err, &re))
		})
	}
}

func TestListForRemote(t *testing.T) {
	h := reachHub(t, map[string]string{"loc": "local", "web": "lab-7", "peer": "lab-7", "db": "lab-8"})
	names := func(from string) []string {
		var out []string
		for _, s := range h.listFor(h.sessions[from]).Sessions {
			out = append(out, s.Name)
		}
		return out
	}
	assert.Equal(t, []string{"db", "loc", "peer", "web"}, names("loc"))
	assert.Equal(t, []string{"peer", "web"}, names("web"))
	require.NoError(t, os.WriteFile(h.paths.ConfigFile(), []byte(`{"hosts": {"lab-7": {"reach": ["lab-*"]}}}`), 0o600))
	assert.Equal(t, []string{"db", "peer", "web"}, names("web"))
}

func TestOpenHost(t *testing.T) {
	h := reachHub(t, map[string]string{"loc": "local", "web": "lab-7"})
	assert.Equal(t, "", openHost(h.sessions["loc"]), "a local session opens here")
	assert.Equal(t, "lab-7", openHost(h.sessions["web"]), "a remote one beside itself")
}

// TestOpenImpliedHost: open takes its host where checkReach does, so a
// name NAME@HOST opens on HOST and is checked there, before any start.
func TestOpenImpliedHost(t *testing.T) {
	h := reachHub(t, map[string]string{"web": "lab-7"})
	for _, name := range []string{"pwn@local", "pwn@lab-8"} {
		f := proto.Req{Kind: "open", Name: name, Sudo: yes()}
		name, host, err := requestTarget(&f)
		require.NoError(t, err)
		assert.Equal(t, f.Name, name)
		assert.Equal(t, f.Name[len("pwn@"):], host)
		require.Error(t, h.checkReach(h.sessions["web"], &f))
	}
	f := proto.Req{Kind: "get", Target: "x@lab-8"}
	name, host, err := requestTarget(&f)
	require.NoError(t, err)
	assert.Equal(t, "x@lab-8", name)
	assert.Equal(t, "", host, "a target's host is where it runs, looked up by checkReach")
}

func yes() *bool { b := true; return &b }
