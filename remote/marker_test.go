package remote

import (
	"bufio"
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testMarker = "REPLHUB-0123 "

func readMarkerFrom(r io.Reader) (string, string, error) {
	var noise bytes.Buffer
	line, err := readMarker(bufio.NewReaderSize(r, 64<<10), testMarker, &noise)
	return line, noise.String(), err
}

// endless is a host that prints b for ever.
type endless struct{ b []byte }

func (e endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], e.b)
	}
	return n, nil
}

func TestReadMarker(t *testing.T) {
	line, noise, err := readMarkerFrom(strings.NewReader("Welcome to lab-7\nlast login: today\n" + testMarker + "FOUND 3.12 /usr/bin/python3\nframes"))
	require.NoError(t, err)
	assert.Equal(t, "FOUND 3.12 /usr/bin/python3", line)
	assert.Equal(t, "Welcome to lab-7\nlast login: today\n", noise)

	line, _, err = readMarkerFrom(strings.NewReader(testMarker + "MISSING"))
	require.NoError(t, err, "a marker the stream ends in")
	assert.Equal(t, "MISSING", line)

	_, noise, err = readMarkerFrom(strings.NewReader("motd\nbye\n"))
	assert.ErrorIs(t, err, io.EOF)
	assert.Equal(t, "motd\nbye\n", noise)

	// A line that does not end, then the marker: the start fails, having
	// read no more than the bound, and kept no more than maxNoise.
	_, noise, err = readMarkerFrom(io.MultiReader(io.LimitReader(endless{[]byte("x")}, 8<<20), strings.NewReader("\n"+testMarker+"FOUND 3.12 /p\n")))
	assert.ErrorIs(t, err, errTooMuchNoise)
	assert.LessOrEqual(t, len(noise), maxNoise)
	for _, host := range []io.Reader{endless{[]byte("y\n")}, endless{[]byte("no newline")}, endless{[]byte(testMarker[:5])}} {
		_, noise, err = readMarkerFrom(host)
		assert.ErrorIs(t, err, errTooMuchNoise)
		assert.LessOrEqual(t, len(noise), maxNoise)
	}
	// A long marker line is cut, not grown.
	line, _, err = readMarkerFrom(strings.NewReader(testMarker + "FOUND 3.12 /" + strings.Repeat("p", 1<<20) + "\n"))
	require.NoError(t, err)
	assert.Len(t, line, maxMarkerLine-len(testMarker))
}

// readMarkerRef is readMarker on a whole input, line by line.
func readMarkerRef(data []byte) (string, bool) {
	read := 0
	for _, l := range bytes.SplitAfter(data, []byte("\n")) {
		if read > maxBeforeMarker {
			return "", false
		}
		read += len(l)
		kept := l[:min(len(l), maxMarkerLine)]
		if bytes.HasPrefix(kept, []byte(testMarker)) {
			return strings.TrimSpace(string(kept[len(testMarker):])), true
		}
	}
	return "", false
}

// Whatever a host prints, readMarker ends, keeps its bounds, and finds
// what a plain line by line reading finds.
func FuzzReadMarker(f *testing.F) {
	f.Add([]byte("banner\n" + testMarker + "FOUND 3.12 /usr/bin/python3\n"))
	f.Add([]byte(testMarker + "NOPYTHON python3 python\n"))
	f.Add([]byte("REPLHUB-0124 FOUND\n" + testMarker))
	f.Add([]byte("\r\n\n\x00" + testMarker + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		line, noise, err := readMarkerFrom(bytes.NewReader(data))
		assert.LessOrEqual(t, len(noise), maxNoise)
		assert.LessOrEqual(t, len(line), maxMarkerLine)
		want, ok := readMarkerRef(data)
		assert.Equal(t, ok, err == nil, "found: %v", err)
		assert.Equal(t, want, line)
	})
}
