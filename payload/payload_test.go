package payload

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/boot"
	"github.com/replhub/replhub/proto"
)

// The payload crosses the link before a remote session's first cell: the
// modules a session imports late (the toolkit's helpers, swap, cloudpickle)
// are fetched at their first import instead, and the worker's docstrings
// are blanked. 40 KiB takes 33 ms on a 10 Mbit/s link, a third of a
// millisecond on a gigabit one. The relay travels whole (late modules are
// fetched through its link); it is the next to split when the bound is
// reached again.
func TestPayloadIsSmall(t *testing.T) {
	p, err := Default()
	require.NoError(t, err)
	assert.Less(t, len(p), 40<<10)
	src, ok := Source("replhub_toolkit.files")
	assert.True(t, ok)
	assert.Contains(t, src, "def grep(")
	_, ok = Source("replhub_worker")
	assert.False(t, ok, "what the payload carries is not served late")
}

// The stub reads exactly the payload and leaves what follows on stdin for
// the worker: here, one exec frame, answered after the ready frame.
// Blanking comment lines changes no shipped module's syntax tree, nor
// boot.py's.
func TestBlankCommentsKeepsTheCode(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3")
	}
	mods := maps.Clone(builtin())
	mods["boot.py"] = Module{Src: string(boot.Boot)}
	for name, m := range mods {
		if m.Src == "" || strings.HasPrefix(name, "cloudpickle") {
			continue
		}
		blank := blankComments(m.Src)
		assert.Equal(t, strings.Count(m.Src, "\n"), strings.Count(blank, "\n"), "%s keeps its line numbers", name)
		cmd := exec.Command(py, "-c", "import ast, sys; a, b = sys.stdin.read().split('\\0'); sys.exit(ast.dump(ast.parse(a)) != ast.dump(ast.parse(b)))")
		cmd.Stdin = strings.NewReader(m.Src + "\x00" + blank)
		out, err := cmd.CombinedOutput()
		assert.NoError(t, err, "%s: blanking its comments changed its code\n%s", name, out)
	}
	assert.Equal(t, "# -*- coding: utf-8 -*-\nx = 1\n\n\ny = '# kept'",
		blankComments("# -*- coding: utf-8 -*-\nx = 1\n# gone\n    # gone\ny = '# kept'"))
}

// Blanking the worker's and boot.py's docstrings blanks every one of
// them, keeps their line numbers, and changes nothing else of their
// syntax trees; the relay's keep a user's help.
func TestBlankDocstringsKeepsTheCode(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3")
	}
	const norm = `import ast, sys
a, b = sys.stdin.read().split('\0')
def tree(src):
    t, n = ast.parse(src), 0
    for x in ast.walk(t):
        if isinstance(x, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and x.body and \
                isinstance(x.body[0], ast.Expr):
            v = x.body[0].value
            field = "s" if type(v).__name__ == "Str" else "value"  # ast.Str before 3.8
            if isinstance(getattr(v, field, None), str):
                n += bool(getattr(v, field))
                setattr(v, field, "")
    return ast.dump(t), n
(ta, na), (tb, nb) = tree(a), tree(b)
print(na, nb)
sys.exit(ta != tb)
`
	for name, src := range map[string]string{"worker.py": string(boot.Worker), "boot.py": string(boot.Boot)} {
		blank := blankDocstrings(blankComments(src))
		assert.Equal(t, strings.Count(src, "\n"), strings.Count(blank, "\n"), "%s keeps its line numbers", name)
		cmd := exec.Command(py, "-c", norm)
		cmd.Stdin = strings.NewReader(src + "\x00" + blank)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: blanking its docstrings changed its code\n%s", name, out)
		var had, left int
		_, err = fmt.Sscan(string(out), &had, &left)
		require.NoError(t, err, "%s", out)
		assert.Positive(t, had, name)
		assert.Zero(t, left, "%s: docstrings left", name)
	}
	// The user's display() keeps its help on a host.
	assert.Contains(t, blankDocstrings(blankComments(string(boot.Worker))), "Show each object by its richest representation")

	// The relay's are blanked but for a user's help: a session's handle,
	// its methods, and how to get one.
	src := builtin()[relayModule].Src
	require.NotEmpty(t, src)
	blank := blankDocstringsBut(blankComments(src), relayHelp)
	assert.Equal(t, strings.Count(src, "\n"), strings.Count(blank, "\n"), "the relay keeps its line numbers")
	cmd := exec.Command(py, "-c", norm)
	cmd.Stdin = strings.NewReader(src + "\x00" + blank)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "blanking the relay's docstrings changed its code\n%s", out)
	var had, left int
	_, err = fmt.Sscan(string(out), &had, &left)
	require.NoError(t, err, "%s", out)
	assert.Greater(t, had, 3*left, "most are blanked")
	for _, help := range []string{"A session seen from another one.", "Copy names into the session's namespace.",
		"Copy a file here (a path) or bytes to dest in the session.", "Open session name (or attach to the live one)."} {
		assert.Contains(t, blank, help)
	}
	assert.NotContains(t, blank, "Wait for the reply; SIGINT interrupts it")
	// A top-level name of keep keeps what it holds; the next one does not.
	assert.Equal(t, "class K:\n    \"\"\"k\"\"\"\n    def f(self):\n        \"\"\"f\"\"\"\n@d\ndef g():\n    \"\"\n",
		blankDocstringsBut("class K:\n    \"\"\"k\"\"\"\n    def f(self):\n        \"\"\"f\"\"\"\n@d\ndef g():\n    \"\"\"g\"\"\"\n", map[string]bool{"K": true}))
	for src, want := range map[string]string{
		// A docstring over lines, one on one line, a class's.
		"def f(a,\n      b):\n    \"\"\"Doc.\n\n    More.\"\"\"\n    return a\n": "def f(a,\n      b):\n    \"\"\n\n\n    return a\n",
		"class C(object):\n    \"\"\"Doc.\"\"\"\n    x = 1\n":                    "class C(object):\n    \"\"\n    x = 1\n",
		// Kept: a value after a colon, a one-line def's next line, text
		// after the close, a backslash, a value in a one-line def's
		// braces.
		"d = {\n    1:\n    \"\"\"v\"\"\"}\n":           "",
		"def f(): return 1\nif x:\n    \"\"\"s\"\"\"\n": "",
		"def f():\n    \"\"\"a\"\"\" + b\n":             "",
		"def f():\n    \"\"\"a \\\"\"\" b\"\"\"\n":      "",
		"def f(x): return {1:\n    \"\"\"v\"\"\"}\n":    "",
	} {
		if want == "" {
			want = src
		}
		assert.Equal(t, want, blankDocstrings(src))
	}
}

func TestStubRunsTheWorkerFromMemory(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("needs python3")
	}
	p, err := Build(map[string]Module{"extra_mod": {Src: "X = 5\n"}})
	require.NoError(t, err)
	frame := `{"op":"exec","cell":1,"code":"import extra_mod, sys; extra_mod.X + 1","fence":"FENCE"}` + "\n"
	cmd := exec.Command(py, "-c", boot.Stub)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdoutPipe, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Dir = os.TempDir()
	require.NoError(t, cmd.Start())
	_, err = stdin.Write(append(p, frame...))
	require.NoError(t, err)
	// Read the stub's line, the ready and done frames, then close stdin:
	// the worker exits.
	r := bufio.NewReader(stdoutPipe)
	var stdout strings.Builder
	for i := 0; i < 3; i++ {
		line, err := r.ReadString('\n')
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("reading frames: %v; stderr: %s", err, stderr.String())
		}
		stdout.WriteString(line)
	}
	stdin.Close()
	require.NoError(t, cmd.Wait())
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	require.Len(t, lines, 3, stdout.String())
	assert.Equal(t, "REPLHUB-STUB", lines[0])
	assert.Contains(t, lines[1], `"op":"ready"`)
	assert.Contains(t, lines[2], `"value":"6"`)
	var ready proto.Ready
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &ready))
	open, closing := proto.StreamMarkers(ready.Streams)
	assert.Equal(t, string(open)+"FENCE"+string(closing), stderr.String(), "the fence, in stdout")
}

// A payload is compressed once for the same argv; one with extra modules
// is built anew.
func TestPayloadIsKeptByArgv(t *testing.T) {
	a, err := Build(nil, "--stdio")
	require.NoError(t, err)
	b, err := Build(nil, "--stdio")
	require.NoError(t, err)
	assert.Same(t, &a[0], &b[0], "the same payload is not compressed again")
	c, err := Build(nil, "--stdio", "--no-tk")
	require.NoError(t, err)
	assert.NotEqual(t, a, c, "another argv is another payload")
	d, err := Build(map[string]Module{"x": {Src: "X = 1\n"}}, "--stdio")
	require.NoError(t, err)
	e, err := Build(map[string]Module{"x": {Src: "X = 2\n"}}, "--stdio")
	require.NoError(t, err)
	assert.NotEqual(t, d, e, "extra modules are sent as they are now")
}
