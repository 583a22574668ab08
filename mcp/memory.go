package mcp

import (
	"context"
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/replhub/replhub/memory"
)

// MemoryArgs are the memory tool's arguments.
type MemoryArgs struct {
	Op    string `json:"op" jsonschema:"list, read, write, edit or delete"`
	Name  string `json:"name,omitempty" jsonschema:"read/write/edit/delete: the entry's file name, e.g. testing.md ('.md' is added when missing); letters, digits and ._- only"`
	Text  string `json:"text,omitempty" jsonschema:"write: the entry's whole new text"`
	Index string `json:"index,omitempty" jsonschema:"write: a one-line hook for the entry's line in MEMORY.md; when empty an existing line is kept"`
	Old   string `json:"old,omitempty" jsonschema:"edit: the exact text to replace; it must occur exactly once"`
	New   string `json:"new,omitempty" jsonschema:"edit: the text that replaces it"`
	Cwd   string `json:"cwd,omitempty" jsonschema:"a folder of the project whose memory to use (default: the MCP server's cwd)"`
}

const memoryDescription = "Read and maintain Claude Code's auto memory for a project: the folder ~/.claude/projects/<project>/memory/ and its MEMORY.md index, where the project is the git repository of cwd. " +
	"op=list shows each entry with its index hook; read returns an entry's text; write sets an entry's text and adds or updates its one line in MEMORY.md (index = the hook); " +
	"edit replaces the one exact occurrence of old with new and refuses when old is missing or not unique; delete removes the entry and its index line. " +
	"It touches nothing outside that folder and needs no session."

func addMemoryTool(s *sdk.Server) {
	no := false
	sdk.AddTool(s, &sdk.Tool{
		Name:        "memory",
		Description: memoryDescription,
		Annotations: &sdk.ToolAnnotations{Title: "Claude Code project memory", DestructiveHint: &no, OpenWorldHint: &no},
		Meta:        metaFor("memory"),
	}, memoryTool)
}

// memoryTool runs in the server's process: the memory folder is this
// machine's, so no hub or session is involved.
func memoryTool(ctx context.Context, req *sdk.CallToolRequest, a MemoryArgs) (*sdk.CallToolResult, any, error) {
	s, err := memory.Open(a.Cwd)
	if err != nil {
		return text(err.Error(), true), nil, nil
	}
	var out string
	switch a.Op {
	case "list":
		out, err = s.ListText()
	case "read":
		out, err = s.Read(a.Name)
	case "write":
		out, err = s.Write(a.Name, a.Text, a.Index)
	case "edit":
		out, err = s.Edit(a.Name, a.Old, a.New)
	case "delete":
		out, err = s.Delete(a.Name)
	default:
		err = fmt.Errorf("memory: unknown op %q; use list, read, write, edit or delete", a.Op)
	}
	if err != nil {
		return text(err.Error(), true), nil, nil
	}
	return text(out, false), nil, nil
}
