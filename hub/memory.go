package hub

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/replhub/replhub/wire"
)

// ceiling is the memory limit of the hub's cgroup, which its local
// sessions share (a systemd unit's MemoryMax, see client/start.go).
// REPLHUB_CGROUP names the cgroup's folder instead of the hub's own (for
// tests). A zero max, or a nil *ceiling, means no ceiling applies.
type ceiling struct {
	dir  string // the cgroup's folder under /sys/fs/cgroup
	v1   bool   // a cgroup v1 memory controller's files
	max  int64
	mu   sync.Mutex
	seen int64 // oom kills already accounted for
}

// cgroupRoot is where cgroup file systems are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// findCeiling reads the hub's cgroup memory limit, if one applies.
func findCeiling() *ceiling {
	c := &ceiling{dir: os.Getenv("REPLHUB_CGROUP")}
	if c.dir == "" {
		c.dir, c.v1 = ownCgroup()
	} else if _, err := os.Stat(filepath.Join(c.dir, "memory.max")); err != nil {
		c.v1 = true // a v1 controller's folder has memory.limit_in_bytes
	}
	if c.dir == "" {
		return c
	}
	c.max = c.read("memory.max", "memory.limit_in_bytes")
	if c.v1 && c.max >= 1<<60 { // v1 says "no limit" with a huge number
		c.max = 0
	}
	c.seen = c.oomKills()
	return c
}

// ownCgroup finds the folder of this process's memory cgroup: the v2
// unified one, else the v1 memory controller's.
func ownCgroup() (string, bool) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", false
	}
	defer f.Close()
	var v1 string
	sc := bufio.NewScanner(f)
	for n := 0; sc.Scan() && n < 64; n++ {
		unified, memory := cgroupLine(sc.Text())
		if unified != "" {
			dir := filepath.Join(cgroupRoot, unified)
			if _, err := os.Stat(filepath.Join(dir, "memory.max")); err == nil {
				return dir, false
			}
		}
		if memory != "" {
			v1 = filepath.Join(cgroupRoot, "memory", memory)
		}
	}
	return v1, v1 != ""
}

// cgroupLine reads one line of /proc/self/cgroup: the path of the v2
// unified hierarchy ("0::/path"), or of the v1 memory controller
// ("4:memory:/path"); paths are absolute and clean, else ignored.
func cgroupLine(line string) (unified, memory string) {
	parts := strings.SplitN(line, ":", 3)
	if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") || filepath.Clean(parts[2]) != parts[2] {
		return "", ""
	}
	if parts[0] == "0" && parts[1] == "" {
		return parts[2], ""
	}
	for _, ctl := range strings.Split(parts[1], ",") {
		if ctl == "memory" {
			return "", parts[2]
		}
	}
	return "", ""
}

// read returns the number in the cgroup file v2 (or v1, for a v1 cgroup);
// 0 for "max", a missing file or anything unreadable.
func (c *ceiling) read(v2, v1 string) int64 {
	name := v2
	if c.v1 {
		name = v1
	}
	b, err := os.ReadFile(filepath.Join(c.dir, name))
	if err != nil || len(b) > 64 {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// used is what the cgroup holds now.
func (c *ceiling) used() int64 { return c.read("memory.current", "memory.usage_in_bytes") }

// oomKills counts the processes of the cgroup that an OOM killer ended
// (memory.events, or memory.oom_control in v1).
func (c *ceiling) oomKills() int64 {
	name := "memory.events"
	if c.v1 {
		name = "memory.oom_control"
	}
	b, err := os.ReadFile(filepath.Join(c.dir, name))
	if err != nil || len(b) > 4096 {
		return 0
	}
	return oomKillsIn(b)
}

// oomKillsIn reads the "oom_kill N" line of a memory.events file.
func oomKillsIn(b []byte) int64 {
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil || n < 0 {
				return 0
			}
			return n
		}
	}
	return 0
}

// nearAt reports whether the ceiling is the likely cause of a SIGKILL
// just now: the cgroup's OOM killer struck since the last death, or the
// cgroup holds 90% of its ceiling or more.
func (c *ceiling) nearAt() bool {
	if c == nil || c.max <= 0 {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	kills := c.oomKills()
	struck := kills > c.seen
	c.seen = kills
	return struck || c.used() >= c.max/10*9
}

// describe is the ceiling for the sessions list.
func (c *ceiling) describe(h *wire.HubInfo) {
	if c == nil || c.max <= 0 {
		return
	}
	h.MemoryMax, h.MemoryUsed, h.MemoryCgroup = c.max, c.used(), c.dir
	h.MemoryLimit = fmt.Sprintf("%s (memory.max of cgroup %s) over the hub and its local sessions", wire.MB(c.max), c.dir)
}

// deathAdvice is what a death note adds to a SIGKILL near the ceiling.
func (c *ceiling) deathAdvice() string {
	raise := "raise the limit of cgroup " + c.dir
	if unit := filepath.Base(c.dir); strings.HasSuffix(unit, ".service") {
		raise = fmt.Sprintf("raise it with `systemctl --user set-property %s MemoryMax=6G` (or start the hub with REPLHUB_SUPERVISOR=detached for no ceiling)", unit)
	}
	return fmt.Sprintf("the hub's memory ceiling (%s, shared by the hub and its local sessions) was nearly reached: it is the likely cause; %s, or keep less in memory", wire.MB(c.max), raise)
}
