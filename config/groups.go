package config

import (
	"fmt"

	"github.com/replhub/replhub/internal/lazyre"
)

// "groups" (config.json, top level) names lists of hosts for a fan-out,
// used as --hosts @name: {"lab": ["lab-[1-40]", "gw-2"]}. Each member is
// a node-set expression (package nodeset), and may name another group.
//
// "fanout" (top level) bounds how many hosts a fan-out connects to at
// once; unset means DefaultFanout.
const (
	DefaultFanout = 16
	maxFanout     = 1024
)

var validGroup = lazyre.New(`^[A-Za-z0-9._-]{1,64}$`)

func (f *File) checkGroups(name string) error {
	if f.Fanout < 0 || f.Fanout > maxFanout {
		return fmt.Errorf("config: %s: fanout must be a number of hosts from 1 to %d", name, maxFanout)
	}
	for g, members := range f.Groups {
		if !validGroup.MatchString(g) {
			return fmt.Errorf("config: %s: groups: bad name %q: use letters, digits and ._- (at most 64)", name, g)
		}
		if len(members) == 0 {
			return fmt.Errorf("config: %s: groups[%q] lists no host", name, g)
		}
	}
	return nil
}

// Group returns the members of group name, as config.json lists them.
func (f *File) Group(name string) ([]string, bool) {
	m, ok := f.Groups[name]
	return m, ok
}

// FanoutOr is the fan-out bound: n when positive, else config.json's,
// else DefaultFanout.
func (f *File) FanoutOr(n int) int {
	switch {
	case n > 0:
		return min(n, maxFanout)
	case f.Fanout > 0:
		return f.Fanout
	}
	return DefaultFanout
}
