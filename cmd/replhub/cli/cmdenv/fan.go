package cmdenv

import (
	"encoding/json"
	"io"

	"github.com/replhub/replhub/wire"
)

// writeJSONLines writes one compact JSON object a line: a group's hosts,
// for jq and line-by-line readers.
func writeJSONLines(w io.Writer, hosts []wire.HostResult) error {
	enc := json.NewEncoder(w)
	for _, h := range hosts {
		if err := enc.Encode(h); err != nil {
			return err
		}
	}
	return nil
}
