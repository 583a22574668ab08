package mcp

import sdk "github.com/modelcontextprotocol/go-sdk/mcp"

// Claude Code reads these keys of a tool's _meta; tests/claudecode_test.go
// checks each against the pinned Claude Code version, driving the real CLI.
//
// With tool search on (Claude Code's default against Anthropic's API),
// MCP tools are deferred: the model's first request names them in a
// system message and carries none of their schemas, so a model that never
// thinks of searching never calls them. alwaysLoad puts a tool's schema in
// every request from the first; searchHint adds words the tool search
// matches (Claude Code folds its white space); maxResultSizeChars raises
// the size past which Claude Code saves a tool's text to a file and hands
// the model only a preview.
const (
	metaAlwaysLoad = "anthropic/alwaysLoad"
	metaSearchHint = "anthropic/searchHint"
	metaMaxResult  = "anthropic/maxResultSizeChars"
)

// alwaysLoaded are the tools an agent needs to learn that sessions exist:
// running code, and seeing what runs.
var alwaysLoaded = map[string]bool{"exec": true, "sessions": true}

// searchHints are words an agent may search for that a tool's description
// does not hold.
var searchHints = map[string]string{
	"exec":      "python repl run code persistent session interpreter notebook cell ssh remote host sudo root queue",
	"sessions":  "list python sessions repl running cells queue memory",
	"wait":      "collect result output of a long running python cell background job poll",
	"interrupt": "stop cancel abort running python cell keyboardinterrupt ctrl-c dequeue queued cell",
	"kill":      "terminate end python session process free name restart",
	"vars":      "variables globals namespace python session names list",
	"inspect":   "describe python object value type signature docstring shape dtype",
	"complete":  "autocomplete tab completion python names attributes imports dict keys",
	"reset":     "clear wipe python session variables namespace fresh start",
	"memory":    "claude code auto memory MEMORY.md notes remember project facts",
}

// metaFor is the _meta of the tool name. Every reply keeps to
// maxResultChars (text), so every tool declares it.
func metaFor(name string) sdk.Meta {
	m := sdk.Meta{metaMaxResult: maxResultChars}
	if h := searchHints[name]; h != "" {
		m[metaSearchHint] = h
	}
	if alwaysLoaded[name] {
		m[metaAlwaysLoad] = true
	}
	return m
}
