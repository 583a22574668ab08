package config

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSwapSettings(t *testing.T) {
	for _, c := range []struct {
		in          string
		after, keep time.Duration
	}{
		{`{}`, 24 * time.Hour, 7 * 24 * time.Hour},
		{`{"swap_after_hours": 0, "swap_keep_days": 0}`, 0, 0},
		{`{"swap_after_hours": 0.5, "swap_keep_days": 1.5}`, 30 * time.Minute, 36 * time.Hour},
	} {
		f, err := Parse([]byte(c.in), "config.json")
		require.NoError(t, err, c.in)
		assert.Equal(t, c.after, f.SwapAfter(), c.in)
		assert.Equal(t, c.keep, f.SwapKeep(), c.in)
	}
	for in, want := range map[string]string{
		`{"swap_after_hours": -1}`:    "swap_after_hours must be a number of hours from 0 (off)",
		`{"swap_after_hours": 1e300}`: "swap_after_hours must be",
		`{"swap_keep_days": -2}`:      "swap_keep_days must be a number of days from 0 (keep)",
		`{"swap_keep_days": "7"}`:     "swap_keep_days",
	} {
		_, err := Parse([]byte(in), "config.json")
		assert.ErrorContains(t, err, want, in)
	}
}
