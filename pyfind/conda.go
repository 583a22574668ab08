package pyfind

import (
	"path/filepath"
	"strings"
)

// A conda prefix (an install's base, or an env) keeps a record of each
// package it holds in conda-meta/NAME-VERSION-BUILD.json, so its Python's
// version is there without running it: python-3.12.1-h5148396_0.json.

// condaMinor reads "3.N" from the record of the python package in the
// conda prefix that holds the interpreter at path (PREFIX/bin/python3),
// or "".
func condaMinor(path string) string {
	bin := filepath.Dir(path)
	if filepath.Base(bin) != "bin" || filepath.Base(path) != "python" && filepath.Base(path) != "python3" {
		return "" // python3-config, pip and the like are not the interpreter
	}
	files, _ := filepath.Glob(filepath.Join(filepath.Dir(bin), "conda-meta", "python-3.*.json"))
	for _, f := range files {
		if v := condaMetaMinor(filepath.Base(f)); v != "" {
			return v
		}
	}
	return ""
}

// condaMetaMinor reads "3.N" from the name of a conda-meta record of the
// python package ("python-3.12.1-h5148396_0.json"), or "" for any other
// name (python-dateutil-2.9.0-pyhd8ed1ab_0.json, python_abi-3.12-5_cp312.json).
func condaMetaMinor(name string) string {
	rec, ok := strings.CutSuffix(name, ".json")
	if !ok {
		return ""
	}
	// conda's own check: NAME-VERSION-BUILD, where neither VERSION nor
	// BUILD holds a dash.
	parts := strings.Split(rec, "-")
	if len(parts) != 3 || parts[0] != "python" || parts[2] == "" {
		return ""
	}
	return minorOf(parts[1])
}

// CondaPythons lists the python3 of every conda prefix a user with
// environment getenv has, in the order a start prefers them: the
// activated env, then each install's base and its envs (~/miniconda3,
// ~/anaconda3, ~/miniforge3, ~/mambaforge, micromamba's ~/micromamba or
// $MAMBA_ROOT_PREFIX), then the envs listed in ~/.conda/environments.txt.
func CondaPythons(getenv func(string) string) []string {
	prefixes := []string{getenv("CONDA_PREFIX")}
	if home := getenv("HOME"); filepath.IsAbs(home) {
		var roots []string
		for _, r := range []string{"miniconda3", "anaconda3", "miniforge3", "mambaforge", "micromamba"} {
			roots = append(roots, filepath.Join(home, r))
		}
		for _, root := range append(roots, getenv("MAMBA_ROOT_PREFIX")) {
			if filepath.IsAbs(root) && isDir(root) {
				envs, _ := filepath.Glob(filepath.Join(root, "envs", "*"))
				prefixes = append(append(prefixes, root), envs...)
			}
		}
		prefixes = append(prefixes, readVersionFile(filepath.Join(home, ".conda", "environments.txt"), false)...)
	}
	var out []string
	seen := map[string]bool{}
	for _, pre := range prefixes {
		p := filepath.Join(pre, "bin", "python3")
		if filepath.IsAbs(pre) && !seen[p] && isExec(p) {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}
