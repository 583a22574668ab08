package cmdenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/internal/lazyre"
	"github.com/replhub/replhub/wire"
)

// extensions of the display items written to files.
var extensions = map[string]string{"image/png": ".png", "image/jpeg": ".jpg", "image/svg+xml": ".svg"}

var unsafeName = lazyre.New(`[^A-Za-z0-9._-]`)

// keepDisplay is how long an image file is kept: older ones go when new
// ones are written.
const keepDisplay = 7 * 24 * time.Hour

// SaveDisplay writes each image of r to a file of its own in the state
// folder's display/ (0600 in a 0700 folder; names never collide), sets its
// Path and drops its bytes, so that the text and --json show the path. A
// group's images are each host's, in files named after NAME@HOST.
func (e *Env) SaveDisplay(r *wire.Result) error {
	if !hasFiles(r) {
		return nil
	}
	paths, err := config.FromEnv(e.Getenv)
	if err != nil {
		return err
	}
	dir := paths.DisplayDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("display: %w", err)
	}
	prune(dir, time.Now().Add(-keepDisplay))
	if err := saveItems(dir, r.Session, r); err != nil {
		return err
	}
	for _, h := range r.Fan {
		if h.Result != nil {
			if err := saveItems(dir, r.Session+"@"+h.Host, h.Result); err != nil {
				return err
			}
		}
	}
	return nil
}

// hasFiles reports whether r, or a host of its group, has an item that
// goes to a file.
func hasFiles(r *wire.Result) bool {
	for i := range r.Display {
		if _, ok := extensions[r.Display[i].MIME]; ok && r.Display[i].Data != nil {
			return true
		}
	}
	for _, h := range r.Fan {
		if h.Result != nil && hasFiles(h.Result) {
			return true
		}
	}
	return false
}

// saveItems writes r's own items to files in dir named after session.
func saveItems(dir, session string, r *wire.Result) error {
	session = unsafeName.ReplaceAllString(session, "_")
	for i := range r.Display {
		d := &r.Display[i]
		ext, ok := extensions[d.MIME]
		if !ok || d.Data == nil {
			continue
		}
		f, err := os.CreateTemp(dir, fmt.Sprintf("%s-%d-%d-*%s", session, r.Cell, i+1, ext))
		if err != nil {
			return fmt.Errorf("display: %w", err)
		}
		_, werr := f.Write(d.Data)
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			os.Remove(f.Name())
			return fmt.Errorf("display: writing %s: %w", f.Name(), werr)
		}
		d.Path, d.Data, d.Text = filepath.Clean(f.Name()), nil, ""
	}
	return nil
}

// prune removes the image files in dir older than before.
func prune(dir string, before time.Time) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if !e.Type().IsRegular() || extensions[mimeOf(e.Name())] == "" {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.ModTime().Before(before) {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

func mimeOf(name string) string {
	for mime, ext := range extensions {
		if strings.HasSuffix(name, ext) {
			return mime
		}
	}
	return ""
}
