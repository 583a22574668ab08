package hub

import (
	"fmt"
	"os"
	"strings"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/internal/lazyre"
	"github.com/replhub/replhub/pyfind"
	"github.com/replhub/replhub/wire"
)

// versionAsked is a --python that names a version: 3.12, 3.12.1,
// python3.12.
var versionAsked = lazyre.New(`^(?:python)?(3\.\d+(?:\.\d+)?)$`)

// pythonNote says that asked, the interpreter an exec named for a session
// that was live already, is not the one the session runs, and applies to
// a new session only; "" when it is the same, or when that cannot be told
// (a bare name such as python3 or pypy3, a path on a host, a version
// manager's shim whose choice cannot be read).
func pythonNote(s *Session, asked string, adv wire.Advice) string {
	if asked == "" {
		return ""
	}
	s.mu.Lock()
	version, exe, local := s.info.Python, s.info.Executable, s.info.Host == "local"
	env, cwd := s.origin.Env, s.origin.Cwd
	s.mu.Unlock()
	if version == "" {
		return "" // not started: nothing to compare
	}
	switch m := versionAsked.FindStringSubmatch(asked); {
	case m != nil:
		if version == m[1] || strings.HasPrefix(version, m[1]+".") {
			return ""
		}
	case strings.Contains(asked, "/") && local:
		if asked == exe {
			return ""
		}
		// A shim (pyenv's, asdf's: ~/.pyenv/shims/python3.11) is a
		// script that runs another file: the one it runs for the
		// session's creator is compared, as a warm exec brings no cwd
		// nor environment.
		c, ok := pyfind.Resolve(asked, func(k string) string { return config.Getenv(env, k) }, cwd)
		if !ok || c.Path == exe || sameFile(c.Path, exe) {
			return ""
		}
	default:
		return ""
	}
	return fmt.Sprintf("session '%s' runs python %s (%s): %s %s names the interpreter of a new session only; %s, then run again to start it on %s",
		s.name, version, exe, adv.Option("python"), asked, adv.Kill(s.name), asked)
}

// sameFile reports whether paths a and b name one file.
func sameFile(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}
