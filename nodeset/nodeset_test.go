package nodeset

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func groups(m map[string][]string) Groups {
	return func(name string) ([]string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

func TestExpand(t *testing.T) {
	g := groups(map[string][]string{
		"lab":  {"lab-[1-3]", "gw-2"},
		"all":  {"@lab", "db1"},
		"loop": {"@loop"},
	})
	for _, tc := range []struct {
		expr string
		want string // hosts joined by spaces, or "error: ..." (a part of the message)
	}{
		{"lab-1", "lab-1"},
		{"lab-1,lab-2", "lab-1 lab-2"},
		{" lab-1 , lab-2 ", "lab-1 lab-2"},
		{"lab-[1-3,7,10-12]", "lab-1 lab-2 lab-3 lab-7 lab-10 lab-11 lab-12"},
		{"node[01-10]", "node01 node02 node03 node04 node05 node06 node07 node08 node09 node10"},
		{"node[8-11]", "node8 node9 node10 node11"},
		{"r[1-2]-n[1-2]", "r1-n1 r1-n2 r2-n1 r2-n2"},
		{"a[1-9/4]", "a1 a5 a9"},
		{"lab-1,lab-1,lab-[1-2]", "lab-1 lab-2"},
		{"@lab", "lab-1 lab-2 lab-3 gw-2"},
		{"@all,x", "lab-1 lab-2 lab-3 gw-2 db1 x"},
		{"@nope", "error: no group @nope"},
		{"@loop", "error: nest deeper"},
		{"lab-[1-3", "error: without its ]"},
		{"lab-1]", "error: without its ["},
		{"lab-[[1]]", "error: brackets inside brackets"},
		{"lab-[3-1]", "error: runs backwards"},
		{"lab-[a-b]", "error: not a number"},
		{"lab-[]", "error: needs numbers"},
		{"lab-[1-2/0]", "error: a step"},
		{"a,,b", "error: an empty item"},
		{"", "error: an empty item"},
		{"n[1-1000000]", "error: more than 1000 hosts"},
		{"n[1-999999999]", "error: more than 1000 hosts"},
		{"n[1-1000000000]", "error: more than 9 digits"},
		{"a[1-100]-b[1-100]", "error: more than 1000 hosts"},
		{"n[1-600],m[1-600]", "error: more than 1000 hosts"},
		{"n[1-1000],gw", "error: more than 1000 hosts"}, // a plain name counts too
		{"n[1-999],gw", ""},
	} {
		t.Run(tc.expr, func(t *testing.T) {
			hosts, err := Expand(tc.expr, 1000, g)
			if want, isErr := strings.CutPrefix(tc.want, "error: "); isErr {
				require.Error(t, err, "%v", hosts)
				assert.Contains(t, err.Error(), want)
				return
			}
			require.NoError(t, err)
			if tc.want == "" {
				assert.Len(t, hosts, 1000)
				return
			}
			assert.Equal(t, tc.want, strings.Join(hosts, " "))
		})
	}
	_, err := Expand("@lab", 10, nil)
	assert.ErrorContains(t, err, "no groups are defined")
}

func TestFold(t *testing.T) {
	for _, tc := range []struct{ hosts, want string }{
		{"lab-1 lab-2 lab-3 lab-7", "lab-[1-3,7]"},
		{"lab-7 lab-3 lab-1 lab-2 lab-10 lab-11 lab-12", "lab-[1-3,7,10-12]"},
		{"node01 node02 node10", "node[01-02,10]"},
		{"node1 node01", "node01,node1"},
		{"gw-2 lab-1 lab-2", "gw-2,lab-[1-2]"},
		{"db lab-1 db", "db,lab-1"},
		{"r1-n1 r1-n2 r2-n1", "r1-n[1-2],r2-n1"},
		{"a", "a"},
		{"", ""},
	} {
		t.Run(tc.hosts, func(t *testing.T) {
			assert.Equal(t, tc.want, Fold(strings.Fields(tc.hosts)))
		})
	}
}

func TestLess(t *testing.T) {
	hs := []string{"lab-10", "lab-2", "gw", "lab-1"}
	sort.Slice(hs, func(i, j int) bool { return Less(hs[i], hs[j]) })
	assert.Equal(t, []string{"gw", "lab-1", "lab-2", "lab-10"}, hs)
}

var hostChars = regexp.MustCompile(`^[A-Za-z0-9._-]{1,40}$`)

// FuzzExpand: any input expands within its bound or is refused, never
// panics; what it gives folds into an expression that expands to the
// same set.
func FuzzExpand(f *testing.F) {
	for _, s := range []string{"lab-[1-3,7,10-12]", "node[01-10],gw", "@g", "a[1-2]b[3-4]", "x[1-9/3]", "[", "a,,", "n[0-0]", "n00,n0,n000", "0[1-500]8,00000"} {
		f.Add(s)
	}
	g := groups(map[string][]string{"g": {"g[1-3]", "@g"}, "h": {"h1"}})
	f.Fuzz(func(t *testing.T, expr string) {
		hosts, err := Expand(expr, 500, g)
		if err != nil {
			return
		}
		if len(hosts) > 500 {
			t.Fatalf("%q gave %d hosts, over the bound", expr, len(hosts))
		}
		var valid []string
		for _, h := range hosts {
			if hostChars.MatchString(h) {
				valid = append(valid, h)
			}
		}
		if len(valid) == 0 {
			return
		}
		folded := Fold(valid)
		back, err := Expand(folded, 500, nil)
		if err != nil {
			t.Fatalf("Fold(%q) = %q does not expand: %v", valid, folded, err)
		}
		sort.Strings(back)
		want := append([]string(nil), valid...)
		sort.Strings(want)
		want = slices.Compact(want)
		if strings.Join(back, " ") != strings.Join(want, " ") {
			t.Fatalf("Fold(%q) = %q expands to %q", want, folded, back)
		}
	})
}

// Groups that name groups many times over, down to ones with no host, are
// refused once they have been named maxRefs times, not expanded for a time
// that grows as a power of the depth.
func TestGroupsNamedTooOften(t *testing.T) {
	m := map[string][]string{"g7": {}}
	for i := 6; i >= 0; i-- {
		m[fmt.Sprintf("g%d", i)] = slices.Repeat([]string{fmt.Sprintf("@g%d", i+1)}, 40)
	}
	t0 := time.Now()
	_, err := Expand("@g0", 1000, groups(m))
	assert.ErrorContains(t, err, "named more than 10000 times")
	assert.Less(t, time.Since(t0), 2*time.Second)
	// A wide group of groups is fine.
	hosts, err := Expand("@g6", 1000, groups(map[string][]string{"g6": slices.Repeat([]string{"@g7"}, 40), "g7": {"h1", "h2"}}))
	require.NoError(t, err)
	assert.Equal(t, []string{"h1", "h2"}, hosts)
}
