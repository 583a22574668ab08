"""Builds the repositories the tests of git.py read, with the git binary:

    python fixtures.py DIR

loose      commits (a merge, a clock skew, tags, a binary file, a mode change,
           a symlink, a deletion), loose objects only
packed     a clone of loose with 60 revisions of a file more, repacked: OFS deltas
refdelta   the same repacked with REF deltas only (repack.useDeltaBaseOffset=false)
worktree   a linked worktree of packed (a .git file, commondir)
shared     `git clone --shared` of packed (alternates) with a commit of its own
sha256     a SHA-256 repository

and revs.json, git's answers to the revisions test_git asks of them.
Dates are fixed, so logs order the same on every run."""

import json
import os
import subprocess
import sys

ENV = dict(os.environ, GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="A U Thor", GIT_AUTHOR_EMAIL="author@example.com",
           GIT_COMMITTER_NAME="C O Mitter", GIT_COMMITTER_EMAIL="committer@example.com", LC_ALL="C",
           GIT_TERMINAL_PROMPT="0")
ENV["HOME"] = os.environ.get("GITMOD_HOME", "/nonexistent")


def git(cwd, *args, **kw):
    env = dict(ENV)
    env.update(kw.pop("env", {}))
    return subprocess.run(["git"] + list(args), cwd=cwd, env=env, check=True, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, **kw).stdout


class Clock(object):
    def __init__(self, t=1700000000):
        self.t = t

    def commit(self, cwd, msg, dt=60, tz="+0100", *extra):
        self.t += dt
        d = "%d %s" % (self.t, tz)
        git(cwd, "commit", "-q", "-m", msg, *extra, env={"GIT_AUTHOR_DATE": d, "GIT_COMMITTER_DATE": d})


def write(path, data, mode="w"):
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, mode) as f:
        f.write(data)


def build_loose(root):
    r = os.path.join(root, "loose")
    os.makedirs(r)
    git(r, "init", "-q", "-b", "main")
    git(r, "config", "gc.auto", "0")
    clock = Clock()
    write(os.path.join(r, "README.md"), "# demo\n\nA small project.\n")
    write(os.path.join(r, "src/app.py"), "import os\n\n\ndef main():\n    print('hi')\n    return 0\n\n\nclass Thing:\n"
          + "".join("    x%d = %d\n" % (i, i) for i in range(20)))
    write(os.path.join(r, "bin.dat"), bytes(range(256)) * 4, "wb")
    git(r, "add", "-A")
    clock.commit(r, "initial import\n\nWith a body of two lines,\nthis is the second.")
    write(os.path.join(r, "src/app.py"), "import os\n\n\ndef main():\n    print('hello')\n    return 0\n\n\nclass Thing:\n"
          + "".join("    x%d = %d\n" % (i, i) for i in range(20)) + "    y = 1\n")
    clock.commit(r, "app: say hello", 60, "-0700", "-a")
    git(r, "tag", "v1")
    git(r, "tag", "-a", "-m", "release one", "v1-annotated", env={"GIT_COMMITTER_DATE": "%d +0000" % clock.t})
    git(r, "checkout", "-q", "-b", "feature")
    write(os.path.join(r, "docs/guide.txt"), "line one\nline two\n")
    git(r, "add", "-A")
    clock.commit(r, "docs: a guide", 30)
    git(r, "checkout", "-q", "main")
    write(os.path.join(r, "README.md"), "# demo\n\nA small project, now larger.\n")
    os.chmod(os.path.join(r, "README.md"), 0o755)
    clock.commit(r, "readme: executable, for no reason", 100, "+0530", "-a")
    git(r, "checkout", "-q", "feature")
    write(os.path.join(r, "docs/guide.txt"), "line one\nline two\nline three")
    clock.commit(r, "docs: no newline at the end", 10, "+0000", "-a")
    git(r, "checkout", "-q", "main")
    git(r, "merge", "-q", "--no-ff", "-m", "Merge branch 'feature'", "feature",
        env={"GIT_AUTHOR_DATE": "%d +0000" % (clock.t + 500), "GIT_COMMITTER_DATE": "%d +0000" % (clock.t + 500)})
    clock.t += 500
    os.symlink("src/app.py", os.path.join(r, "link"))
    os.remove(os.path.join(r, "bin.dat"))
    write(os.path.join(r, "bin2.dat"), b"\0\1\2" * 100, "wb")
    git(r, "add", "-A")
    clock.commit(r, "a link, a binary gone and one new", -2000)  # a commit older than its parent
    clock.t += 4000
    write(os.path.join(r, "src/app.py"), "import os\nimport sys\n\n\ndef main():\n    print('hello')\n    return 0\n\n\nclass Thing:\n"
          + "".join("    x%d = %d\n" % (i, i) for i in range(20)) + "    y = 2\n")
    clock.commit(r, "app: two edits far apart", 10, "+0000", "-a")
    return r


def build_packed(root, loose):
    r = os.path.join(root, "packed")
    git(root, "clone", "-q", "--no-local", loose, r)
    git(r, "config", "gc.auto", "0")
    git(r, "checkout", "-q", "-b", "many")
    clock = Clock(1700100000)
    lines = ["line %d of a file that changes a little in every revision\n" % i for i in range(300)]
    for n in range(60):
        lines[(n * 7) % 300] = "revision %d changed this line\n" % n
        write(os.path.join(r, "big.txt"), "".join(lines))
        git(r, "add", "big.txt")
        clock.commit(r, "big: revision %d" % n, 5)
    git(r, "checkout", "-q", "main")
    git(r, "repack", "-a", "-d", "-f", "-q", "--depth=50")
    git(r, "pack-refs", "--all")
    return r


def build_refdelta(root, packed):
    r = os.path.join(root, "refdelta")
    git(root, "clone", "-q", "--no-local", packed, r)
    git(r, "config", "gc.auto", "0")
    git(r, "-c", "repack.useDeltaBaseOffset=false", "repack", "-a", "-d", "-f", "-q")
    return r


def build_worktree(root, packed):
    r = os.path.join(root, "worktree")
    git(packed, "worktree", "add", "-q", "-b", "wt", r, "main~1")
    return r


def build_shared(root, packed):
    r = os.path.join(root, "shared")
    git(root, "clone", "-q", "--shared", packed, r)
    git(r, "config", "gc.auto", "0")
    write(os.path.join(r, "own.txt"), "only in the shared clone\n")
    git(r, "add", "own.txt")
    Clock(1700200000).commit(r, "a commit of the clone's own")
    return r


def build_sha256(root):
    r = os.path.join(root, "sha256")
    os.makedirs(r)
    git(r, "init", "-q", "-b", "main", "--object-format=sha256")
    clock = Clock()
    for n in range(5):
        write(os.path.join(r, "f.txt"), "".join("v%d line %d\n" % (n, i) for i in range(10)))
        git(r, "add", "f.txt")
        clock.commit(r, "sha256 commit %d" % n)
    return r


# The revisions test_git's rev_parse test asks of the repositories: these
# of each but the worktree, and each one's own.
REVS = ["HEAD", "@", "main", "v1", "v1-annotated", "v1-annotated^{}", "v1-annotated^{commit}",
        "HEAD~2", "HEAD^", "HEAD~2^2", "HEAD~2^2~1", "HEAD~3^1", "HEAD^0", "HEAD~", "HEAD^{tree}",
        "HEAD:src/app.py", "main:src", "HEAD:", "HEAD~1:bin2.dat", "v1:README.md", "refs/heads/main",
        "feature", "feature~1", "HEAD@{0}", "main^{/readme}"]
OWN_REVS = (("loose", []), ("packed", ["origin/main", "many~10", "many~10:big.txt", "origin/HEAD"]),
            ("refdelta", ["many^^^"]), ("worktree", ["wt", "HEAD"]), ("shared", ["origin/many"]))


def rev_cases():
    """[(repository, revisions)] of test_git's rev_parse test."""
    return [(name, (REVS if name != "worktree" else []) + own) for name, own in OWN_REVS]


def write_revs(root):
    """git's answers to rev_cases() in root's repositories, in revs.json:
    {name: {"revs": {rev: id, or None where git refuses it}, "short":
    [HEAD~1's id cut to 9 digits, the id git gives for it]}}. They are
    the same for every Python: asked of git once, here."""
    out = {}
    for name, revs in rev_cases():
        cwd = os.path.join(root, name)
        answers = {}
        for rev in revs:
            try:
                answers[rev] = git(cwd, "rev-parse", "--verify", rev).decode().strip()
            except subprocess.CalledProcessError:
                answers[rev] = None
        short = git(cwd, "rev-parse", "HEAD~1").decode()[:9]
        out[name] = {"revs": answers, "short": [short, git(cwd, "rev-parse", short).decode().strip()]}
    with open(os.path.join(root, "revs.json"), "w") as f:
        json.dump(out, f)


def build(root):
    loose = build_loose(root)
    packed = build_packed(root, loose)
    build_refdelta(root, packed)
    build_worktree(root, packed)
    build_shared(root, packed)
    build_sha256(root)
    write_revs(root)
    with open(os.path.join(root, "done"), "w") as f:
        f.write("ok\n")


if __name__ == "__main__":
    build(sys.argv[1])
