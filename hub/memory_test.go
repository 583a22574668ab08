package hub

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/wire"
)

func TestCeilingFromACgroupFolder(t *testing.T) {
	write := func(dir, file, v string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, file), []byte(v), 0o600))
	}

	// v2, as a systemd unit: the advice names the unit.
	unit := filepath.Join(t.TempDir(), "replhub-hub-0-42.service")
	require.NoError(t, os.Mkdir(unit, 0o700))
	write(unit, "memory.max", "3221225472\n")
	write(unit, "memory.current", "1073741824\n")
	write(unit, "memory.events", "low 0\nhigh 2\nmax 0\noom 0\noom_kill 0\n")
	t.Setenv("REPLHUB_CGROUP", unit)
	c := findCeiling()
	assert.False(t, c.v1)
	assert.EqualValues(t, 3<<30, c.max)
	var h wire.HubInfo
	c.describe(&h)
	assert.EqualValues(t, 1<<30, h.MemoryUsed)
	assert.Contains(t, h.MemoryLimit, "3072 MB (memory.max of cgroup "+unit)
	assert.False(t, c.nearAt(), "a third in use, no OOM kill")
	write(unit, "memory.events", "oom_kill 1\n")
	assert.True(t, c.nearAt(), "the OOM killer struck")
	assert.False(t, c.nearAt(), "that kill is accounted for")
	assert.Contains(t, c.deathAdvice(), "raise it with `systemctl --user set-property replhub-hub-0-42.service MemoryMax=6G` (or start the hub with REPLHUB_SUPERVISOR=detached for no ceiling)")

	// "max" is no ceiling.
	write(unit, "memory.max", "max\n")
	c = findCeiling()
	assert.Zero(t, c.max)
	h = wire.HubInfo{}
	c.describe(&h)
	assert.Zero(t, h.MemoryMax)
	assert.False(t, c.nearAt())

	// v1: limit_in_bytes and usage_in_bytes; its "no limit" is huge.
	v1 := t.TempDir()
	write(v1, "memory.limit_in_bytes", "1048576000\n")
	write(v1, "memory.usage_in_bytes", "1000000000\n")
	t.Setenv("REPLHUB_CGROUP", v1)
	c = findCeiling()
	assert.True(t, c.v1)
	assert.True(t, c.nearAt(), "95% in use")
	write(v1, "memory.limit_in_bytes", "9223372036854771712\n")
	assert.Zero(t, findCeiling().max)

	var nilCeiling *ceiling
	assert.False(t, nilCeiling.nearAt())
}

func TestCgroupLine(t *testing.T) {
	for line, want := range map[string][2]string{
		"0::/user.slice/replhub-hub-0-1.service": {"/user.slice/replhub-hub-0-1.service", ""},
		"4:memory:/process_api/x":                {"", "/process_api/x"},
		"7:cpu,memory:/a":                        {"", "/a"},
		"3:cpuset:/":                             {"", ""},
		"0::relative":                            {"", ""},
		"0::/a/../../etc":                        {"", ""},
		"garbage":                                {"", ""},
	} {
		u, m := cgroupLine(line)
		assert.Equal(t, want, [2]string{u, m}, line)
	}
}

func FuzzCgroupFiles(f *testing.F) {
	for _, s := range []string{"0::/a.service", "4:memory:/x", "oom_kill 3\n", "low 0\noom_kill -1\n", "oom_kill 99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		u, m := cgroupLine(s)
		for _, p := range []string{u, m} {
			if p != "" && (!strings.HasPrefix(p, "/") || filepath.Clean(p) != p) {
				t.Fatalf("path %q from %q", p, s)
			}
		}
		if n := oomKillsIn([]byte(s)); n < 0 {
			t.Fatalf("negative count %d from %q", n, s)
		}
	})
}
