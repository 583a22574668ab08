package cmdenv

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/replhub/replhub/safesock"
	"github.com/replhub/replhub/wire"
)

func TestResultCode(t *testing.T) {
	for status, want := range map[string]int{wire.StatusOK: 0, wire.StatusError: 1, wire.StatusRunning: 3, wire.StatusDead: 4, wire.StatusIdle: 0} {
		assert.Equal(t, want, ResultCode(&wire.Result{Status: status}), status)
	}
}

func TestErrorText(t *testing.T) {
	assert.Equal(t, "session 's' is busy", ErrorText(fmt.Errorf("x: %w", &wire.Error{Code: wire.CodeBusy, Message: "session 's' is busy"})))
	assert.Equal(t, "no hub is running (`replhub start` starts one)", ErrorText(fmt.Errorf("%w (/x)", safesock.ErrNoHub)))
	assert.Contains(t, ErrorText(&safesock.PeerError{Want: 1000, Got: 0}), "refusing to send your code")
	assert.Equal(t, "plain", ErrorText(errors.New("plain")))
}
