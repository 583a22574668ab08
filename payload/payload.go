// Package payload builds the compressed bundle that a remote session's
// `python -c` stub reads from stdin: boot.py, a NUL byte, then a JSON module
// table holding the worker (and, where this machine has it, cloudpickle),
// all zlib-compressed, sent as a decimal length line and the bytes.
//
// It does not send anything; package remote does.
package payload

import (
	"bytes"
	"compress/zlib"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/replhub/replhub/boot"
	"github.com/replhub/replhub/internal/atomicfile"
	"github.com/replhub/replhub/pyfind"
)

// Module is one Python module in the bundle. A late one travels without
// its source: the session asks the hub for it (Source) when it is first
// imported, so that what every start sends stays small.
type Module struct {
	Src  string `json:"src,omitempty"`
	Pkg  bool   `json:"pkg,omitempty"`
	Late bool   `json:"late,omitempty"`
}

// late says whether module name is sent at its first import rather than in
// the payload: the modules of replhub_toolkit (swap, query, the helpers)
// but the relay, through which the rest are asked for (the package itself
// goes whole: every session imports it at start), and cloudpickle.
func late(name string) bool {
	return strings.HasPrefix(name, "replhub_toolkit.") && name != "replhub_toolkit.relay" ||
		name == "cloudpickle" || strings.HasPrefix(name, "cloudpickle.")
}

// builtin is every module the payload carries, with its source, but the
// user's: built once (a module request and a remote start read it; Build
// copies it before it writes).
var builtin = sync.OnceValue(func() map[string]Module {
	cp, _ := cloudpickleModules(CloudpickleDir())
	mods := map[string]Module{WorkerModule: {Src: string(boot.Worker)}}
	for _, m := range boot.ToolkitPackage() {
		mods[m.Name] = Module{Src: string(m.Src), Pkg: m.Pkg}
	}
	maps.Copy(mods, cp)
	return mods
})

// Source is the source of a late module, which a session asks for.
func Source(name string) (string, bool) {
	if !late(name) {
		return "", false
	}
	m, ok := builtin()[name]
	return m.Src, ok
}

// WorkerModule is the name the worker is imported under remotely.
const WorkerModule = "replhub_worker"

// Build returns the framed payload (length line + zlib bytes) for the
// worker and extra modules; argv, when given, is the worker's (else
// --stdio).
//
// A build without extra modules is kept, by argv: compressing the bundle
// costs a remote start 10 to 25 ms, and it changes only with the worker's
// argv; starts that ask at once (a fan-out's) wait for one build. Callers
// must not change the bytes.
func Build(extra map[string]Module, argv ...string) ([]byte, error) {
	if len(extra) > 0 {
		return build(extra, argv)
	}
	key := strings.Join(argv, "\x00")
	built.mu.Lock()
	e := built.m[key]
	if e == nil {
		if len(built.m) >= 16 {
			clear(built.m)
		}
		e = &builtPayload{}
		built.m[key] = e
	}
	built.mu.Unlock()
	e.once.Do(func() { e.b, e.err = build(nil, argv) })
	return e.b, e.err
}

type builtPayload struct {
	once sync.Once
	b    []byte
	err  error
}

// built holds the payloads Build made without extra modules, by argv.
var built = struct {
	mu sync.Mutex
	m  map[string]*builtPayload
}{m: map[string]*builtPayload{}}

func build(extra map[string]Module, argv []string) ([]byte, error) {
	mods := maps.Clone(builtin())
	for k, v := range extra {
		mods[k] = v
	}
	for k, m := range mods {
		if late(k) {
			mods[k] = Module{Pkg: m.Pkg, Late: true}
		} else if _, theirs := extra[k]; !theirs {
			m.Src = blankComments(m.Src)
			switch k {
			case WorkerModule:
				m.Src = blankDocstrings(m.Src)
			case relayModule:
				m.Src = blankDocstringsBut(m.Src, relayHelp)
			}
			mods[k] = m
		}
	}
	var bc *bytecode
	if len(extra) == 0 {
		bc = &bytecode{Key: hex.EncodeToString(bytecodeKey()), ID: sourcesID(mods)}
	}
	table, err := json.Marshal(struct {
		Modules map[string]Module `json:"modules"`
		Main    string            `json:"main"`
		Argv    []string          `json:"argv,omitempty"`
		BC      *bytecode         `json:"bc,omitempty"`
	}{mods, WorkerModule, argv, bc})
	if err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	var z bytes.Buffer
	w, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	w.Write([]byte(blankDocstrings(blankComments(string(boot.Boot)))))
	w.Write([]byte{0})
	w.Write(table)
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("payload: %w", err)
	}
	out := []byte(strconv.Itoa(z.Len()) + "\n")
	return append(out, z.Bytes()...), nil
}

// Default is the payload with the standard modules and, where this
// machine has it, cloudpickle. The modules of replhub (package modules)
// never travel in it: a session asks for each at its import.
func Default() ([]byte, error) {
	return Build(nil)
}

var (
	cacheMu sync.Mutex
	pythons = &pyfind.Cache{}
)

// UseCache makes CloudpickleDir keep its answer in c (the hub's, in its
// state folder) rather than in memory only; call it before the first
// CloudpickleDir.
func UseCache(c *pyfind.Cache) {
	cacheMu.Lock()
	pythons = c
	cacheMu.Unlock()
}

// CloudpickleDir is where this machine's cloudpickle package lives, asked
// of its python3 (the Debian package python3-cloudpickle, or pip's) and
// then of /usr/bin/python3, or "" when neither has it. A python3 that is
// a version manager's shim is resolved first, and the answer is kept in
// the cache (see UseCache), so a new hub asks again only when the
// interpreter changed.
var CloudpickleDir = sync.OnceValue(func() string {
	cacheMu.Lock()
	c := pythons
	cacheMu.Unlock()
	var cands []string
	if p, err := exec.LookPath("python3"); err == nil {
		cwd, _ := os.Getwd()
		if ch, ok := pyfind.Resolve(p, os.Getenv, cwd); ok {
			p = ch.Path
		}
		cands = append(cands, p)
	}
	for _, py := range append(cands, "/usr/bin/python3") {
		if d := c.CloudpickleDir(py); d != "" {
			return d
		}
	}
	return ""
})

// cloudpickleModules reads the package in dir as payload modules.
func cloudpickleModules(dir string) (map[string]Module, error) {
	if dir == "" {
		return nil, nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.py"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("payload: no cloudpickle sources in %s", dir)
	}
	mods := map[string]Module{}
	for _, f := range files {
		// A module of cloudpickle's is some 60 KiB at most.
		b, err := atomicfile.ReadUserFile(f, 4<<20)
		if err != nil {
			return nil, fmt.Errorf("payload: %w", err)
		}
		base := strings.TrimSuffix(filepath.Base(f), ".py")
		if base == "__init__" {
			mods["cloudpickle"] = Module{Src: string(b), Pkg: true}
		} else {
			mods["cloudpickle."+base] = Module{Src: string(b)}
		}
	}
	return mods, nil
}

// blankComments empties the lines of src that hold only a comment: they
// are a tenth of what every remote start sends, and an empty line keeps
// the line numbers of a traceback. An encoding declaration stays. A test
// holds every shipped module's syntax tree unchanged by it (a line in a
// triple-quoted string that starts with # would change it).
func blankComments(src string) string {
	lines := strings.Split(src, "\n")
	for i, l := range lines {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "#") && !(i < 2 && strings.Contains(t, "coding")) {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// relayModule travels whole; of its docstrings, those of the names in
// relayHelp are a user's help (a session's handle and how to get one).
const relayModule = "replhub_toolkit.relay"

var relayHelp = map[string]bool{"SessionHandle": true, "session": true, "sessions_on": true, "sessions": true,
	"HubError": true, "CopyError": true, "Cancelled": true}

// blankDocstrings empties the docstrings of functions and classes in src,
// the worker's or boot.py's, which nothing reads at run time (the
// toolkit's are its help, and travel whole): a fifth of the worker's
// bytes. Each becomes "" on its first line, its other lines empty, so that
// line numbers hold. Taken for a docstring: a string that opens with """
// at the start of the line after a def or class header (its brackets
// closed, ending with ":") and closes with """ at the end of a line, with
// no backslash before. A test holds that it changes no syntax tree but
// for the docstrings' text.
func blankDocstrings(src string) string { return blankDocstringsBut(src, nil) }

// blankDocstringsBut is blankDocstrings but for the functions and classes
// in keep, named at the top level, and all they hold.
func blankDocstringsBut(src string, keep map[string]bool) string {
	lines := strings.Split(src, "\n")
	depth, inHeader, afterHeader := 0, false, false
	kept := false // in a top-level def or class of keep
	for i := 0; i < len(lines); i++ {
		t := strings.TrimSpace(lines[i])
		if t == "" {
			continue
		}
		if afterHeader && !kept && strings.HasPrefix(t, `"""`) {
			if end := docstringEnd(lines, i); end >= 0 {
				lines[i] = lines[i][:len(lines[i])-len(strings.TrimLeft(lines[i], " \t"))] + `""`
				for j := i + 1; j <= end; j++ {
					lines[j] = ""
				}
				i, afterHeader = end, false
				continue
			}
		}
		afterHeader = false
		header := strings.HasPrefix(t, "def ") || strings.HasPrefix(t, "async def ") || strings.HasPrefix(t, "class ")
		if l := lines[i]; !inHeader && l[0] != ' ' && l[0] != '\t' && l[0] != '@' {
			// A statement at the top level: a def or class of keep, or not.
			kept = header && keep[headerName(t)]
		}
		if !inHeader && header {
			inHeader, depth = true, 0
		}
		if inHeader {
			depth += strings.Count(t, "(") + strings.Count(t, "[") + strings.Count(t, "{") -
				strings.Count(t, ")") - strings.Count(t, "]") - strings.Count(t, "}")
			if depth <= 0 {
				inHeader, afterHeader = false, strings.HasSuffix(t, ":")
			}
		}
	}
	return strings.Join(lines, "\n")
}

// headerName is the name a def or class header line defines.
func headerName(t string) string {
	t = strings.TrimPrefix(t, "async ")
	_, t, _ = strings.Cut(t, " ")
	if i := strings.IndexAny(t, "(:"); i >= 0 {
		t = t[:i]
	}
	return strings.TrimSpace(t)
}

// docstringEnd is the line at whose end the string opened at the start of
// line i closes, or -1: none does, something follows the close, or a
// backslash comes before it.
func docstringEnd(lines []string, i int) int {
	rest := strings.TrimSpace(lines[i])[3:]
	for j := i; j < len(lines); j++ {
		if j > i {
			rest = lines[j]
		}
		k := strings.Index(rest, `"""`)
		body := rest
		if k >= 0 {
			body = rest[:k]
		}
		if strings.Contains(body, "\\") {
			return -1
		}
		if k >= 0 {
			if strings.TrimSpace(rest[k+3:]) != "" {
				return -1
			}
			return j
		}
	}
	return -1
}
