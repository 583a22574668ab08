package boot

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/proto"
)

// texts is a piece of a worker's output: merged, and each stream.
type texts struct{ all, stdout, stderr string }

// add appends s, which came on stdout or on stderr.
func (t *texts) add(stdout bool, s string) {
	t.all += s
	if stdout {
		t.stdout += s
	} else {
		t.stderr += s
	}
}

// split takes a worker's raw output apart as the hub does.
func split(token string, raw []byte) texts {
	var t texts
	emit := func(stdout bool, b []byte) { t.add(stdout, string(b)) }
	d := proto.NewSplitter(token)
	d.Split(raw, emit)
	d.Flush(emit)
	return t
}

// cellTexts runs code as the worker's next cell and returns its output,
// cut at the fences before and after it, as the hub cuts it.
func (w *worker) cellTexts(code string) (frame, texts) {
	w.t.Helper()
	done := w.run(code, 30*time.Second)
	fence := fmt.Sprintf("<F%d>", w.cell)
	before := fmt.Sprintf("<F%d>", w.cell-1)
	var raw string
	deadline := time.Now().Add(10 * time.Second)
	for {
		raw = w.out.String()
		if strings.Contains(raw, fence) || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	var t texts
	in := w.cell == 1
	keep := func(stdout bool, s string) {
		if in && s != "" {
			t.add(stdout, s)
		}
	}
	emit := func(stdout bool, b []byte) {
		s := string(b)
		for stdout {
			i, j := strings.Index(s, before), strings.Index(s, fence)
			if i < 0 && j < 0 {
				break
			}
			if i >= 0 && (j < 0 || i < j) {
				keep(true, s[:i])
				in, s = true, s[i+len(before):]
			} else {
				keep(true, s[:j])
				in, s = false, s[j+len(fence):]
			}
		}
		keep(stdout, s)
	}
	d := proto.NewSplitter(w.ready.str("streams"))
	d.Split([]byte(raw), emit)
	require.Contains(w.t, raw, fence, "the cell's fence")
	return done, t
}

// A cell's stdout and stderr come apart in the output stream, Python's
// writes to both in the order made, each stream exact; a child's and C
// code's land in their own stream; the cell's value and its exception
// are in neither.
func TestStreamsApart(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py, "--streams", "0123456789abcdef")
		require.Equal(t, "0123456789abcdef", w.ready.str("streams"))

		_, got := w.cellTexts("import sys, os, subprocess, traceback, threading\n" +
			"for i in range(3):\n    print('o%d' % i)\n    print('e%d' % i, file=sys.stderr)\n" +
			"sys.stderr.write('w\\n'); print('p')")
		assert.Equal(t, "o0\ne0\no1\ne1\no2\ne2\nw\np\n", got.all)
		assert.Equal(t, "o0\no1\no2\np\n", got.stdout)
		assert.Equal(t, "e0\ne1\ne2\nw\n", got.stderr)

		// fd-level writes from this process, between Python's.
		_, got = w.cellTexts("print('a'); os.write(1, b'b\\n'); print('c'); os.write(2, b'd\\n'); print('e')")
		assert.Equal(t, "a\nb\nc\ne\n", got.stdout)
		assert.Equal(t, "d\n", got.stderr)
		assert.Equal(t, "a\nb\nc\n", got.all[:6], "Python's and fd 1's writes in order")

		// A child process writes to both.
		_, got = w.cellTexts("print('before'); subprocess.run([sys.executable, '-c', " +
			"'import sys; sys.stdout.write(\"child out\\\\n\"); sys.stdout.flush(); sys.stderr.write(\"child err\\\\n\")']); print('after')")
		assert.Equal(t, "before\nchild out\nafter\n", got.stdout)
		assert.Equal(t, "child err\n", got.stderr)

		// Tracebacks Python prints go to stderr.
		_, got = w.cellTexts("try:\n    1/0\nexcept Exception:\n    traceback.print_exc()\n" +
			"t = threading.Thread(target=lambda: {}['k']); t.start(); t.join()")
		assert.Contains(t, got.stderr, "ZeroDivisionError")
		assert.Contains(t, got.stderr, "KeyError: 'k'")
		assert.Empty(t, got.stdout)

		// The value and the cell's exception are in the done frame only.
		done, got := w.cellTexts("print('x'); 6 * 7")
		assert.Equal(t, "42", done.str("value"))
		assert.Equal(t, texts{"x\n", "x\n", ""}, got)
		done, got = w.cellTexts("print('y'); {}['missing']")
		assert.Equal(t, "KeyError", done.errType())
		assert.Equal(t, texts{"y\n", "y\n", ""}, got)

		// More than a pipe holds, in both, in big writes and small.
		done, got = w.cellTexts("big = 'x' * 200000\nprint(big); sys.stderr.write('E' * 70000); print('tail')\n" +
			"for i in range(2000):\n    print(i); print(i, file=sys.stderr)")
		require.Equal(t, "ok", done.str("status"), "%s", done.line)
		var wantOut, wantErr, wantAll strings.Builder
		wantOut.WriteString(strings.Repeat("x", 200000) + "\ntail\n")
		wantErr.WriteString(strings.Repeat("E", 70000))
		wantAll.WriteString(strings.Repeat("x", 200000) + "\n" + strings.Repeat("E", 70000) + "tail\n")
		for i := 0; i < 2000; i++ {
			fmt.Fprintf(&wantOut, "%d\n", i)
			fmt.Fprintf(&wantErr, "%d\n", i)
			fmt.Fprintf(&wantAll, "%d\n%d\n", i, i)
		}
		assert.True(t, wantOut.String() == got.stdout, "stdout differs")
		assert.True(t, wantErr.String() == got.stderr, "stderr differs")
		assert.True(t, wantAll.String() == got.all, "merged output differs")

		// fd 1 pointed elsewhere takes fd 1's writes with it, not print's
		// (as in a Jupyter kernel); the fence still comes.
		done, got = w.cellTexts("saved = os.dup(1); f = open('redirected.txt', 'w'); os.dup2(f.fileno(), 1)\n" +
			"print('still shown'); os.write(1, b'to the file\\n'); sys.stderr.write('err\\n')\n" +
			"os.dup2(saved, 1); os.close(saved); f.close()\nprint(open('redirected.txt').read().strip())")
		require.Equal(t, "ok", done.str("status"), "%s", done.line)
		assert.Equal(t, texts{"still shown\nerr\nto the file\n", "still shown\nto the file\n", "err\n"}, got)
	})
}

// A cell after which nothing went out since the last fence writes none,
// and its done frame says quiet; output between cells, and a cell's own,
// bring the fence back, after that output.
func TestQuietCellWritesNoFence(t *testing.T) {
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		out := func(s string) int {
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(w.out.String(), s) && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			require.Contains(t, w.out.String(), s)
			return strings.Index(w.out.String(), s)
		}
		done := w.run("x = 1", 20*time.Second)
		assert.Nil(t, done.h["quiet"], "the first cell fences: %s", done.line)
		out("<F1>")

		done = w.run("x + 1", 20*time.Second)
		assert.Equal(t, true, done.h["quiet"], "%s", done.line)
		assert.Equal(t, "2", done.str("value"))

		// A thread prints after its cell ended: the next cell fences,
		// after that output.
		w.run("import threading; threading.Timer(0.2, lambda: print('late')).start()", 20*time.Second)
		late := out("late")
		done = w.run("x", 20*time.Second)
		assert.Nil(t, done.h["quiet"], "%s", done.line)
		assert.Greater(t, out("<F4>"), late)

		done = w.run("print('own')", 20*time.Second)
		assert.Nil(t, done.h["quiet"], "%s", done.line)
		assert.Greater(t, out("<F5>"), out("own"))
		assert.NotContains(t, w.out.String(), "<F2>")
	})
}

// What a cell wrote to fd 1 is all before its fence, even where the pipe
// holds more than one read of it (a cell grew it; a kernel with 64 KiB
// pages makes every pipe 1 MiB): the rest was the next cell's.
func TestFenceAfterAllOfABigPipe(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("F_SETPIPE_SZ is Linux's")
	}
	eachPython(t, func(t *testing.T, py string) {
		w := startWorker(t, py)
		w.run("import os, fcntl", 20*time.Second)
		w.run("fcntl.fcntl(1, 1031, 1 << 20); os.write(1, b'x' * 500000)", 20*time.Second)
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(w.out.String(), "<F2>") && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		s := w.out.String()
		i := strings.Index(s, "<F2>")
		require.GreaterOrEqual(t, i, 0)
		assert.Equal(t, 500000, strings.Count(s[:i], "x"))
	})
}
