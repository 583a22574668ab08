package hub

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/replhub/replhub/config"
	"github.com/replhub/replhub/pyfind"
	"github.com/replhub/replhub/wire"
)

// choosePython picks --python, else $REPLHUB_PYTHON, else the first python3
// on the caller's PATH (not the hub's: the hub may have been started from
// another shell), which is the one `python3` runs there, an activated conda
// env's included; else, when PATH has none, the activated conda env's or
// the first conda install's. A version manager's shim is resolved by the manager's
// rules for the caller's environment and cwd (package pyfind), so that a
// start does not pay for the shim; one that cannot be read is run as it is.
func choosePython(req wire.Request) (pyfind.Choice, error) {
	getenv := func(k string) string { return config.Getenv(req.Env, k) }
	path := getenv("PATH")
	var p string
	var err error
	switch env := getenv("REPLHUB_PYTHON"); {
	case req.Python != "":
		if p, err = lookPath(req.Python, path, req.Cwd); err != nil {
			return pyfind.Choice{}, fmt.Errorf("python %q: %v", req.Python, err)
		}
	case env != "":
		if p, err = lookPath(env, path, req.Cwd); err != nil {
			return pyfind.Choice{}, fmt.Errorf("$REPLHUB_PYTHON=%q: %v", env, err)
		}
	default:
		if p, err = lookPath("python3", path, req.Cwd); err == nil {
			break
		}
		conda := pyfind.CondaPythons(getenv)
		if len(conda) == 0 {
			return pyfind.Choice{}, errors.New("no python3 on your PATH: pass --python PATH or set REPLHUB_PYTHON")
		}
		p = conda[0]
	}
	c, _ := pyfind.Resolve(p, getenv, req.Cwd)
	return c, nil
}

// lookPath resolves name against path (a PATH value), like exec.LookPath;
// a relative path with a slash (./venv/bin/python) is the caller's, in
// its folder cwd (the hub's own may be any).
func lookPath(name, path, cwd string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) && cwd != "" {
			name = filepath.Join(cwd, name)
		}
		fi, err := os.Stat(name)
		if err != nil {
			return "", errors.New("not found")
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", errors.New("not an executable file")
		}
		return name, nil
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// localMinor is the major.minor a local session of this caller would run,
// which a remote start prefers; "" when it cannot be told. It is read from
// the interpreter's path where that tells, else asked of it once and kept
// in the state folder.
func (h *Hub) localMinor(req wire.Request) string {
	local := req
	local.Python = ""
	c, err := choosePython(local)
	if err != nil {
		return ""
	}
	return h.pythons.Minor(c.Path)
}
