// Package claudetest is a stand-in for Anthropic's Messages API on
// loopback, for tests that drive the real Claude Code CLI: it records
// every request the CLI makes and answers each from a script, streaming
// (server-sent events) when the request asks for it, as the API does.
//
// It speaks just enough of the API for a scripted turn: a message whose
// content is text and tool_use blocks, with the events of the streaming
// format (message_start, content_block_start/delta/stop, message_delta,
// message_stop), and count_tokens.
package claudetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// Block is one content block of a message, as the API spells it.
type Block = map[string]any

// Text is a text block.
func Text(s string) Block { return Block{"type": "text", "text": s} }

// ToolUse is a tool_use block: the model calls tool with input.
func ToolUse(id, tool string, input map[string]any) Block {
	return Block{"type": "tool_use", "id": id, "name": tool, "input": input}
}

// Request is one request the CLI made.
type Request struct {
	Path   string
	Header http.Header
	// Body is the decoded JSON body (nil for a body that is not JSON).
	Body map[string]any
}

// Server is the stand-in. Reply answers each /v1/messages request with
// the blocks of the model's message; a message with a tool_use block
// stops for the tool, any other ends the turn.
type Server struct {
	URL   string
	Reply func(*Request) []Block

	mu   sync.Mutex
	reqs []*Request
}

// Start serves the stand-in on loopback until the test ends.
func Start(t testing.TB, reply func(*Request) []Block) *Server {
	s := &Server{Reply: reply}
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// Requests are the requests so far, in order.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.reqs...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	req := &Request{Path: r.URL.Path, Header: r.Header.Clone()}
	json.Unmarshal(b, &req.Body)
	s.mu.Lock()
	s.reqs = append(s.reqs, req)
	n := len(s.reqs)
	s.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/messages/count_tokens"):
		writeJSON(w, map[string]any{"input_tokens": 100})
	case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/v1/messages"):
		blocks := s.Reply(req)
		stop := "end_turn"
		for _, bl := range blocks {
			if bl["type"] == "tool_use" {
				stop = "tool_use"
			}
		}
		model, _ := req.Body["model"].(string)
		msg := map[string]any{"id": fmt.Sprintf("msg_%d", n), "type": "message", "role": "assistant", "model": model,
			"content": []Block{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 100, "output_tokens": 1}}
		if stream, _ := req.Body["stream"].(bool); stream {
			writeStream(w, msg, blocks, stop)
			return
		}
		msg["content"], msg["stop_reason"] = blocks, stop
		writeJSON(w, msg)
	default:
		w.WriteHeader(http.StatusNotFound)
		writeJSON(w, map[string]any{"type": "error", "error": map[string]any{"type": "not_found_error", "message": "not served by the stand-in"}})
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

// writeStream sends msg as the API's server-sent events: each block opens
// empty, gets its text or its input's JSON as one delta, and closes.
func writeStream(w http.ResponseWriter, msg map[string]any, blocks []Block, stop string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	f, _ := w.(http.Flusher)
	event := func(name string, data map[string]any) {
		data["type"] = name
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, b)
		if f != nil {
			f.Flush()
		}
	}
	event("message_start", map[string]any{"message": msg})
	for i, bl := range blocks {
		switch bl["type"] {
		case "tool_use":
			input, _ := json.Marshal(bl["input"])
			event("content_block_start", map[string]any{"index": i, "content_block": Block{"type": "tool_use", "id": bl["id"], "name": bl["name"], "input": map[string]any{}}})
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input)}})
		default:
			event("content_block_start", map[string]any{"index": i, "content_block": Block{"type": "text", "text": ""}})
			event("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": bl["text"]}})
		}
		event("content_block_stop", map[string]any{"index": i})
	}
	event("message_delta", map[string]any{"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": 10}})
	event("message_stop", map[string]any{})
}

// Tools are the names of the tools a request hands the model in full:
// those not deferred behind the tool search.
func (r *Request) Tools() []string {
	var names []string
	tools, _ := r.Body["tools"].([]any)
	for _, t := range tools {
		m, _ := t.(map[string]any)
		if deferred, _ := m["defer_loading"].(bool); !deferred {
			name, _ := m["name"].(string)
			names = append(names, name)
		}
	}
	return names
}

// ToolResult is what the model is handed for one tool call.
type ToolResult struct {
	Text    string
	IsError bool
}

// ToolResults are the tool results in a request's messages, by the id of
// the tool_use they answer.
func (r *Request) ToolResults() map[string]ToolResult {
	out := map[string]ToolResult{}
	msgs, _ := r.Body["messages"].([]any)
	for _, m := range msgs {
		mm, _ := m.(map[string]any)
		content, _ := mm["content"].([]any)
		for _, c := range content {
			cb, _ := c.(map[string]any)
			if cb["type"] != "tool_result" {
				continue
			}
			id, _ := cb["tool_use_id"].(string)
			isErr, _ := cb["is_error"].(bool)
			out[id] = ToolResult{Text: blockText(cb["content"]), IsError: isErr}
		}
	}
	return out
}

// blockText flattens a tool_result's content: a string, or blocks whose
// text (and the names of tool_reference blocks) it joins.
func blockText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var b strings.Builder
	list, _ := v.([]any)
	for _, c := range list {
		cb, _ := c.(map[string]any)
		switch cb["type"] {
		case "text":
			s, _ := cb["text"].(string)
			b.WriteString(s)
		case "tool_reference":
			s, _ := cb["tool_name"].(string)
			b.WriteString("<tool_reference " + s + ">")
		default:
			j, _ := json.Marshal(cb)
			b.Write(j)
		}
	}
	return b.String()
}

// Text is everything the request's messages say as text (system
// reminders included), for finding what the model was told.
func (r *Request) Text() string {
	b, _ := json.Marshal(r.Body["messages"])
	return string(b)
}
