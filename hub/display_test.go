package hub

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/proto"
)

func pngOf(t testing.TB, w, h int, noise bool) []byte {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewSource(1))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := color.RGBA{uint8(x), uint8(y), 128, 255}
			if noise {
				c = color.RGBA{uint8(r.Intn(256)), uint8(r.Intn(256)), uint8(r.Intn(256)), 255}
			}
			img.SetRGBA(x, y, c)
		}
	}
	var buf bytes.Buffer
	require.NoError(t, png.Encode(&buf, img))
	return buf.Bytes()
}

func TestBoundImage(t *testing.T) {
	small := pngOf(t, 640, 480, false)
	d, note := displayItem(1, "image/png", small)
	require.Empty(t, note)
	assert.Equal(t, small, d.Data, "an image within the bounds goes as it came")
	assert.False(t, d.Scaled)

	for _, tc := range []struct {
		name  string
		w, h  int
		noise bool
	}{{"big", 2400, 1800, false}, {"tall", 300, 5000, false}, {"noise", 1400, 1400, true}} {
		t.Run(tc.name, func(t *testing.T) {
			if raceBuilt {
				// Some 15 s of pixel work under the detector, where
				// nothing runs concurrently: tests/all.sh runs it
				// without -race.
				t.Skip("run without -race")
			}
			d, note := displayItem(1, "image/png", pngOf(t, tc.w, tc.h, tc.noise))
			require.Empty(t, note)
			require.NotNil(t, d)
			cfg, format, err := image.DecodeConfig(bytes.NewReader(d.Data))
			require.NoError(t, err)
			assert.Equal(t, "image/"+format, d.MIME)
			assert.LessOrEqual(t, max(cfg.Width, cfg.Height), MaxImageSide)
			assert.LessOrEqual(t, cfg.Width*cfg.Height, MaxImagePixels)
			assert.LessOrEqual(t, len(d.Data), MaxImageBytes)
			assert.Equal(t, [4]int{tc.w, tc.h, cfg.Width, cfg.Height}, [4]int{d.OrigWidth, d.OrigHeight, d.Width, d.Height})
			assert.True(t, d.Scaled)
			// The aspect stays.
			assert.InDelta(t, float64(tc.w)/float64(tc.h), float64(cfg.Width)/float64(cfg.Height), 0.05)
		})
	}
	d, note = displayItem(1, "image/png", []byte("\x89PNG not really"))
	assert.Nil(t, d)
	assert.Contains(t, note, "not a valid image/png")
	d, note = displayItem(1, "image/jpeg", small)
	assert.Nil(t, d, "a PNG that says it is a JPEG")
	assert.NotEmpty(t, note)
	d, note = displayItem(1, "image/svg+xml", bytes.Repeat([]byte("<svg>"), maxSVGBytes))
	assert.Nil(t, d)
	assert.Contains(t, note, "an SVG of 20480 KB was dropped")
	d, note = displayItem(1, "application/x-evil", []byte("x"))
	assert.Nil(t, d)
	assert.Contains(t, note, "was dropped")
}

func TestDisplayItems(t *testing.T) {
	f := &proto.Done{Display: []proto.DisplayItem{{MIME: "text/html", Size: 12}, {MIME: "text/markdown", Size: 4}, {MIME: "application/json", Size: 99}},
		Data: []byte("<b>bold</b>!# hi{}"), Dropped: 3}
	items, notes := displayItems(f)
	require.Len(t, items, 2)
	assert.Equal(t, "bold!", items[0].Text)
	assert.Equal(t, "# hi", items[1].Text)
	require.Len(t, notes, 2)
	assert.Contains(t, notes[0], "1 display items did not arrive whole")
	assert.Contains(t, notes[1], "3 display items were left out")

	big := strings.Repeat("é", maxDisplayText)
	items, _ = displayItems(&proto.Done{Display: []proto.DisplayItem{{MIME: "text/markdown", Size: int64(len(big))}}, Data: []byte(big)})
	assert.Less(t, len(items[0].Text), maxDisplayText+100)
	assert.Contains(t, items[0].Text, "more bytes left out")
}

func TestHTMLText(t *testing.T) {
	for in, want := range map[string]string{
		"<p>Hello <b>world</b></p><p>again</p>":                                     "Hello world\nagain",
		"<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>": "a | b\n1 | 2",
		"<ul><li>one</li><li>two</li></ul>":                                         "- one\n- two",
		"<style>p{}</style><script>alert(1)</script>x &amp; y":                      "x & y",
		"plain   text\n\n with  spaces":                                             "plain text with spaces",
		"a<br>b":                                                                    "a\nb",
		"<unclosed <<>>":                                                            ">",
		"<head><title>T</title><body><p>shown":                                      "shown",
		"<html><head><meta charset=utf-8><style>p{}</style></head><p>body":          "body",
	} {
		assert.Equal(t, want, HTMLText([]byte(in)), in)
	}
}

func FuzzHTMLText(f *testing.F) {
	f.Add([]byte("<table><tr><td>1</td></tr></table><script>x</script>"))
	f.Add([]byte("<li>a<br/>b &lt; c"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := HTMLText(b)
		if len(s) > 8*len(b)+16 {
			t.Fatalf("%d bytes of HTML gave %d of text", len(b), len(s))
		}
	})
}

// A done frame's display list and payload come from the worker: whatever
// they hold, the hub neither panics nor keeps more than it was sent.
func FuzzDisplayItems(f *testing.F) {
	f.Add("image/png", int64(8), "text/html", int64(3), []byte("\x89PNG\r\n\x1a\n<b>"))
	f.Add("image/svg+xml", int64(5), "application/json", int64(-1), []byte("<svg/>"))
	f.Fuzz(func(t *testing.T, m1 string, n1 int64, m2 string, n2 int64, data []byte) {
		items, _ := displayItems(&proto.Done{Display: []proto.DisplayItem{{MIME: m1, Size: n1}, {MIME: m2, Size: n2}}, Data: data})
		total := 0
		for _, it := range items {
			total += len(it.Data)
		}
		if total > len(data) {
			t.Fatalf("items of %d bytes from %d", total, len(data))
		}
	})
}

// pngHeader is a PNG's signature and IHDR chunk (and a PLTE of one colour
// for a paletted one), and nothing after.
func pngHeader(w, h int, depth, colorType, interlace byte) []byte {
	ihdr := binary.BigEndian.AppendUint32(nil, uint32(w))
	ihdr = binary.BigEndian.AppendUint32(ihdr, uint32(h))
	ihdr = append(ihdr, depth, colorType, 0, 0, interlace)
	b := pngChunk([]byte("\x89PNG\r\n\x1a\n"), "IHDR", ihdr)
	if colorType == 3 {
		b = pngChunk(b, "PLTE", []byte{1, 2, 3})
	}
	return b
}

func pngChunk(b []byte, kind string, data []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
	b = append(append(b, kind...), data...)
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(append([]byte(kind), data...)))
}

// jpegHeader is a JPEG's start and its frame header (sof: 0xc0 baseline,
// 0xc2 progressive) for components, each without subsampling.
func jpegHeader(sof byte, w, h, components int) []byte {
	b := []byte("\xff\xd8\xff\xe0\x00\x07JFIF\x00") // SOI, APP0
	b = append(b, 0xff, sof, 0, byte(8+3*components), 8, byte(h>>8), byte(h), byte(w>>8), byte(w), byte(components))
	for i := range components {
		b = append(b, byte(i+1), 0x11, 0)
	}
	return b
}

// An image whose header is sound but whose data is cut short or corrupt
// is dropped with a note, even when it is small enough to go as it came.
func TestBoundImageUndecodable(t *testing.T) {
	var jb bytes.Buffer
	require.NoError(t, jpeg.Encode(&jb, image.NewGray(image.Rect(0, 0, 200, 150)), nil))
	whole := pngOf(t, 64, 48, false)
	corrupt := bytes.Clone(whole)
	corrupt[len(corrupt)-20] ^= 0xff // in the IDAT data or its checksum
	for _, tc := range []struct {
		name, mime string
		b          []byte
	}{
		{"png header only", "image/png", pngHeader(64, 48, 8, 6, 0)},
		{"png corrupt", "image/png", corrupt},
		{"jpeg cut in half", "image/jpeg", jb.Bytes()[:jb.Len()/2]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := image.DecodeConfig(bytes.NewReader(tc.b))
			require.NoError(t, err, "the header is sound")
			items, notes := displayItems(&proto.Done{
				Display: []proto.DisplayItem{{MIME: "text/markdown", Size: 2}, {MIME: tc.mime, Size: int64(len(tc.b))}},
				Data:    append([]byte("hi"), tc.b...)})
			require.Len(t, items, 1)
			assert.Equal(t, "text/markdown", items[0].MIME)
			require.Len(t, notes, 1)
			assert.Contains(t, notes[0], "display item 2 ("+tc.mime+", ")
			assert.Contains(t, notes[0], "did not decode")
			assert.NotContains(t, notes[0], "\n")
		})
	}
	d, note := displayItem(1, "image/png", whole)
	require.Empty(t, note)
	assert.Equal(t, whole, d.Data)
}

func TestDecodeCost(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    []byte
		want int64
	}{
		{"rgba", pngHeader(5000, 5000, 8, 6, 0), 5000 * 5000 * 4},
		{"rgba 16-bit", pngHeader(7000, 7000, 16, 6, 0), 7000 * 7000 * 8},
		{"gray", pngHeader(10000, 10000, 8, 0, 0), 10000 * 10000},
		{"gray 16-bit", pngHeader(100, 100, 16, 0, 0), 100 * 100 * 2},
		{"paletted", pngChunk(pngHeader(100, 100, 8, 3, 0), "IDAT", nil), 100 * 100},
		{"interlaced", pngHeader(100, 100, 8, 2, 1), 100 * 100 * 4 * 2},
		{"huge", pngHeader(1<<20, 1<<20, 8, 0, 0), 1 << 40},
		{"jpeg", jpegHeader(0xc0, 4000, 3000, 3), 4000 * 3000 * 3},
		{"jpeg gray", jpegHeader(0xc0, 4000, 3000, 1), 4000 * 3000},
		{"jpeg progressive", jpegHeader(0xc2, 4000, 3000, 3), 4000 * 3000 * (3 + 12)},
		{"jpeg cmyk", jpegHeader(0xc0, 100, 100, 4), 100 * 100 * 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, format, err := image.DecodeConfig(bytes.NewReader(tc.b))
			require.NoError(t, err)
			assert.Equal(t, tc.want, decodeCost(cfg, format, tc.b))
		})
	}
}

// An image that would take more than maxDecodeBytes to decode is dropped
// before it is: a 7000x7000 16-bit PNG is 49 megapixels, but 392 MB.
func TestDecodeBudget(t *testing.T) {
	for _, b := range [][]byte{pngHeader(7000, 7000, 16, 6, 0), jpegHeader(0xc2, 4000, 3000, 3)} {
		mime := "image/png"
		if b[0] == 0xff {
			mime = "image/jpeg"
		}
		d, note := displayItem(3, mime, b)
		assert.Nil(t, d)
		assert.Regexp(t, `^display item 3 \(image/(png|jpeg), \d+ B\), \d+x\d+, was dropped: it would take \d+ MB to decode, and replhub decodes images of at most 128 MB$`, note)
	}
}

// A done frame for a cell that is not the one running is dropped before
// its images are decoded; the running cell's waits for a decode slot.
func TestDoneFrameDecodesOnlyForItsCell(t *testing.T) {
	img := pngOf(t, 64, 48, false)
	frame := func(cell int) *proto.Done {
		return &proto.Done{Cell: cell, Status: "ok", Display: []proto.DisplayItem{{MIME: "image/png", Size: int64(len(img))}}, Data: img}
	}
	for range cap(decodeSlots) {
		decodeSlots <- struct{}{}
	}
	held := true
	release := func() {
		if held {
			for range cap(decodeSlots) {
				<-decodeSlots
			}
			held = false
		}
	}
	defer release()
	onDone := func(s *Session, f *proto.Done) <-chan struct{} {
		ch := make(chan struct{})
		go func() { s.onDone(f); close(ch) }()
		return ch
	}

	s := &Session{}
	r := &run{cell: 2, finished: make(chan struct{})}
	for _, cur := range []*run{nil, r} {
		s.cur = cur
		select {
		case <-onDone(s, frame(1)):
		case <-time.After(5 * time.Second):
			t.Fatalf("a stray done frame (running: %v) waited to be decoded", cur)
		}
	}
	assert.Nil(t, r.done)

	ran := onDone(s, frame(2))
	select {
	case <-ran:
		t.Fatal("the running cell's images were decoded while every slot was taken")
	case <-time.After(100 * time.Millisecond):
	}
	release()
	<-ran
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.fenceTimer != nil {
		r.fenceTimer.Stop()
	}
	require.NotNil(t, r.done)
	require.Len(t, r.display, 1)
	assert.Equal(t, img, r.display[0].Data)
}
