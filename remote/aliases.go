package remote

import (
	"path/filepath"
	"sort"
	"strings"
)

// maxAliasLines bounds how much of the ssh configuration Aliases reads,
// Includes and all.
const maxAliasLines = 100_000

// Aliases lists the Host names of the user's ssh configuration
// (home/.ssh/config, then /etc/ssh/ssh_config, Includes followed as for a
// connection), for completing a host: patterns (*, ?, !name) are left out.
func Aliases(home string) []string {
	r := &Resolver{home: home}
	seen := map[string]bool{}
	var out []string
	for _, f := range []struct {
		path   string
		system bool
	}{{filepath.Join(home, ".ssh", "config"), false}, {"/etc/ssh/ssh_config", true}} {
		lines, _, _ := r.readInlined(f.path, f.system, 0)
		if len(lines) > maxAliasLines {
			lines = lines[:maxAliasLines]
		}
		for _, line := range lines {
			for _, a := range hostNames(line) {
				if !seen[a] {
					seen[a] = true
					out = append(out, a)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

// hostNames returns the plain names of a Host line ("Host a b", "Host=a"),
// without patterns, or nothing for any other line.
func hostNames(line string) []string {
	f := strings.Fields(strings.Replace(strings.TrimSpace(line), "=", " ", 1))
	if len(f) < 2 || !strings.EqualFold(f[0], "Host") {
		return nil
	}
	var out []string
	for _, p := range f[1:] {
		if strings.HasPrefix(p, "#") {
			break
		}
		p = strings.Trim(p, `"`)
		if p == "" || strings.ContainsAny(p, "*?!%") {
			continue
		}
		out = append(out, p)
	}
	return out
}
