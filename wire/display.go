package wire

import (
	"fmt"
	"strings"
)

// Display is one thing a cell showed beyond its text: an image (PNG or
// JPEG, already bounded by the hub, in Data), an SVG (its source in Data,
// and in Text when it is small enough to read), or Markdown, HTML (reduced
// to text) or JSON, in Text.
type Display struct {
	MIME string `json:"mime"`
	// Width and Height are an image's pixels as sent; Scaled says the hub
	// made it smaller than the cell did (from OrigWidth x OrigHeight).
	Width      int  `json:"width,omitempty"`
	Height     int  `json:"height,omitempty"`
	Scaled     bool `json:"scaled,omitempty"`
	OrigWidth  int  `json:"orig_width,omitempty"`
	OrigHeight int  `json:"orig_height,omitempty"`
	// Bytes is len(Data) as the hub sent it.
	Bytes int    `json:"bytes,omitempty"`
	Data  []byte `json:"data,omitempty"`
	Text  string `json:"text,omitempty"`
	// Path is where the CLI wrote Data (it then drops Data).
	Path string `json:"path,omitempty"`
}

// IsImage reports whether d travels as an image: PNG or JPEG.
func (d *Display) IsImage() bool { return d.MIME == "image/png" || d.MIME == "image/jpeg" }

// Label is a short line about d: its type, size and (CLI) file.
func (d *Display) Label() string {
	var b strings.Builder
	b.WriteString(d.MIME)
	if d.Width > 0 {
		fmt.Fprintf(&b, " %dx%d", d.Width, d.Height)
		if d.Scaled {
			fmt.Fprintf(&b, " (scaled from %dx%d)", d.OrigWidth, d.OrigHeight)
		}
	}
	if d.Bytes > 0 {
		fmt.Fprintf(&b, ", %s", Size(int64(d.Bytes)))
	}
	if d.Path != "" {
		b.WriteString(": " + d.Path)
	}
	return b.String()
}

// Size renders a byte count: 812 B, 23 KB, 1.2 MB.
func Size(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1000*1000:
		return fmt.Sprintf("%d KB", (n+500)/1000)
	default:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
}

// displayText renders r's display items in order: a line for each image
// (the MCP reply carries the image itself beside the text), text items as
// themselves.
func (r *Result) displayText(line func(string)) {
	for i := range r.Display {
		d := &r.Display[i]
		switch {
		case d.IsImage() || (d.MIME == "image/svg+xml" && (d.Path != "" || d.Text == "")):
			line("[" + d.Label() + "]")
		case d.MIME == "image/svg+xml":
			line("[" + d.Label() + ", as text:]")
			line(d.Text)
		default:
			line(d.Text)
		}
	}
}
