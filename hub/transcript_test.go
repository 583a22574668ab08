package hub

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A cell is written to the transcript after its exec frame went; when the
// cell killed the worker and its exit was handled first, the cell is still
// written (the death note points to the transcript), and the file is not
// left open.
func TestTranscriptAfterExit(t *testing.T) {
	p := testPaths(t)
	h := testHub(t, p)
	s := startedSession(h, "x", 4242)
	h.transcribe(s, &run{cell: 1, start: time.Now()}, "x = 1")
	require.NotNil(t, s.transcript, "open while the worker lives")

	// What the worker's waiter does at its exit.
	s.mu.Lock()
	s.transcript.Close()
	s.transcript = nil
	s.transcriptShut = true
	s.mu.Unlock()

	h.transcribe(s, &run{cell: 2, start: time.Now()}, "import os; os._exit(3)")
	h.transcribeNote(s, "died", "exit status 3")
	b, err := os.ReadFile(p.Transcript("x"))
	require.NoError(t, err)
	assert.Contains(t, string(b), "x = 1")
	assert.Contains(t, string(b), "os._exit(3)", "the cell that killed it is there")
	assert.Contains(t, string(b), "# exit status 3")
	assert.Nil(t, s.transcript, "and the file is closed again")
}

// A note's title and body are comments to the last line, whatever line
// breaks another session's names or paths bring.
func TestTranscriptNoteIsAllComment(t *testing.T) {
	p := testPaths(t)
	h := testHub(t, p)
	s := startedSession(h, "x", 4242)
	h.transcribeNote(s, "put from 'y': a\nimport os; os.system('boom')\r\nb\rc", "x\ny")
	b, err := os.ReadFile(p.Transcript("x"))
	require.NoError(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		assert.True(t, strings.HasPrefix(line, "#"), "a line of code in the transcript: %q", line)
		assert.NotContains(t, line, "\r")
	}
}
