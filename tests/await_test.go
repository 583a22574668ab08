package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
)

// Top-level await, on every Python 3.8+ found: a session's event loop
// lives between cells, so a task a cell starts goes on printing while no
// cell runs; interrupt cancels a cell that awaits, and stops one stuck in
// synchronous code; await inside a function and cells that do not await
// work as before.
func TestAwait(t *testing.T) {
	t.Parallel()
	ps := hubtest.Pythons()
	e := hubtest.Start(t)
	found := 0
	for minor := 8; minor <= 13; minor++ {
		v := fmt.Sprintf("3.%d", minor)
		py, ok := ps[v]
		if !ok {
			continue
		}
		found++
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			name := "aw" + strings.ReplaceAll(v, ".", "")
			run := func(code string, args ...string) hubtest.Result {
				t.Helper()
				return e.Run(append([]string{"exec", name, code, "--python", py}, args...)...)
			}
			r := run(`import asyncio, time
n = 0
async def tick():
    global n
    while True:
        n += 1
        print("tick", n, flush=True)
        await asyncio.sleep(0.1)
task = asyncio.ensure_future(tick())
await asyncio.sleep(0.05)`)
			// The whole cell ran on the loop: the task too.
			require.Equal(t, 0, r.Code, "%s", r)
			assert.Contains(t, r.Stdout, "tick 1\n")
			assert.NotContains(t, r.Stdout, "Warning", "%s", r)
			time.Sleep(600 * time.Millisecond)
			// The task ran between cells, and its output comes now.
			r = run("x = 1")
			require.Equal(t, 0, r.Code, "%s", r)
			assert.Contains(t, r.Stdout, "tick 4\n", "%s", r)
			r = run("n > 4, x")
			assert.Contains(t, r.Stdout, "Out[3]: (True, 1)", "%s", r)

			// Await inside a function, and asyncio.run in a cell, as before.
			r = run("async def f(k):\n    await asyncio.sleep(0)\n    return k * 2\nawait f(21)")
			assert.Contains(t, r.Stdout, "Out[4]: 42", "%s", r)
			r = run("asyncio.run(f(4)) if not task.done() else None")
			assert.Contains(t, r.Stdout, "Out[5]: 8", "%s", r)

			// Interrupt cancels a cell that awaits; the loop and its task go on.
			r = run("await asyncio.sleep(60)", "--no-wait")
			require.Equal(t, 0, r.Code, "%s", r)
			time.Sleep(300 * time.Millisecond)
			r = e.Run("interrupt", name)
			require.Equal(t, 0, r.Code, "%s", r)
			r = e.Run("wait", name, "-t", "20")
			assert.Equal(t, 1, r.Code, "%s", r)
			assert.Contains(t, r.Stdout, "KeyboardInterrupt", "%s", r)
			assert.NotContains(t, r.Stdout, "CancelledError", "%s", r)
			// KeyboardInterrupt stops one stuck in synchronous code.
			r = run("await asyncio.sleep(0)\ntime.sleep(60)", "--no-wait")
			time.Sleep(300 * time.Millisecond)
			e.Run("interrupt", name)
			r = e.Run("wait", name, "-t", "20")
			assert.Equal(t, 1, r.Code, "%s", r)
			assert.Regexp(t, `File "<cell-7>", line 2, in <module>\n    time.sleep\(60\)\n(.*\n)?KeyboardInterrupt\n`, r.Stdout)
			r = run("before = n; await asyncio.sleep(0.35); (n > before, task.done())")
			assert.Contains(t, r.Stdout, "Out[8]: (True, False)", "%s", r)
			// An error in a cell that awaits shows the cell's frames only.
			r = run("async def g():\n    1/0\nawait g()")
			assert.Equal(t, 1, r.Code, "%s", r)
			assert.Contains(t, r.Stdout, "Traceback (most recent call last):\n  File \"<cell-9>\", line 3, in <module>\n", "%s", r)
			assert.NotContains(t, r.Stdout, "asyncio", "%s", r)
			// A query pauses the loop: no task's step runs beside it.
			r = run("class Probe:\n    def __repr__(self):\n        before = n\n        time.sleep(0.3)\n        self.delta = n - before\n        return 'probe'\np = Probe()")
			require.Equal(t, 0, r.Code, "%s", r)
			r = e.Run("inspect", name, "p")
			assert.Contains(t, r.Stdout, "probe", "%s", r)
			r = run("p.delta, n > before")
			assert.Contains(t, r.Stdout, "Out[11]: (0, True)", "%s", r)
			// A task that runs is a background job: swap leaves the session be.
			r = e.Run("swap", name)
			assert.Equal(t, 2, r.Code, "%s", r)
			assert.Contains(t, r.Stdout+r.Stderr, "a background job runs: asyncio task 'Task-2'", "%s", r)
			r = run("task.cancel()")
			assert.Contains(t, r.Stdout, "Out[12]: True", "%s", r)

			// A task that ignores the cancel: a second interrupt ends the
			// cell, and the task unwinds as the loop runs on.
			r = run("async def stubborn():\n    try:\n        await asyncio.sleep(60)\n    except asyncio.CancelledError:\n        print('ignored', flush=True)\n        try:\n            await asyncio.sleep(60)\n        finally:\n            print('unwound', flush=True)\nawait stubborn()", "--no-wait")
			require.Equal(t, 0, r.Code, "%s", r)
			time.Sleep(300 * time.Millisecond)
			e.Run("interrupt", name)
			time.Sleep(300 * time.Millisecond)
			e.Run("interrupt", name)
			r = e.Run("wait", name, "-t", "20")
			assert.Equal(t, 1, r.Code, "%s", r)
			assert.Regexp(t, `ignored\n(.*\n)*KeyboardInterrupt\n`, r.Stdout)
			assert.NotContains(t, r.Stdout, "base_events", "%s", r)
			r = run("await asyncio.sleep(0.05); 5")
			assert.Contains(t, r.Stdout+r.Stderr, "unwound", "%s", r)
			assert.Contains(t, r.Stdout, "Out[14]: 5", "%s", r)
		})
	}
	if found == 0 {
		t.Skip("no Python 3.8 or newer")
	}
}

// Python 3.6 and 3.7 have no top-level await: one line says so.
func TestAwaitTooOld(t *testing.T) {
	t.Parallel()
	ps := hubtest.Pythons()
	e := hubtest.Start(t)
	for _, v := range []string{"3.6", "3.7"} {
		py, ok := ps[v]
		if !ok {
			continue
		}
		r := e.Run("exec", "old"+v[2:], "import asyncio\nawait asyncio.sleep(0)", "--python", py)
		assert.Equal(t, 1, r.Code, "%s", r)
		assert.Regexp(t, `\]\nSyntaxError: top-level await needs Python 3\.8 or newer and this session runs `+v+`: put the code in an async def main\(\) and run asyncio\.get_event_loop\(\)\.run_until_complete\(main\(\)\)\n$`, r.Stdout)
		// An await inside a function is fine there.
		r = e.Run("exec", "old"+v[2:], "import asyncio\nasync def f():\n    await asyncio.sleep(0)\n    return 3\nasyncio.get_event_loop().run_until_complete(f())")
		assert.Equal(t, "Out[2]: 3\n", r.Stdout, "%s", r)
	}
}

// An interrupt that lands while another task's step runs cancels the
// cell that awaits, not that task: a task whose steps are long (here
// 0.2 s of synchronous work each) is where a plain KeyboardInterrupt
// would almost always land, and it goes on.
func TestAwaitInterruptSparesOtherTasks(t *testing.T) {
	t.Parallel()
	newer, _ := hubtest.PickPythons(t)
	e := hubtest.Start(t)
	run := func(code string, args ...string) hubtest.Result {
		t.Helper()
		return e.Run(append([]string{"exec", "spare", code, "--python", newer}, args...)...)
	}
	r := run(`import asyncio, time
steps = 0
async def churn():
    global steps
    while True:
        time.sleep(0.2)
        steps += 1
        await asyncio.sleep(0)
bg = asyncio.ensure_future(churn())
await asyncio.sleep(0)`)
	require.Equal(t, 0, r.Code, "%s", r)
	r = run("await asyncio.sleep(60)", "--no-wait")
	require.Equal(t, 0, r.Code, "%s", r)
	time.Sleep(500 * time.Millisecond)
	r = e.Run("interrupt", "spare")
	require.Equal(t, 0, r.Code, "%s", r)
	r = e.Run("wait", "spare", "-t", "20")
	assert.Equal(t, 1, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "KeyboardInterrupt", "%s", r)
	r = run("before = steps; await asyncio.sleep(0.5); bg.done(), steps > before")
	assert.Contains(t, r.Stdout, "Out[3]: (False, True)", "%s", r)
	r = run("bg.cancel()")
	assert.Contains(t, r.Stdout, "Out[4]: True", "%s", r)
}
