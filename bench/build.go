package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// installLine finds README.md's `go install ./cmd/replhub` and the
// variables set in front of it (CGO_ENABLED=0): the bench times the binary
// as a user builds it, not as a bare `go build` would.
var installLine = regexp.MustCompile(`((?:[A-Z_][A-Z0-9_]*=\S*\s+)*)go install \./cmd/replhub`)

// installEnv returns the variables README.md's install command sets.
func installEnv(readme string) ([]string, error) {
	b, err := os.ReadFile(readme)
	if err != nil {
		return nil, err
	}
	m := installLine.FindSubmatch(b)
	if m == nil {
		return nil, fmt.Errorf("%s: no `go install ./cmd/replhub` to build as", readme)
	}
	return strings.Fields(string(m[1])), nil
}

// buildDocumented builds the binary to out as README.md installs it and
// says how.
func buildDocumented(out string) (string, error) {
	vars, err := goBuild("", out, "./cmd/replhub")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(strings.Join(vars, " ") + " go build ./cmd/replhub"), nil
}

// goBuild builds package pkg of the module in dir ("": this one) to out
// with the variables README.md's install sets, and returns them.
func goBuild(dir, out, pkg string) ([]string, error) {
	vars, err := installEnv("README.md")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), vars...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return vars, nil
}

// buildHello builds, to out, the smallest Go program that prints a line,
// with the variables README.md's install sets: the floor of any Go
// binary's start on this machine (the runtime's own), against which
// `replhub --version` is measured too.
func buildHello(out string) error {
	dir, err := os.MkdirTemp("", "replhub-hello-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	src := "package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"hello\\n\") }\n"
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module hello\n\ngo 1.21\n"), 0o644); err != nil {
		return err
	}
	_, err = goBuild(dir, out, ".")
	return err
}
