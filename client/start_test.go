package client_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/client"
	"github.com/replhub/replhub/config"
)

// A client with no Exe starts the hub binary $REPLHUB_HUB_EXE names in its
// environment, with the hub's arguments; a relative path is the client's.
func TestHubExeVar(t *testing.T) {
	t.Run("absolute", func(t *testing.T) { testHubExeVar(t, false) })
	t.Run("relative", func(t *testing.T) { testHubExeVar(t, true) })
}

func testHubExeVar(t *testing.T, relative bool) {
	dir := t.TempDir()
	p, err := config.FromEnv(func(k string) string {
		if k == "XDG_RUNTIME_DIR" {
			return filepath.Join(dir, "run")
		}
		return filepath.Join(dir, k)
	})
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(filepath.Join(dir, "run"), 0o700))
	ran := filepath.Join(dir, "ran")
	script := filepath.Join(dir, "other-hub")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho \"$@\" > "+ran+"\nexit 3\n"), 0o700))
	named := script
	if relative {
		wd, err := os.Getwd()
		require.NoError(t, err)
		named, err = filepath.Rel(wd, script)
		require.NoError(t, err)
	}
	c := &client.Client{Paths: p, AutoStart: true,
		Env: []string{"REPLHUB_SUPERVISOR=detached", "PATH=" + os.Getenv("PATH"), client.HubExeVar + "=" + named}}
	defer c.Close()
	_, err = c.Sessions(context.Background())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the hub exited at start")
	b, err := os.ReadFile(ran)
	require.NoError(t, err, "the binary the variable names was not run")
	assert.Equal(t, "hub --supervisor detached\n", string(b))
}
