package pyenvtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Conda makes a fake conda prefix (an install's base or an env) at prefix:
// bin/python3 is a script that notes each run in the file ran, sleeps (a
// run costs, as a real interpreter's start does) and execs real; when
// version is not "", conda-meta holds the record of that python package
// as conda writes it (python-3.12.1-hd12c33a_0_cpython.json), beside records of
// packages whose names only look like it.
func Conda(t TB, prefix, version, real, ran string) {
	t.Helper()
	bin := filepath.Join(prefix, "bin")
	must(t, os.MkdirAll(bin, 0o755))
	sleep, err := exec.LookPath("sleep") // the script may run with any PATH
	must(t, err)
	script := fmt.Sprintf("#!/bin/sh\necho \"$0\" >> %s\n%s 0.3\nexec %s \"$@\"\n", ran, sleep, real)
	must(t, os.WriteFile(filepath.Join(bin, "python3"), []byte(script), 0o755))
	if version == "" {
		return
	}
	meta := filepath.Join(prefix, "conda-meta")
	must(t, os.MkdirAll(meta, 0o755))
	for _, rec := range []string{"history", "python-" + version + "-hd12c33a_0_cpython.json", "python-dateutil-2.9.0-pyhd8ed1ab_0.json", "python_abi-3.99-5_cp399.json"} {
		must(t, os.WriteFile(filepath.Join(meta, rec), []byte("{}\n"), 0o644))
	}
}
