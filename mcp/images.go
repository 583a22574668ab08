package mcp

import (
	"fmt"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/replhub/replhub/wire"
)

// maxImages bounds the image blocks of one reply; the hub has bounded
// each (at most 1568 px on its long side, about 1 MB), so four stay well
// within what a client takes in one message.
const maxImages = 4

// withImages adds res's images to out as image content blocks after its
// text, at most maxImages in all, with a note when there were more. A
// group's come host by host, each host's after a line that names it.
func withImages(out *sdk.CallToolResult, res *wire.Result) *sdk.CallToolResult {
	n := 0
	add := func(r *wire.Result, host string) {
		for i := range r.Display {
			d := &r.Display[i]
			if !d.IsImage() || len(d.Data) == 0 {
				continue
			}
			n++
			if n > maxImages {
				continue
			}
			if host != "" {
				out.Content = append(out.Content, &sdk.TextContent{Text: "[images from " + host + "]"})
				host = ""
			}
			out.Content = append(out.Content, &sdk.ImageContent{Data: d.Data, MIMEType: d.MIME})
		}
	}
	add(res, "")
	for _, h := range res.Fan {
		if h.Result != nil {
			add(h.Result, h.Host)
		}
	}
	if n > maxImages {
		out.Content = append(out.Content, &sdk.TextContent{Text: fmt.Sprintf(
			"[%d more images not shown: a reply carries at most %d; show fewer a cell, or save them with savefig and look at them in later cells]",
			n-maxImages, maxImages)})
	}
	return out
}
