// Package memory reads and maintains Claude Code's auto memory for a project:
// the folder ~/.claude/projects/<project>/memory/ with one markdown file per
// entry and the index MEMORY.md, one line per entry. It owns finding that
// folder, checking entry names and keeping the index in step with the files;
// it does not interpret what an entry says, nor its frontmatter.
//
// boot/replhub_toolkit/memory.py is the same logic for code in a session; the
// two must agree on the folder, the file names and the index line format, and
// memory_test.go runs one against the other.
//
// What Claude Code's documentation says (https://code.claude.com/docs/en/memory,
// "Auto memory", quoted in https://github.com/anthropics/claude-code/issues/82056):
// "Each project gets its own memory directory at
// ~/.claude/projects/<project>/memory/. The <project> path is derived from the
// git repository, so all worktrees and subdirectories within the same repo
// share one auto memory directory. Outside a git repo, the project root is
// used instead." The folder holds "a MEMORY.md index and one topic file per
// memory"; the first 200 lines (or 25 KB) of MEMORY.md are loaded into every
// session, topic files are read on demand. Claude Code's CHANGELOG
// (https://github.com/anthropics/claude-code/blob/main/CHANGELOG.md) adds:
// "Respect CLAUDE_CONFIG_DIR everywhere"; auto memory "shared across git
// worktrees of the same repository" (it follows the repository's common .git
// folder to the main worktree: issues #30667, #39920); project paths longer
// than 200 characters get names "under a shared sanitized prefix"; and
// CLAUDE_CODE_PROJECT_DIR_NAME lets a host choose the per-project folder's
// name, which we honour too.
//
// The documentation is silent on how <project> is spelt. We follow the
// convention observed on disk and in Claude Code's issues (#54791:
// /home/user/scm/myproject -> -home-user-scm-myproject; #34437): every
// character of the absolute path that is not an ASCII letter or digit becomes
// '-', counted in UTF-16 code units as JavaScript does, so a character outside
// the BMP gives two. A name longer than 200 characters gets a hash suffix we
// do not reproduce: we use the one existing folder with that 200-character
// prefix, or say to set REPLHUB_MEMORY_DIR. We do not read the
// autoMemoryDirectory setting of settings.json. The documentation is also
// silent on the index line's format; see indexLine.
package memory

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/replhub/replhub/internal/atomicfile"
)

// Index is the name of the index file in the memory folder.
const Index = "MEMORY.md"

// maxSlug is the longest project folder name Claude Code writes without a
// hash suffix.
const maxSlug = 200

// Dir returns the memory folder of the project that cwd belongs to; an empty
// cwd means the process's. $REPLHUB_MEMORY_DIR, when set, is the folder
// itself (relative to cwd when not absolute). Otherwise it is
// <base>/projects/<slug>/memory, where base is $CLAUDE_CONFIG_DIR or
// ~/.claude and slug is $CLAUDE_CODE_PROJECT_DIR_NAME or else spells the
// canonical git root of cwd (see ProjectRoot).
// The folder need not exist yet.
func Dir(cwd string) (string, error) {
	cwd, err := absDir(cwd)
	if err != nil {
		return "", err
	}
	if d := os.Getenv("REPLHUB_MEMORY_DIR"); d != "" {
		if !filepath.IsAbs(d) {
			d = filepath.Join(cwd, d)
		}
		return filepath.Clean(d), nil
	}
	base := os.Getenv("CLAUDE_CONFIG_DIR")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("memory: no home folder: %w", err)
		}
		base = filepath.Join(home, ".claude")
	}
	projects := filepath.Join(base, "projects")
	if n := os.Getenv("CLAUDE_CODE_PROJECT_DIR_NAME"); n != "" {
		if strings.ContainsAny(n, "/\\\x00") || n == "." || n == ".." {
			return "", fmt.Errorf("memory: CLAUDE_CODE_PROJECT_DIR_NAME %q is not a folder name", n)
		}
		return filepath.Join(projects, n, "memory"), nil
	}
	slug := Slug(ProjectRoot(cwd))
	if len(slug) > maxSlug {
		if slug, err = longSlug(projects, slug); err != nil {
			return "", err
		}
	}
	return filepath.Join(projects, slug, "memory"), nil
}

// absDir makes cwd absolute and resolves its symlinks, as getcwd(3) would
// have given it to Claude Code.
func absDir(cwd string) (string, error) {
	if cwd == "" {
		wd, err := os.Getwd()
		if err != nil {
			return "", fmt.Errorf("memory: %w", err)
		}
		cwd = wd
	}
	abs, err := filepath.Abs(cwd)
	if err != nil {
		return "", fmt.Errorf("memory: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err == nil {
		var fi os.FileInfo
		if fi, err = os.Stat(real); err == nil && !fi.IsDir() {
			err = errors.New("not a directory")
		}
	}
	if err != nil {
		return "", fmt.Errorf("memory: cwd %s: %v", abs, unwrapPath(err))
	}
	return real, nil
}

func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Slug spells an absolute path as Claude Code names its project folders:
// every character but an ASCII letter or digit becomes '-', one per UTF-16
// code unit.
func Slug(path string) string {
	var b strings.Builder
	for _, r := range path {
		switch {
		case r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'):
			b.WriteRune(r)
		case r > 0xFFFF:
			b.WriteString("--")
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// longSlug finds the folder Claude Code made for a slug too long to be a
// name of its own: the one folder whose name is the slug's first 200
// characters, a '-' and a suffix.
func longSlug(projects, slug string) (string, error) {
	prefix := slug[:maxSlug] + "-"
	names, _ := readDirNames(projects)
	var found []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			found = append(found, n)
		}
	}
	if len(found) == 1 {
		return found[0], nil
	}
	return "", fmt.Errorf("memory: the project path is too long for a folder name of its own (%d characters) and %d folders in %s match its first %d; set REPLHUB_MEMORY_DIR to the memory folder", len(slug), len(found), projects, maxSlug)
}

func readDirNames(dir string) ([]string, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}

// ProjectRoot returns the canonical git root of dir, an absolute path without
// symlinks: the nearest ancestor (or dir itself) holding a .git folder, or,
// where .git is a file (a linked worktree), the main worktree of its
// repository, so that all worktrees share one memory. A .git file without a
// commondir (a submodule) or whose repository is bare makes its own folder
// the root. Without any .git, the root is dir.
func ProjectRoot(dir string) string {
	for d := dir; ; {
		g := filepath.Join(d, ".git")
		if fi, err := os.Stat(g); err == nil {
			if fi.IsDir() {
				return d
			}
			if fi.Mode().IsRegular() {
				if m := mainWorktree(d, g); m != "" {
					return m
				}
				return d
			}
		}
		parent := filepath.Dir(d)
		if parent == d {
			return dir
		}
		d = parent
	}
}

// mainWorktree follows a .git file ("gitdir: X") to X/commondir, the
// repository's own .git folder, and returns the folder that holds it.
func mainWorktree(wt, gitFile string) string {
	gitdir := firstLine(gitFile)
	if !strings.HasPrefix(gitdir, "gitdir:") {
		return ""
	}
	gitdir = strings.TrimSpace(strings.TrimPrefix(gitdir, "gitdir:"))
	if !filepath.IsAbs(gitdir) {
		gitdir = filepath.Join(wt, gitdir)
	}
	common := firstLine(filepath.Join(gitdir, "commondir"))
	if common == "" {
		return ""
	}
	if !filepath.IsAbs(common) {
		common = filepath.Join(gitdir, common)
	}
	common = filepath.Clean(common)
	if real, err := filepath.EvalSymlinks(common); err == nil {
		common = real
	}
	if filepath.Base(common) != ".git" {
		return ""
	}
	return filepath.Dir(common)
}

// firstLine returns the first line of a small file, trimmed; "" when it
// cannot be read, is not a regular file or is larger than 64 KiB.
func firstLine(path string) string {
	b, err := atomicfile.ReadUserFile(path, 64<<10)
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line)
}
