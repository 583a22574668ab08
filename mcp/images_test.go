package mcp

import (
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"

	"github.com/replhub/replhub/wire"
)

// A group's images are each host's, after a line naming it, four in all.
func TestWithImagesGroup(t *testing.T) {
	img := func(b string) wire.Display { return wire.Display{MIME: "image/png", Data: []byte(b)} }
	host := func(name string, d ...wire.Display) wire.HostResult {
		return wire.HostResult{Host: name, Result: &wire.Result{Session: "g@" + name, Display: d}}
	}
	res := &wire.Result{Session: "g", Fan: []wire.HostResult{
		host("lab-1", img("a"), wire.Display{MIME: "text/markdown", Text: "# t"}, img("b")),
		{Host: "lab-9", Result: &wire.Result{Status: wire.StatusFailed}, Failure: "no route"},
		host("lab-2"),
		host("lab-3", img("c"), img("d"), img("e")),
		host("lab-4", img("f")),
	}}
	out := withImages(text("reply", false), res)
	var got []string
	for _, c := range out.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			got = append(got, c.Text)
		case *sdk.ImageContent:
			got = append(got, "image "+string(c.Data))
		}
	}
	assert.Equal(t, []string{"reply", "[images from lab-1]", "image a", "image b", "[images from lab-3]", "image c", "image d",
		"[2 more images not shown: a reply carries at most 4; show fewer a cell, or save them with savefig and look at them in later cells]"}, got)
}
