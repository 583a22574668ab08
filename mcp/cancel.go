package mcp

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// cancelTransport sends no response to a request its client cancelled.
// The MCP specification (basic/utilities/cancellation) says receivers of
// notifications/cancelled SHOULD "not send a response for the cancelled
// request"; the SDK answers every request, so the answer is dropped here.
// A client drops such a response anyway: whatever the cancelled call's
// cell wrote must reach the agent through the next wait or exec instead
// (tools.cancelled).
type cancelTransport struct{ sdk.Transport }

func (t cancelTransport) Connect(ctx context.Context) (sdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &cancelConn{Connection: c, cancelled: map[jsonrpc.ID]bool{}}, nil
}

// maxCancelled bounds the remembered cancellations: one that names a
// request already answered is never cleared by its response.
const maxCancelled = 1024

type cancelConn struct {
	sdk.Connection
	mu        sync.Mutex
	cancelled map[jsonrpc.ID]bool
}

func (c *cancelConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if r, ok := m.(*jsonrpc.Request); ok && r.Method == "notifications/cancelled" {
		var p struct {
			RequestID any `json:"requestId"`
		}
		if json.Unmarshal(r.Params, &p) == nil {
			if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
				c.mu.Lock()
				if len(c.cancelled) >= maxCancelled {
					clear(c.cancelled)
				}
				c.cancelled[id] = true
				c.mu.Unlock()
			}
		}
	}
	return m, err
}

func (c *cancelConn) Write(ctx context.Context, m jsonrpc.Message) error {
	if r, ok := m.(*jsonrpc.Response); ok {
		c.mu.Lock()
		drop := c.cancelled[r.ID]
		delete(c.cancelled, r.ID)
		c.mu.Unlock()
		if drop {
			return nil
		}
	}
	return c.Connection.Write(ctx, m)
}
