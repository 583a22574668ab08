package tests

import (
	"os"
	"testing"

	"github.com/replhub/replhub/tests/hubtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	removeSudoRules()
	hubtest.RemoveBinary()
	os.Exit(code)
}
