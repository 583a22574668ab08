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
	// maxDecodeBytes bounds the memory that decoding one image may take
	// (decodeCost); a bigger one is not decoded at all. A done frame of
	// 32 MiB holds a decompression bomb, or a 7000x7000 16-bit PNG that
	// decodes to 400 MB.
	maxDecodeBytes = 128 << 20
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
		d, note := displayItem(i+1, it.MIME, b)
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

// displayItem bounds the cell's nth item; nil and a note for one that
// cannot be shown.
func displayItem(n int, mime string, b []byte) (*wire.Display, string) {
	switch mime {
	case "image/png", "image/jpeg":
		return boundImage(n, mime, b)
	case "image/svg+xml":
		if len(b) > maxSVGBytes {
			return nil, fmt.Sprintf("an SVG of %d KB was dropped: replhub shows SVGs of at most %d MB", len(b)>>10, maxSVGBytes>>20)
		}
		// A copy: b is a slice of the done frame's whole payload, which
		// a kept result would otherwise keep alive (up to 32 MiB).
		d := &wire.Display{MIME: mime, Data: bytes.Clone(b), Bytes: len(b)}
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

func capText(s string) string { return clipText(s, maxDisplayText) }

// clipText is s cut to its first n bytes, at a character's start, and a
// line that says how many were left out.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + fmt.Sprintf("\n[... %d more bytes left out ...]", len(s)-cut)
}

// decodeSlots bounds the images the hub decodes and scales at once, over
// all its sessions: each may take up to maxDecodeBytes, and a frame reader
// waits here for its turn.
var decodeSlots = make(chan struct{}, 2)

// boundImage returns the cell's nth image within the bounds: as it came
// when it fits, else scaled down and encoded as PNG, or as JPEG where PNG
// stays too big. Every image is decoded first, one that fits too: a
// client that is sent one it cannot read rejects the whole reply.
func boundImage(n int, mime string, b []byte) (*wire.Display, string) {
	what := fmt.Sprintf("display item %d (%s, %s)", n, mime, wire.Size(int64(len(b))))
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	if err != nil || "image/"+format != mime {
		return nil, fmt.Sprintf("%s is not a valid %s and was dropped", what, mime)
	}
	w, h := cfg.Width, cfg.Height
	if w <= 0 || h <= 0 {
		return nil, fmt.Sprintf("%s is %dx%d and was dropped", what, w, h)
	}
	if cost := decodeCost(cfg, format, b); cost > maxDecodeBytes {
		return nil, fmt.Sprintf("%s, %dx%d, was dropped: it would take %d MB to decode, and replhub decodes images of at most %d MB",
			what, w, h, cost>>20, maxDecodeBytes>>20)
	}
	decodeSlots <- struct{}{}
	defer func() { <-decodeSlots }()
	src, _, err := image.Decode(bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Sprintf("%s, %dx%d, did not decode (%v) and was dropped", what, w, h, err)
	}
	d := &wire.Display{MIME: mime, Width: w, Height: h}
	if fits(w, h) && len(b) <= MaxImageBytes {
		d.Data, d.Bytes = bytes.Clone(b), len(b) // a copy, as an SVG's
		return d, ""
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
	return nil, fmt.Sprintf("%s, %dx%d, stayed over %d KB however small and was dropped", what, w, h, MaxImageBytes>>10)
}

// decodeCost is about the most memory that decoding an image of cfg
// takes, in bytes: its pixels times the bytes a pixel of its colour model
// takes, and what the decoder holds besides. An interlaced PNG's passes
// are images of their own until they are merged; a CMYK JPEG is decoded
// as YCbCr and black before it becomes CMYK; a progressive JPEG keeps its
// coefficients, 4 bytes a pixel for each component, until its last scan.
func decodeCost(cfg image.Config, format string, b []byte) int64 {
	pixels := int64(cfg.Width) * int64(cfg.Height) // each side is below 2^31
	if pixels > maxDecodeBytes {
		return pixels // over the bound at a byte a pixel; no overflow below
	}
	per := int64(8) // a colour model the decoders do not use: the most they do
	components := int64(3)
	switch m := cfg.ColorModel; m {
	case color.GrayModel, color.AlphaModel:
		per, components = 1, 1
	case color.Gray16Model, color.Alpha16Model:
		per = 2
	case color.YCbCrModel:
		per = 3 // 4:4:4; a subsampled one takes less
	case color.RGBAModel, color.NRGBAModel:
		per = 4
	case color.CMYKModel:
		per, components = 4, 4
	case color.RGBA64Model, color.NRGBA64Model:
		per = 8
	default:
		if _, ok := m.(color.Palette); ok {
			per = 1
		}
	}
	switch format {
	case "png":
		if len(b) > 28 && b[28] == 1 { // IHDR's interlace method: Adam7
			per *= 2
		}
	case "jpeg":
		if components == 4 {
			per = 3 + 1 + 4
		}
		if jpegProgressive(b) {
			per += 4 * components
		}
	}
	return pixels * per
}

// jpegProgressive reports whether b's frame header (SOFn) says
// progressive; b is a JPEG whose config decoded, so its segments up to
// the frame header are whole.
func jpegProgressive(b []byte) bool {
	for i := 2; i+4 <= len(b); {
		if b[i] != 0xff {
			return false
		}
		m := b[i+1]
		switch {
		case m == 0xff: // fill
			i++
			continue
		case m == 0xc2:
			return true
		case m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc:
			return false // another frame header: baseline, extended
		case m == 0x01 || m >= 0xd0 && m <= 0xd9: // markers without a length
			i += 2
			continue
		}
		i += 2 + (int(b[i+2])<<8 | int(b[i+3]))
	}
	return false
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
