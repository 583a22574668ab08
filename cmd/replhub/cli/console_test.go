package cli

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/replhub/replhub/wire"
)

// Above the prompt, output goes a whole line at a time (print writes "x"
// and "\n" apart); elsewhere as it comes.
func TestConsolePrint(t *testing.T) {
	var b strings.Builder
	k := &console{out: &b}
	k.prompting = true
	k.print("agent says hi")
	assert.Equal(t, "", b.String())
	k.print("\nand more")
	assert.Equal(t, "agent says hi\n", b.String())
	k.endLine()
	assert.Equal(t, "agent says hi\nand more\n", b.String())
	k.prompting = false
	k.print("0 1 2")
	assert.Equal(t, "agent says hi\nand more\n0 1 2", b.String())
	k.endLine()
	k.endLine()
	assert.Equal(t, "agent says hi\nand more\n0 1 2\n", b.String())
}

func TestConsoleResult(t *testing.T) {
	v := "42"
	k := &console{}
	assert.Equal(t, "[a note]\nrest\nOut[3]: 42\n", k.result(&wire.Result{Cell: 3, Notes: []string{"a note"}, Output: "rest", Value: &v}))
	assert.Equal(t, "Traceback ...\nKeyboardInterrupt\n", k.result(&wire.Result{Cell: 4, Error: &wire.CellError{Type: "KeyboardInterrupt", Traceback: "Traceback ...\nKeyboardInterrupt\n"}}))
	k.paint = true
	assert.Equal(t, "\x1b[36mOut[3]: \x1b[0m42\n", k.result(&wire.Result{Cell: 3, Value: &v}))
}
