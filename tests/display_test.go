package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	_ "image/jpeg"
	_ "image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/tests/hubtest"
	"github.com/replhub/replhub/tests/sshtest"
	"github.com/replhub/replhub/wire"
)

// mplPython is Debian's python3 with python3-matplotlib (see the README's
// test command).
func mplPython(t *testing.T) string {
	t.Helper()
	const py = "/usr/bin/python3"
	if exec.Command(py, "-c", "import matplotlib").Run() != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("CI needs python3-matplotlib for /usr/bin/python3")
		}
		t.Skip("needs python3-matplotlib for /usr/bin/python3")
	}
	return py
}

// richClasses defines, in a session, objects that show themselves as a
// PNG (made with the standard library: Big is 2400x1800, Mid 1600x1200,
// both over the hub's bounds), an SVG, HTML and Markdown.
const richClasses = `import struct, zlib
def _png(w, h):
    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    row = b"\x00" + b"".join(bytes((x & 255, 64, 128)) for x in range(w))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(row * h, 1)) + chunk(b"IEND", b""))
class Small:
    def _repr_png_(self): return _png(40, 30)
class Big:
    def _repr_png_(self): return _png(2400, 1800), {"width": 2400}
class Mid:
    def _repr_png_(self): return _png(1600, 1200)
class Vec:
    def _repr_svg_(self): return '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><circle r="4"/></svg>'
class Page:
    def _repr_html_(self): return "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>"
class Note:
    def _repr_markdown_(self): return "# Title"
    def __repr__(self): return "Note()"
`

var imageLine = regexp.MustCompile(`\[(image/[a-z+]+) (\d+)x(\d+)(?: \(scaled from (\d+)x(\d+)\))?, [\d.]+ [KM]?B: (\S+)\]`)

// checkImageFile checks a file the CLI wrote: private, in the state
// folder's display/, and an image of its type.
func checkImageFile(t *testing.T, e *hubtest.Env, path, mime string) image.Config {
	t.Helper()
	assert.Equal(t, e.Paths.DisplayDir(), filepath.Dir(path))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	di, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	if mime == "image/svg+xml" {
		assert.True(t, bytes.HasPrefix(b, []byte("<svg")), "%q", b)
		return image.Config{}
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(b))
	require.NoError(t, err)
	assert.Equal(t, mime, "image/"+format)
	return cfg
}

func TestDisplayCLI(t *testing.T) {
	t.Parallel()
	py := mplPython(t)
	e := hubtest.Start(t)
	e.Setenv("REPLHUB_PYTHON", py)

	// display() works before matplotlib is imported, and does not import it.
	r := e.Run("exec", "plots", richClasses+"import sys\ndisplay(Small())\n'matplotlib' in sys.modules")
	require.Equal(t, 0, r.Code, "%s", r)
	m := imageLine.FindAllStringSubmatch(r.Stdout, -1)
	require.Len(t, m, 1, "%s", r)
	assert.Equal(t, []string{"image/png", "40", "30"}, m[0][1:4])
	checkImageFile(t, e, m[0][6], "image/png")
	assert.Contains(t, r.Stdout, "Out[1]: False")

	// plt.show() shows the figure; a figure shown, as the value and left
	// open shows once.
	r = e.Run("exec", "plots", "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()")
	require.Equal(t, 0, r.Code, "%s", r)
	m = imageLine.FindAllStringSubmatch(r.Stdout, -1)
	require.Len(t, m, 1, "%s", r)
	cfg := checkImageFile(t, e, m[0][6], "image/png")
	assert.Greater(t, cfg.Width, 300)
	r = e.Run("exec", "plots", "fig, ax = plt.subplots()\nax.plot([3, 1])\nfig.show()\nfig")
	m = imageLine.FindAllStringSubmatch(r.Stdout, -1)
	require.Len(t, m, 1, "%s", r)
	assert.Contains(t, r.Stdout, "Out[3]: <Figure size 640x480 with 1 Axes>")
	// Figures left open at the end of a cell show, and are closed.
	r = e.Run("exec", "plots", "plt.figure(); plt.plot([1]); plt.figure(); plt.plot([2]); None")
	m = imageLine.FindAllStringSubmatch(r.Stdout, -1)
	require.Len(t, m, 2, "%s", r)
	assert.NotEqual(t, m[0][6], m[1][6], "names do not collide")
	r = e.Run("exec", "plots", "len(plt.get_fignums())")
	assert.Equal(t, "Out[5]: 0\n", r.Stdout, "%s", r)

	// Bigger images are scaled; SVG is a file too; HTML and Markdown are text.
	// (Scaling a big image is slow under -race on a busy machine.)
	r = e.Run("exec", "plots", "display(Big(), Vec(), Page(), Note())", "--json", "-t", "300")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.NotContains(t, r.Stdout, `"data"`, "the bytes are in files")
	var res wire.Result
	require.NoError(t, json.Unmarshal([]byte(r.Stdout), &res), r.Stdout)
	require.Len(t, res.Display, 4, r.Stdout)
	big, svg := res.Display[0], res.Display[1]
	cfg = checkImageFile(t, e, big.Path, big.MIME)
	assert.LessOrEqual(t, max(cfg.Width, cfg.Height), 1568)
	assert.True(t, big.Scaled)
	assert.Equal(t, [4]int{2400, 1800, cfg.Width, cfg.Height}, [4]int{big.OrigWidth, big.OrigHeight, big.Width, big.Height})
	assert.Equal(t, "image/svg+xml", svg.MIME)
	checkImageFile(t, e, svg.Path, svg.MIME)
	assert.Equal(t, wire.Display{MIME: "text/html", Text: "a | b\n1 | 2"}, res.Display[2])
	assert.Equal(t, wire.Display{MIME: "text/markdown", Text: "# Title"}, res.Display[3])
	// A value's image, scaled, in the text reply: one smaller than Big
	// (the hub takes seconds to decode and scale Big under -race).
	r = e.Run("exec", "plots", "Mid()", "-t", "300")
	assert.Regexp(t, `\[image/png 1238x928 \(scaled from 1600x1200\), [\d.]+ KB: \S+\]\nOut\[7\]: <__main__.Mid object at`, r.Stdout)

	// A root session's images come through the hub like any other.
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("sudo"); err == nil {
			r = e.Run("exec", "rootplots", "import os, matplotlib.pyplot as plt\nplt.plot([os.geteuid()])\nplt.show()", "--sudo")
			require.Equal(t, 0, r.Code, "%s", r)
			m = imageLine.FindAllStringSubmatch(r.Stdout, -1)
			require.Len(t, m, 1, "%s", r)
			checkImageFile(t, e, m[0][6], "image/png")
		}
	}
}

// mcpImages calls exec through MCP and returns the reply's text and its
// decoded images.
func mcpImages(t *testing.T, cs *sdk.ClientSession, name, code string) (string, []*sdk.ImageContent) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 330*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "exec", Arguments: map[string]any{"name": name, "code": code, "timeout": 300}})
	require.NoError(t, err)
	require.False(t, res.IsError, "%v", res.Content)
	var text strings.Builder
	var images []*sdk.ImageContent
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			text.WriteString(c.Text)
		case *sdk.ImageContent:
			images = append(images, c)
		}
	}
	return text.String(), images
}

func TestDisplayMCP(t *testing.T) {
	t.Parallel()
	py := mplPython(t)
	e := hubtest.Start(t)
	e.Setenv("REPLHUB_PYTHON", py)
	cs := mcpSession(t, e, nil)

	text, images := mcpImages(t, cs, "m", "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()")
	require.Len(t, images, 1, text)
	assert.Equal(t, "image/png", images[0].MIMEType)
	cfg, format, err := image.DecodeConfig(bytes.NewReader(images[0].Data))
	require.NoError(t, err)
	assert.Equal(t, "png", format)
	assert.Contains(t, text, fmt.Sprintf("[image/png %dx%d, ", cfg.Width, cfg.Height))

	// A 2400x1800 PNG comes back within 1568 px and 1 MB.
	text, images = mcpImages(t, cs, "m", richClasses+"display(Big(), Page())")
	require.Len(t, images, 1, text)
	cfg, _, err = image.DecodeConfig(bytes.NewReader(images[0].Data))
	require.NoError(t, err)
	assert.LessOrEqual(t, max(cfg.Width, cfg.Height), 1568)
	assert.LessOrEqual(t, len(images[0].Data), 1<<20)
	assert.Contains(t, text, "(scaled from 2400x1800)")
	assert.Contains(t, text, "a | b\n1 | 2")

	// An SVG comes back as its source.
	text, images = mcpImages(t, cs, "m", "Vec()")
	assert.Empty(t, images)
	assert.Contains(t, text, "[image/svg+xml, ")
	assert.Contains(t, text, "<circle r=\"4\"/>")

	// More than four images: four, and a note.
	text, images = mcpImages(t, cs, "m", "for i in range(6):\n    plt.figure(); plt.plot([i, 1])\n")
	assert.Len(t, images, 4)
	assert.Contains(t, text, "[2 more images not shown: a reply carries at most 4;")
}

func TestDisplayRemote(t *testing.T) {
	t.Parallel()
	py := mplPython(t)
	sshtest.Need(t)
	_, older := hubtest.PickPythons(t)
	w := newSSHWorld(t, []string{"lab"}, sshtest.Options{})
	r := w.Run("exec", "rplot", "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()", "--host", "lab", "--python", py)
	require.Equal(t, 0, r.Code, "%s", r)
	assert.Contains(t, r.Stdout, "[created session 'rplot' on lab")
	m := imageLine.FindAllStringSubmatch(r.Stdout, -1)
	require.Len(t, m, 1, "%s", r)
	checkImageFile(t, w.Env, m[0][6], "image/png")

	// An old Python on a host shows images too.
	r = w.Run("exec", "rold", richClasses+"display(Small())\nBig()", "--host", "lab", "--python", older, "-t", "300")
	require.Equal(t, 0, r.Code, "%s", r)
	m = imageLine.FindAllStringSubmatch(r.Stdout, -1)
	require.Len(t, m, 2, "%s", r)
	assert.Equal(t, "2400", m[1][4])
	checkImageFile(t, w.Env, m[1][6], "image/png")
}

// A group's images come back from each host: files named after the host
// (with --json, paths and no bytes), and MCP image blocks.
func TestDisplayGroup(t *testing.T) {
	t.Parallel()
	w := newSSHWorld(t, []string{"lab-a", "lab-b"}, sshtest.Options{})
	r := w.Run("exec", "gplots", richClasses+"display(Small())", "--hosts", "lab-a,lab-b", "-t", "120")
	require.Equal(t, 0, r.Code, "%s", r)
	m := imageLine.FindAllStringSubmatch(r.Stdout, -1)
	require.Len(t, m, 2, "%s", r)
	var names []string
	for _, mm := range m {
		assert.Equal(t, []string{"image/png", "40", "30"}, mm[1:4])
		checkImageFile(t, w.Env, mm[6], "image/png")
		names = append(names, filepath.Base(mm[6]))
	}
	sort.Strings(names)
	assert.Regexp(t, `^gplots_lab-a-1-1-\d+\.png$`, names[0])
	assert.Regexp(t, `^gplots_lab-b-1-1-\d+\.png$`, names[1])

	r = w.Run("exec", "gplots", "display(Small(), Vec())", "--json")
	require.Equal(t, 0, r.Code, "%s", r)
	assert.NotContains(t, r.Stdout, `"data"`, "the bytes are in files")
	lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
	require.Len(t, lines, 2, r.Stdout)
	for _, l := range lines {
		var h wire.HostResult
		require.NoError(t, json.Unmarshal([]byte(l), &h), l)
		require.Len(t, h.Display, 2, l)
		checkImageFile(t, w.Env, h.Display[0].Path, "image/png")
		checkImageFile(t, w.Env, h.Display[1].Path, "image/svg+xml")
		assert.Contains(t, h.Display[0].Path, "gplots_"+h.Host+"-2-1-")
	}

	cs := mcpSession(t, w.Env, nil)
	text, images := mcpImages(t, cs, "gplots", "for i in range(3): display(Small())")
	assert.Len(t, images, 4, text)
	assert.Contains(t, text, "[images from lab-a]")
	assert.Contains(t, text, "[images from lab-b]")
	assert.Contains(t, text, "[2 more images not shown: a reply carries at most 4;")
	for _, im := range images {
		_, format, err := image.DecodeConfig(bytes.NewReader(im.Data))
		require.NoError(t, err)
		assert.Equal(t, "png", format)
	}
}
