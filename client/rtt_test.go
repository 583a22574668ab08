package client_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/replhub/replhub/client"
)

// BenchmarkExecRoundTrip times a trivial cell's round trip through an
// in-process hub and a local worker, the client package's whole path:
// `go test -bench ExecRoundTrip -cpuprofile cpu.out ./client` shows where
// the hub's side of it goes.
func BenchmarkExecRoundTrip(b *testing.B) {
	for _, code := range []string{"1", "print(1)"} {
		b.Run(code, func(b *testing.B) {
			c := client.New(startHub(b))
			ctx := context.Background()
			o := client.ExecOptions{Python: python(b)}
			_, err := c.Exec(ctx, "b", code, o)
			require.NoError(b, err)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := c.Exec(ctx, "b", code, o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
