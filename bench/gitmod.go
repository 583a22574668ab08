package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/replhub/replhub/client"
)

func init() {
	measureAlone("git", "measure only the git module: log(1000) and cat of 1000 blobs, against git subprocesses", gitRows)
}

// gitDriver times replhub.git inside a session (imported as users import
// it, from the hub) against the git binary run as a subprocess from the
// same session, and prints the medians as JSON. It expects path (the
// repository) and runs to be set.
const gitDriver = `
import json, subprocess, time
from replhub import git
fmt = "--format=%H%x00%P%x00%an <%ae>%x00%at%x00%s"

def median(f, n):
    ds = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        ds.append(time.perf_counter() - t)
    return sorted(ds)[len(ds) // 2]

def base_log():
    out = subprocess.run(["git", "-C", path, "log", "-1000", fmt], stdout=subprocess.PIPE, check=True).stdout
    return [l.split("\0") for l in out.decode().splitlines()]

r = git.repo(path)
assert [c.id for c in r.log(1000)] == [l[0] for l in base_log()], "log differs from git's"
objs = subprocess.run(["git", "-C", path, "cat-file", "--batch-all-objects", "--batch-check"],
                      stdout=subprocess.PIPE, check=True).stdout.decode().split("\n")
blobs = [l.split()[0] for l in objs if l.split()[1:2] == ["blob"]][:1000]
assert len(blobs) == 1000, len(blobs)

def base_cat():
    for b in blobs:
        subprocess.run(["git", "-C", path, "cat-file", "-p", b], stdout=subprocess.PIPE, check=True)

def cat():
    for b in blobs:
        r.cat(b)

print("GITBENCH " + json.dumps({
    "log_warm": median(lambda: r.log(1000), runs),
    "log_cold": median(lambda: git.Repo(path).log(1000), runs),
    "log_base": median(base_log, runs),
    "cat_warm": median(cat, max(3, runs // 3)),
    "log_used": median(lambda: [(c.subject, c.author, c.date) for c in git.Repo(path).log(1000)], runs),
    "cat_cold": median(lambda: [fresh.cat(b) for fresh in [git.Repo(path)] for b in blobs], max(3, runs // 3)),
    "cat_base": median(base_cat, 3),
}))
`

// gitRows measures modules/git.py where users feel it, inside a session:
// log(1000) and cat of 1000 blobs, each against the git binary as a
// subprocess, on a packed repository of 1,500 commits (git gc: deltas and
// a commit-graph).
func gitRows(w *world, n int) ([]row, error) {
	dir := filepath.Join(w.root, "gitrepo")
	if err := makeGitRepo(dir, 1500); err != nil {
		return nil, err
	}
	code := fmt.Sprintf("path, runs = %q, %d\n%s", dir, n, gitDriver)
	res, err := w.c.Exec(context.Background(), "gitbench", code, client.ExecOptions{Cwd: w.cwd, Env: w.env, Timeout: 10 * time.Minute})
	if err != nil {
		return nil, err
	}
	_, js, ok := strings.Cut(res.Output, "GITBENCH ")
	var m map[string]float64
	if !ok || json.Unmarshal([]byte(strings.TrimSpace(js)), &m) != nil {
		return nil, fmt.Errorf("git bench in a session: %s", res.Text())
	}
	d := func(k string) time.Duration { return time.Duration(m[k] * float64(time.Second)) }
	faster := func(a, b string) string {
		if m[a] > m[b] {
			return fmt.Sprintf("%.2fx slower", m[a]/m[b])
		}
		return fmt.Sprintf("%.1fx faster", m[b]/m[a])
	}
	return []row{
		{"`git.log(1000)` in a session, repository already open", ms(d("log_warm")), "`git log -1000 --format=...` subprocess " + ms(d("log_base")), faster("log_warm", "log_base"), "faster"},
		{"`git.Repo(path).log(1000)`, opened anew", ms(d("log_cold")), "the same subprocess " + ms(d("log_base")), faster("log_cold", "log_base"), ""},
		{"the same, reading each commit's subject, author and date", ms(d("log_used")), "the same subprocess " + ms(d("log_base")), faster("log_used", "log_base"), ""},
		{"`git.cat(id)` of 1000 blobs, repository already open", ms(d("cat_warm")), "one `git cat-file -p` per blob " + ms(d("cat_base")), faster("cat_warm", "cat_base"), "faster"},
		{"`git.cat(id)` of 1000 blobs, opened anew", ms(d("cat_cold")), "the same subprocesses " + ms(d("cat_base")), faster("cat_cold", "cat_base"), ""},
	}, nil
}

// makeGitRepo writes a repository of `commits` commits through git
// fast-import, each changing one of 20 growing files, then packs it.
func makeGitRepo(dir string, commits int) error {
	git := func(stdin []byte, args ...string) error {
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
		cmd.Stdin = bytes.NewReader(stdin)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v\n%s", args[0], err, out)
		}
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := git(nil, "init", "-q", "-b", "main"); err != nil {
		return err
	}
	var b bytes.Buffer
	files := make([]strings.Builder, 20)
	for i := 0; i < commits; i++ {
		f := &files[i%20]
		fmt.Fprintf(f, "line %d: some text that a source file might hold, changed in commit %d\n", f.Len()/70, i)
		msg := fmt.Sprintf("commit %d: change file %d\n", i, i%20)
		fmt.Fprintf(&b, "commit refs/heads/main\ncommitter A U Thor <a@example.com> %d +0000\ndata %d\n%s", 1700000000+60*i, len(msg), msg)
		fmt.Fprintf(&b, "M 100644 inline f%02d.txt\ndata %d\n%s\n", i%20, f.Len(), f.String())
	}
	if err := git(b.Bytes(), "fast-import", "--quiet"); err != nil {
		return err
	}
	return git(nil, "gc", "-q")
}
