package hub

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A process's tree holds the children each of its threads started, and
// theirs: here, this test's own, started from goroutines locked to
// threads of their own, one of them a shell with a child of its own.
func TestProcTreeFindsEveryThreadsChildren(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc")
	}
	var mu sync.Mutex
	var started []*exec.Cmd
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			runtime.LockOSThread() // the thread ends with the goroutine; its child stays
			cmd := exec.Command("sleep", "30")
			if i == 0 {
				cmd = exec.Command("sh", "-c", "sleep 30 & wait")
			}
			require.NoError(t, cmd.Start())
			mu.Lock()
			started = append(started, cmd)
			mu.Unlock()
		}(i)
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range started {
			c.Process.Kill()
			c.Wait()
		}
	})
	var shell *exec.Cmd
	for _, c := range started {
		if c.Path != "" && filepath.Base(c.Path) == "sh" {
			shell = c
		}
	}
	require.NotNil(t, shell)
	var r procReader
	for i := 0; i < 200 && len(r.children(shell.Process.Pid)) == 0; i++ {
		time.Sleep(10 * time.Millisecond) // the shell starts its sleep
	}
	tree := r.tree(os.Getpid())
	assert.Equal(t, os.Getpid(), tree[0])
	for _, c := range started {
		assert.Contains(t, tree, c.Process.Pid)
	}
	grand := r.children(shell.Process.Pid)
	require.Len(t, grand, 1, "the shell's sleep")
	assert.Contains(t, tree, grand[0])
	// Other tests of the package start and end processes meanwhile: the
	// two ways are compared on one look that nothing changed under.
	var want, got []int
	for i := 0; i < 50; i++ {
		want, got = oldTree(os.Getpid()), slices.Sorted(slices.Values(r.tree(os.Getpid())))
		if slices.Equal(want, got) && slices.Equal(want, oldTree(os.Getpid())) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	assert.Equal(t, want, got, "as Glob and ReadFile find it")

	var sum int64
	for _, p := range tree {
		rss := procRSS(p)
		assert.Greater(t, rss, int64(0), "pid %d", p)
		sum += rss
	}
	assert.InDelta(t, sum, treeRSS(os.Getpid()), float64(sum)/10, "this process's pages move")
	assert.Zero(t, treeRSS(1<<30), "no such process")
}

// oldTree walks /proc with Glob and ReadFile, as a model.
func oldTree(pid int) []int {
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(out[i]) + "/task/*/children")
		for _, task := range tasks {
			b, _ := os.ReadFile(task)
			for _, f := range strings.Fields(string(b)) {
				n, _ := strconv.Atoi(f)
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}

func TestStatmRSS(t *testing.T) {
	for in, want := range map[string]int64{
		"2765 1224 896 1 0 342 0\n": 1224,
		"1 2":                       2,
		"1 ":                        0,
		"":                          0,
		"123":                       0,
		"1 x 3":                     0,
		"1 99999999999999999999999": 999999999999999999,
	} {
		assert.Equal(t, want, statmRSS([]byte(in)), "%q", in)
	}
}

// A children file's pids are read as the numbers between any other bytes
// (the kernel writes them apart with blanks), whatever the bytes.
func FuzzAppendPids(f *testing.F) {
	for _, s := range []string{"", "12 34 ", "1", " 7\n8\t9 ", "x1 2y", "99999999999", "\xff1\xe92"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want []int
		for _, w := range strings.FieldsFunc(string(b), func(r rune) bool { return r < '0' || r > '9' }) {
			if len(w) > 12 {
				return // past the bound on a number, which the kernel's never reach
			}
			n, err := strconv.Atoi(w)
			require.NoError(t, err)
			want = append(want, n)
		}
		assert.Equal(t, want, appendPids(nil, b))
	})
}
