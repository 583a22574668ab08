package hub

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math/rand"
	"strings"
	"testing"

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
	d, note := displayItem("image/png", small)
	require.Empty(t, note)
	assert.Equal(t, small, d.Data, "an image within the bounds goes as it came")
	assert.False(t, d.Scaled)

	for _, tc := range []struct {
		name  string
		w, h  int
		noise bool
	}{{"big", 4000, 3000, false}, {"tall", 300, 5000, false}, {"noise", 2000, 2000, true}} {
		t.Run(tc.name, func(t *testing.T) {
			d, note := displayItem("image/png", pngOf(t, tc.w, tc.h, tc.noise))
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
	d, note = displayItem("image/png", []byte("\x89PNG not really"))
	assert.Nil(t, d)
	assert.Contains(t, note, "not a valid image/png")
	d, note = displayItem("image/jpeg", small)
	assert.Nil(t, d, "a PNG that says it is a JPEG")
	assert.NotEmpty(t, note)
	d, note = displayItem("image/svg+xml", bytes.Repeat([]byte("<svg>"), maxSVGBytes))
	assert.Nil(t, d)
	assert.Contains(t, note, "an SVG of 20480 KB was dropped")
	d, note = displayItem("application/x-evil", []byte("x"))
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
