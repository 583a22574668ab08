package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/wire"
)

// chaosSeed is the chaos test's seed; REPLHUB_CHAOS_SEED replays another.
const chaosSeed = 20261207

// chaosBound is the longest any one CLI call may take, a hub killed under
// it included: more means something wedged.
const chaosBound = 30 * time.Second

// chaosWorld is the state of the chaos test's sessions as its calls saw
// it: the ids of the counting cells each session must have run (their
// exec answered), may have run (their call met the hub's death), and the
// queued cells the CLI said it queued, by number.
type chaosWorld struct {
	t   *testing.T
	e   *hubtest.Env
	dir string

	mu     sync.Mutex
	id     int
	sure   map[string][]int         // session → ids that ran
	maybe  map[string][]int         // session → ids that may have run
	queued map[string]map[int]int   // session → cell → id
	lost   map[string]map[int]bool  // session → ids reported lost
	calls  []string                 // the calls of the round, for a failure's log
	shown  map[string]string        // session → what its replies showed
	lastOf map[string]time.Duration // the slowest call of each kind
}

var chaosSessions = []string{"a", "b", "c"}

// run runs the CLI and fails the test when the call took longer than
// chaosBound.
func (w *chaosWorld) run(args ...string) hubtest.Result {
	w.t.Helper()
	start := time.Now()
	r := w.e.Run(args...)
	d := time.Since(start)
	w.mu.Lock()
	if args[0] == "exec" || args[0] == "wait" {
		w.shown[args[1]] += r.Stdout
	}
	call := fmt.Sprintf("%s %q: exit %d in %s", start.Format("15:04:05.000"), args, r.Code, d.Round(time.Millisecond))
	if r.Code != 0 {
		call += fmt.Sprintf(": %.300q %.300q", r.Stdout, r.Stderr)
	}
	w.calls = append(w.calls, call)
	if d > w.lastOf[args[0]] {
		w.lastOf[args[0]] = d
	}
	w.mu.Unlock()
	assert.Less(w.t, d, chaosBound, "%q wedged: %s", args, r)
	return r
}

func (w *chaosWorld) nextID() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.id++
	return w.id
}

// countCell is a cell that counts itself: a second run shows in n and ran.
func countCell(id int, sleep float64) string {
	return fmt.Sprintf("time.sleep(%g); ran.append(%d); n += 1; print('ran', %d)", sleep, id, id)
}

var queuedRe = regexp.MustCompile(`\[cell (\d+) (queued|started)`)

// op does one random thing to session name.
func (w *chaosWorld) op(rng *rand.Rand, name string) {
	t := w.t
	other := chaosSessions[(slices.Index(chaosSessions, name)+1)%len(chaosSessions)]
	switch k := rng.IntN(12); {
	case k < 3: // a counting cell
		id := w.nextID()
		r := w.run("exec", name, countCell(id, rng.Float64()*0.2), "-t", "20")
		w.note(name, id, r.Code == 0)
		if r.Code == 0 {
			assert.Contains(t, r.Stdout, fmt.Sprintf("ran %d\n", id), "%s", r)
		}
	case k < 6: // a queued counting cell, not waited for
		id := w.nextID()
		r := w.run("exec", name, countCell(id, rng.Float64()*0.3), "--queue", "--no-wait")
		w.note(name, id, false)
		if m := queuedRe.FindStringSubmatch(r.Stdout); r.Code == 0 && m != nil {
			cell, _ := strconv.Atoi(m[1])
			w.mu.Lock()
			w.queued[name][cell] = id
			w.mu.Unlock()
		}
	case k < 7: // an object to the next session and back
		id := w.nextID()
		r := w.run("exec", name, fmt.Sprintf("o = session(%q); o.put(p%d=%d); o.get('p%d')", other, id, id, id), "-t", "20")
		if r.Code == 0 {
			assert.Regexp(t, fmt.Sprintf(`Out\[\d+\]: %d\n`, id), r.Stdout)
		}
	case k < 8: // a file pushed
		id := w.nextID()
		src := filepath.Join(w.dir, fmt.Sprintf("src-%d", id))
		dest := filepath.Join(w.dir, fmt.Sprintf("dest-%d", id))
		body := bytes.Repeat([]byte(fmt.Sprintf("%d\n", id)), 1+rng.IntN(200000))
		require.NoError(t, os.WriteFile(src, body, 0o600))
		r := w.run("push", name, src, dest)
		if r.Code == 0 {
			got, err := os.ReadFile(dest)
			assert.NoError(t, err)
			assert.True(t, bytes.Equal(got, body), "pushed file %s whole", dest)
		}
	case k < 9: // a swap, restored by the next exec
		w.run("swap", name)
	case k < 10: // a run: a private session of its own, started and ended
		r := w.run("run", "print('run'); 6 * 7")
		if r.Code == 0 {
			assert.Contains(t, r.Stdout, "42")
		}
	case k < 11 && rng.IntN(3) == 0: // now and then a restart
		w.run("restart")
	default: // a plain print
		r := w.run("exec", name, "print('hello'); 1 + 1", "-t", "20")
		if r.Code == 0 {
			assert.Contains(t, r.Stdout, "hello")
		}
	}
}

func (w *chaosWorld) note(name string, id int, sure bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if sure {
		w.sure[name] = append(w.sure[name], id)
	} else {
		w.maybe[name] = append(w.maybe[name], id)
	}
}

// check holds the invariants once the hub is gone: the next call starts a
// hub that has every session, live or swapped; every cell the CLI said it
// queued ran once or is said to be lost; no counting cell ran twice, and
// each whose exec answered ran.
func (w *chaosWorld) check(round int) {
	t := w.t
	t.Helper()
	r := w.run("sessions", "--json")
	require.Equal(t, 0, r.Code, "round %d: %s", round, r)
	var l wire.SessionList
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &l), "%s", r)
	assert.Empty(t, l.Dead, "round %d: no session lost: %s", round, r.Stdout)
	// No worker that no session has, no file half pushed.
	var pids []int
	for _, s := range l.Sessions {
		pids = append(pids, s.Pid)
	}
	slices.Sort(pids)
	for i := 0; i < 50 && !slices.Equal(pids, workerPids(w.e)); i++ {
		time.Sleep(100 * time.Millisecond) // a run's worker may be ending
	}
	assert.Equal(t, pids, workerPids(w.e), "round %d: a worker for each session, no other", round)
	parts, _ := filepath.Glob(filepath.Join(w.dir, "*.replhub-part"))
	assert.Empty(t, parts, "round %d", round)
	for _, name := range chaosSessions {
		live := liveOf(l, name) != nil
		swapped := slices.ContainsFunc(l.Swapped, func(s wire.SwappedInfo) bool { return s.Name == name })
		assert.True(t, live || swapped, "round %d: %s live or swapped: %s", round, name, r.Stdout)
	}
	for _, name := range chaosSessions {
		w.mu.Lock()
		cells := make([]int, 0, len(w.queued[name]))
		for c := range w.queued[name] {
			cells = append(cells, c)
		}
		w.mu.Unlock()
		slices.Sort(cells)
		for _, c := range cells {
			id := w.queued[name][c]
			r := w.run("wait", name, "--cell", strconv.Itoa(c), "-t", "20")
			if strings.Contains(r.Stderr, "is swapped to disk") {
				// Restored, with its unread results.
				w.run("exec", name, "None")
				r = w.run("wait", name, "--cell", strconv.Itoa(c), "-t", "20")
			}
			switch {
			case r.Code == 0:
				assert.Contains(t, r.Stdout, fmt.Sprintf("ran %d\n", id), "round %d: %s cell %d: %s", round, name, c, r)
				w.note(name, id, true)
			case strings.Contains(r.Stderr, "never ran"):
				w.lost[name][id] = true
			case strings.Contains(r.Stderr, "collected already"):
				// By a reply that showed what nobody had read: a restore's,
				// which a cell's session() in another session may have made.
				w.mu.Lock()
				all := strings.Join(slices.Collect(maps.Values(w.shown)), "\n")
				assert.Regexp(t, fmt.Sprintf(`\bran %d\b`, id), all, "round %d: %s cell %d: %s", round, name, c, r)
				w.mu.Unlock()
			case strings.Contains(r.Stderr, "went with that hub"):
				// It ran, or it is among the lost: its result is gone.
			default:
				t.Errorf("round %d: session %s's queued cell %d (id %d) neither ran nor is said lost: %s", round, name, c, id, r)
			}
			delete(w.queued[name], c)
		}
		// The session's count, once what runs in it ended.
		var res wire.Result
		for try := 0; ; try++ {
			r := w.run("exec", name, "import json; print(json.dumps([n, ran]))", "--json", "-t", "20")
			require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res), "round %d: %s", round, r)
			if res.Status != wire.StatusOK && try < 50 {
				time.Sleep(200 * time.Millisecond)
				continue
			}
			break
		}
		require.Equal(t, wire.StatusOK, res.Status, "round %d: %s: %+v", round, name, res)
		lines := strings.Split(strings.TrimSpace(res.Stdout), "\n")
		var got []json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(lines[len(lines)-1]), &got), "%+v", res)
		var n int
		var ran []int
		require.NoError(t, json.Unmarshal(got[0], &n))
		require.NoError(t, json.Unmarshal(got[1], &ran))
		assert.Equal(t, len(ran), n, "round %d: session %s: n counts the cells that ran", round, name)
		seen := map[int]bool{}
		w.mu.Lock()
		for _, id := range ran {
			assert.False(t, seen[id], "round %d: session %s ran cell id %d twice: %v", round, name, id, ran)
			seen[id] = true
			assert.False(t, w.lost[name][id], "round %d: session %s ran cell id %d, said lost", round, name, id)
			assert.True(t, slices.Contains(w.sure[name], id) || slices.Contains(w.maybe[name], id), "round %d: session %s ran id %d, never sent to it", round, name, id)
		}
		for _, id := range w.sure[name] {
			assert.True(t, seen[id], "round %d: session %s: cell id %d answered as run, but did not run: %v", round, name, id, ran)
		}
		w.mu.Unlock()
	}
}

// A hub SIGKILLed at random moments loses no session: each next hub
// (started by the next CLI call) adopts every worker; no cell runs twice;
// every cell the CLI said was queued runs once or is reported lost; no
// call wedges. Some rounds kill the next hub while it adopts, or race two
// CLI calls to start it. The seed is in the log; REPLHUB_CHAOS_SEED
// replays another.
func TestChaosHubKilled(t *testing.T) {
	t.Parallel()
	seed := uint64(chaosSeed)
	if s := os.Getenv("REPLHUB_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = v
	}
	t.Logf("chaos seed %d (REPLHUB_CHAOS_SEED=%d replays it)", seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	e := hubtest.Start(t)
	w := &chaosWorld{t: t, e: e, dir: t.TempDir(), sure: map[string][]int{}, maybe: map[string][]int{},
		queued: map[string]map[int]int{}, lost: map[string]map[int]bool{}, lastOf: map[string]time.Duration{}, shown: map[string]string{}}
	for _, name := range chaosSessions {
		ok(t, e.Run("exec", name, "import time; n = 0; ran = []"))
		w.queued[name], w.lost[name] = map[int]int{}, map[int]bool{}
	}
	// Rounds until 25 s are over, at most 20; REPLHUB_CHAOS_ROUNDS asks
	// for that many, however long they take.
	rounds, budget := 20, 25*time.Second
	if s := os.Getenv("REPLHUB_CHAOS_ROUNDS"); s != "" {
		rounds, _ = strconv.Atoi(s)
		budget = time.Hour
	}
	round := 0
	defer func() {
		if t.Failed() {
			w.mu.Lock()
			t.Logf("round %d's calls:\n%s", round, strings.Join(w.calls, "\n"))
			w.mu.Unlock()
		}
	}()
	deadline := time.Now().Add(budget)
	for ; round < rounds && time.Now().Before(deadline); round++ {
		w.mu.Lock()
		w.calls = nil
		w.mu.Unlock()
		kind := rng.IntN(3)
		killAt := time.Duration(rng.IntN(1500)) * time.Millisecond
		var wg sync.WaitGroup
		for _, name := range chaosSessions {
			r := rand.New(rand.NewPCG(rng.Uint64(), 0))
			ops := 3 + r.IntN(6)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range ops {
					w.op(r, name)
				}
			}()
		}
		time.Sleep(killAt)
		killed := killHubs(t, e)
		wg.Wait()
		switch kind {
		case 1: // the next hub killed while it adopts
			cmd := startBackground(t, e, "sessions")
			var pids []int
			for i := 0; i < 500 && len(pids) == 0; i++ {
				pids = hubPids(e)
				time.Sleep(time.Millisecond)
			}
			time.Sleep(time.Duration(rng.IntN(80)) * time.Millisecond)
			// Its pid file is written once it has adopted every worker.
			adopting := len(pids) == 1 && e.HubPid() != pids[0]
			killHubs(t, e)
			cmd.Wait()
			t.Logf("round %d: the next hub killed while it adopted: %v", round, adopting)
		case 2: // two calls race to start the next hub
			a := startBackground(t, e, "sessions", "--json")
			b := startBackground(t, e, "sessions", "--json")
			assert.NoError(t, a.Wait(), "round %d: racing call", round)
			assert.NoError(t, b.Wait(), "round %d: racing call", round)
			assert.Len(t, hubPids(e), 1, "round %d: one hub", round)
		}
		t.Logf("round %d: kind %d, hub killed at %s (%d hubs)", round, kind, killAt, killed)
		w.check(round)
		if t.Failed() {
			return
		}
	}
	t.Logf("slowest calls: %v", w.lastOf)
}
