package hub

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"unicode/utf8"

	"golang.org/x/image/draw"

	"github.com/replhub/replhub/proto"
	"github.com/replhub/replhub/wire"
)

// Bounds on what a cell's reply shows (DESIGN.md, "Rich results"). An image
// is scaled down to fit MaxImageSide on its long side and MaxImagePixels in
// all, and re-encoded until it is at most MaxImageBytes: Claude's
// documentation on vision (docs.claude.com, "Evaluate image size") scales
// anything longer than 1568 px or over about 1.15 megapixels down itself,
// and a client shows an image of about 1 MB without trouble.
const (
	MaxImageSide   = 1568
	MaxImagePixels = 1_150_000
	MaxImageBytes  = 1 << 20
	// maxDecodePixels refuses to decode a bigger image at all (a
	// decompression bomb): 50 megapixels are 200 MB as RGBA.
	maxDecodePixels = 50_000_000
	// maxDisplayText caps one text item (Markdown, HTML as text, JSON, an
	// SVG shown as its source).
	maxDisplayText = 20000
	// maxSVGBytes bounds an SVG, which goes as it came.
	maxSVGBytes = 4 << 20
)

// displayItems turns a done frame's display list and payload into the
// reply's items, each bounded, and notes on what was left out. A list
// that does not match the payload keeps the items that fit in it.
func displayItems(f *proto.Done) ([]wire.Display, []string) {
	var items []wire.Display
	var notes []string
	data := f.Data
	for i, it := range f.Display {
		if i >= proto.MaxDisplayItems || it.Size < 0 || it.Size > int64(len(data)) {
			notes = append(notes, fmt.Sprintf("%d display items did not arrive whole and were dropped", len(f.Display)-i))
			break
		}
		b := data[:it.Size]
		data = data[it.Size:]
		d, note := displayItem(it.MIME, b)
		if note != "" {
			notes = append(notes, note)
		}
		if d != nil {
			items = append(items, *d)
		}
	}
	if f.Dropped > 0 {
		notes = append(notes, fmt.Sprintf("%d display items were left out: a cell shows at most %d, of %d MB in all",
			f.Dropped, proto.MaxDisplayItems, proto.DisplaySize>>20))
	}
	return items, notes
}

// displayItem bounds one item; nil and a note for one that cannot be shown.
func displayItem(mime string, b []byte) (*wire.Display, string) {
	switch mime {
	case "image/png", "image/jpeg":
		return boundImage(mime, b)
	case "image/svg+xml":
		if len(b) > maxSVGBytes {
			return nil, fmt.Sprintf("an SVG of %d KB was dropped: replhub shows SVGs of at most %d MB", len(b)>>10, maxSVGBytes>>20)
		}
		d := &wire.Display{MIME: mime, Data: b, Bytes: len(b)}
		if len(b) <= maxDisplayText && utf8.Valid(b) {
			d.Text = string(b)
		}
		return d, ""
	case "text/html":
		return &wire.Display{MIME: mime, Text: capText(HTMLText(b))}, ""
	case "text/markdown", "application/json":
		return &wire.Display{MIME: mime, Text: capText(string(bytes.ToValidUTF8(b, []byte("\uFFFD"))))}, ""
	}
	return nil, fmt.Sprintf("a display item of type %.40q was dropped: replhub shows PNG, JPEG, SVG, Markdown, HTML and JSON", mime)
}

func capText(s string) string {
	if len(s) <= maxDisplayText {
		return s
	}
	cut := maxDisplayText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[... %d more bytes left out ...]", len(s)-cut)
}

// boundImage returns an image within the bounds: as it came when it fits,
// else scaled down and encoded as PNG, or as JPEG where PNG stays too big.
func boundImage(mime string, b []byte) (*wire.Display, string) {
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil || "image/"+format != mime {
		return nil, fmt.Sprintf("an image that is not a valid %s (%d bytes) was dropped", mime, len(b))
	}
	w, h := cfg.Width, cfg.Height
	d := &wire.Display{MIME: mime, Width: w, Height: h}
	if fits(w, h) && len(b) <= MaxImageBytes {
		d.Data, d.Bytes = b, len(b)
		return d, ""
	}
	if w*h > maxDecodePixels || w <= 0 || h <= 0 {
		return nil, fmt.Sprintf("an image of %dx%d was dropped: replhub scales images of at most %d megapixels", w, h, maxDecodePixels/1_000_000)
	}
	src, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Sprintf("an image of %dx%d did not decode (%v) and was dropped", w, h, err)
	}
	tw, th := target(w, h)
	for range 6 {
		dst := image.NewRGBA(image.Rect(0, 0, tw, th))
		draw.BiLinear.Scale(dst, dst.Bounds(), src, src.Bounds(), draw.Src, nil)
		out, outMime := encode(dst)
		if len(out) <= MaxImageBytes {
			d.MIME, d.Data, d.Bytes = outMime, out, len(out)
			d.Scaled, d.OrigWidth, d.OrigHeight, d.Width, d.Height = true, w, h, tw, th
			return d, ""
		}
		tw, th = max(1, tw*3/4), max(1, th*3/4)
	}
	return nil, fmt.Sprintf("an image of %dx%d stayed over %d KB however small and was dropped", w, h, MaxImageBytes>>10)
}

// fits reports whether w x h is within the image bounds.
func fits(w, h int) bool {
	return max(w, h) <= MaxImageSide && w*h <= MaxImagePixels
}

// target is the size that w x h scales down to, keeping its aspect.
func target(w, h int) (int, int) {
	s := math.Min(float64(MaxImageSide)/float64(max(w, h)), math.Sqrt(float64(MaxImagePixels)/float64(w*h)))
	s = math.Min(s, 1)
	return max(1, int(float64(w)*s)), max(1, int(float64(h)*s))
}

// encode writes img as PNG, or, where that is over MaxImageBytes (a
// photograph, noise), as JPEG over white.
func encode(img *image.RGBA) ([]byte, string) {
	var buf bytes.Buffer
	if png.Encode(&buf, img) == nil && buf.Len() <= MaxImageBytes {
		return buf.Bytes(), "image/png"
	}
	flat := image.NewRGBA(img.Bounds())
	draw.Draw(flat, flat.Bounds(), image.NewUniform(color.White), image.Point{}, draw.Src)
	draw.Draw(flat, flat.Bounds(), img, img.Bounds().Min, draw.Over)
	buf.Reset()
	jpeg.Encode(&buf, flat, &jpeg.Options{Quality: 85})
	return buf.Bytes(), "image/jpeg"
}
