package cmdenv

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/replhub/replhub/safesock"
	"github.com/replhub/replhub/wire"
)

func TestErrorText(t *testing.T) {
	assert.Equal(t, "session 's' is busy", ErrorText(fmt.Errorf("x: %w", &wire.Error{Code: wire.CodeBusy, Message: "session 's' is busy"})))
	assert.Equal(t, "no hub is running (`replhub start` starts one)", ErrorText(fmt.Errorf("%w (/x)", safesock.ErrNoHub)))
	assert.Contains(t, ErrorText(&safesock.PeerError{Want: 1000, Got: 0}), "refusing to send your code")
	assert.Equal(t, "plain", ErrorText(errors.New("plain")))
}
