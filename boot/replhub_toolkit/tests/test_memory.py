"""Tests of replhub_toolkit.memory; the Go package memory's tests run the
same module against the Go side."""

import os
import shutil
import stat
import subprocess
import tempfile
import unittest

from replhub_toolkit import memory as M


class Env(unittest.TestCase):
    """A private HOME and project folder, the environment cleared of overrides."""

    VARS = ("HOME", "CLAUDE_CONFIG_DIR", "REPLHUB_MEMORY_DIR", "CLAUDE_CODE_PROJECT_DIR_NAME")

    def setUp(self):
        self.tmp = os.path.realpath(tempfile.mkdtemp())
        self.addCleanup(shutil.rmtree, self.tmp)
        saved = {k: os.environ.get(k) for k in self.VARS}

        def restore():
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.addCleanup(restore)
        for k in self.VARS:
            os.environ.pop(k, None)
        os.environ["HOME"] = os.path.join(self.tmp, "home")
        self.proj = os.path.join(self.tmp, "proj")
        os.makedirs(self.proj)
        self.mem = M.Memory(self.proj)
        self.dir = self.mem.folder()

    def index(self):
        with open(os.path.join(self.dir, "MEMORY.md"), encoding="utf-8") as f:
            return f.read()


class TestFolder(Env):
    def test_default(self):
        want = os.path.join(self.tmp, "home", ".claude", "projects", M.slug(self.proj), "memory")
        self.assertEqual(want, self.dir)
        self.assertTrue(M.slug(self.proj).startswith("-"))

    def test_slug(self):
        self.assertEqual("-home-user-scm-my-project", M.slug("/home/user/scm/my_project"))
        self.assertEqual("-a-b-c--d", M.slug("/a.b c/\u00e9d"))
        self.assertEqual("-x---y", M.slug("/x/\U0001F600y"))  # two UTF-16 units

    def test_config_dir_and_override(self):
        os.environ["CLAUDE_CONFIG_DIR"] = os.path.join(self.tmp, "cfg")
        self.assertEqual(os.path.join(self.tmp, "cfg", "projects", M.slug(self.proj), "memory"),
                         self.mem.folder())
        os.environ["CLAUDE_CODE_PROJECT_DIR_NAME"] = "short"
        self.assertEqual(os.path.join(self.tmp, "cfg", "projects", "short", "memory"),
                         self.mem.folder())
        os.environ["CLAUDE_CODE_PROJECT_DIR_NAME"] = "../x"
        with self.assertRaisesRegex(ValueError, "not a folder name"):
            self.mem.folder()
        os.environ["REPLHUB_MEMORY_DIR"] = "rel/mem"
        self.assertEqual(os.path.join(self.proj, "rel", "mem"), self.mem.folder())

    def git(self, *args):
        subprocess.check_call(("git",) + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def test_git_root_and_worktree(self):
        if not shutil.which("git"):
            self.skipTest("no git")
        self.git("init", "-q", self.proj)
        sub = os.path.join(self.proj, "a", "b")
        os.makedirs(sub)
        self.assertEqual(self.dir, M.Memory(sub).folder())
        self.git("-C", self.proj, "-c", "user.name=t", "-c", "user.email=t@t",
                 "commit", "-q", "--allow-empty", "-m", "init")
        wt = os.path.join(self.tmp, "wt")
        self.git("-C", self.proj, "worktree", "add", "-q", wt)
        self.assertEqual(self.dir, M.Memory(os.path.join(wt)).folder())
        # Outside any repository: the cwd itself.
        other = os.path.join(self.tmp, "other")
        os.makedirs(other)
        self.assertIn(M.slug(other), M.Memory(other).folder())

    def test_bad_cwd(self):
        with self.assertRaisesRegex(ValueError, "^memory: cwd .*no such"):
            M.Memory(os.path.join(self.tmp, "nope")).folder()

    def test_long_path(self):
        deep = os.path.join(self.proj, *(["d" * 50] * 5))
        os.makedirs(deep)
        with self.assertRaisesRegex(ValueError, "REPLHUB_MEMORY_DIR"):
            M.Memory(deep).folder()
        prefix = M.slug(deep)[:200]
        made = os.path.join(self.tmp, "home", ".claude", "projects", prefix + "-abc123")
        os.makedirs(made)
        self.assertEqual(os.path.join(made, "memory"), M.Memory(deep).folder())


class TestNames(unittest.TestCase):
    def test_good(self):
        for name, want in [("notes", "notes.md"), ("notes.md", "notes.md"),
                           ("feedback_testing.md", "feedback_testing.md"),
                           ("a-b.c", "a-b.c.md"), ("x" * 197, "x" * 197 + ".md")]:
            self.assertEqual(want, M.clean_name(name))

    def test_bad(self):
        for name, why in [("", "empty"), ("a\x00b", "NUL"), ("a/b", "is a path"),
                          ("..\\x", "is a path"), (".hidden", "starts with a dot"),
                          ("..", "starts with a dot"), ("a..b", "'..'"), ("a.", "'..'"),
                          ("a b", "character other"), ("n\u00e9", "character other"),
                          ("a\nb", "character other"), ("x" * 198, "at most 200"),
                          ("MEMORY", "is the index"), ("memory.md", "is the index"), (3, "must be a str")]:
            with self.assertRaisesRegex(ValueError, "^memory: .*" + why, msg=repr(name)):
                M.clean_name(name)


class TestStore(Env):
    def test_empty(self):
        self.assertEqual([], list(self.mem()))
        self.assertEqual("memory: %s (no entries)\n" % self.dir, self.mem().__replhub_show__())

    def test_write_read_list(self):
        r = self.mem.write("testing", "Run go test -race.\n", index="how tests run")
        self.assertEqual("wrote testing.md (19 bytes); MEMORY.md line added", r)
        self.assertEqual(r, r.__replhub_show__())
        self.assertEqual("Run go test -race.\n", self.mem.read("testing.md"))
        self.assertEqual("- [testing](testing.md) \u2014 how tests run\n", self.index())
        self.assertEqual(0o600, stat.S_IMODE(os.stat(os.path.join(self.dir, "testing.md")).st_mode))
        self.assertEqual(0o700, stat.S_IMODE(os.stat(self.dir).st_mode))
        # Rewriting keeps the line; a new hook updates it, keeping the title.
        self.assertTrue(self.mem.write("testing", "v2").endswith("line kept"))
        with open(os.path.join(self.dir, "MEMORY.md"), "w") as f:
            f.write("# Memory\n\n- [Tests](testing.md) - old hook\n- [Other](https://x.org)\n")
        self.assertTrue(self.mem.write("testing", "v3", index="new hook").endswith("line updated"))
        self.assertEqual("# Memory\n\n- [Tests](testing.md) \u2014 new hook\n- [Other](https://x.org)\n",
                         self.index())
        self.mem.write("b", "bee")
        with open(os.path.join(self.dir, "loose.md"), "w") as f:
            f.write("no index line")
        with open(os.path.join(self.dir, "MEMORY.md"), "a") as f:
            f.write("* [Gone](./gone.md): was here\n")
        l = self.mem()
        self.assertEqual(["testing.md", "b.md", "gone.md", "loose.md"], [e.name for e in l])
        self.assertEqual(
            "memory: %s (4 entries)\n"
            "testing.md  new hook\n"
            "b.md  \n"
            "gone.md  was here  (file missing)\n"
            "loose.md  (no line in MEMORY.md)\n" % self.dir, l.__replhub_show__())
        self.assertEqual(l.__replhub_show__().rstrip("\n"), repr(l))

    def test_no_temp_files_left(self):
        self.mem.write("a", "x", index="h")
        self.mem.edit("a", "x", "y")
        self.assertEqual(["MEMORY.md", "a.md"], sorted(os.listdir(self.dir)))

    def test_mode_kept(self):
        self.mem.write("a", "x")
        p = os.path.join(self.dir, "a.md")
        os.chmod(p, 0o644)
        self.mem.write("a", "y")
        self.assertEqual(0o644, stat.S_IMODE(os.stat(p).st_mode))

    def test_bad_hook_and_text(self):
        for hook, why in [("a\nb", "one line"), ("x" * 301, "at most 300"), (5, "must be a str")]:
            with self.assertRaisesRegex(ValueError, why):
                self.mem.write("a", "t", index=hook)
        with self.assertRaisesRegex(ValueError, "text must be a str"):
            self.mem.write("a", b"bytes")
        self.assertFalse(os.path.exists(self.dir))

    def test_edit(self):
        self.mem.write("a", "one two two three\n", index="h")
        self.assertEqual("edited a.md (18 bytes)", self.mem.edit("a", "one", "uno"))
        self.assertEqual("uno two two three\n", self.mem.read("a"))
        with self.assertRaisesRegex(ValueError, "occurs 2 times in a.md"):
            self.mem.edit("a", "two", "2")
        with self.assertRaisesRegex(ValueError, "not found in a.md"):
            self.mem.edit("a", "four", "4")
        with self.assertRaisesRegex(ValueError, "old is empty"):
            self.mem.edit("a", "", "4")
        with self.assertRaisesRegex(FileNotFoundError, "no entry nope.md"):
            self.mem.edit("nope", "a", "b")
        self.assertEqual("uno two two three\n", self.mem.read("a"))

    def test_crlf_and_bytes_kept(self):
        os.makedirs(self.dir)
        with open(os.path.join(self.dir, "MEMORY.md"), "wb") as f:
            f.write(b"- [A](a.md) \xe2\x80\x94 h\r\n")
        with open(os.path.join(self.dir, "a.md"), "wb") as f:
            f.write(b"x\r\n\xff y\r\n")
        self.mem.edit("a", "y", "z")
        with open(os.path.join(self.dir, "a.md"), "rb") as f:
            self.assertEqual(b"x\r\n\xff z\r\n", f.read())
        self.mem.write("a", "t", index="h2")
        with open(os.path.join(self.dir, "MEMORY.md"), "rb") as f:
            self.assertEqual(b"- [A](a.md) \xe2\x80\x94 h2\r\n", f.read())

    def test_delete(self):
        self.mem.write("a", "x", index="h")
        self.mem.write("b", "y", index="i")
        self.assertEqual("deleted a.md and its MEMORY.md line", self.mem.delete("a"))
        self.assertEqual("- [b](b.md) \u2014 i\n", self.index())
        os.unlink(os.path.join(self.dir, "b.md"))
        self.assertEqual("deleted the MEMORY.md line of b.md (its file was already gone)",
                         self.mem.delete("b.md"))
        self.assertEqual("", self.index())
        with self.assertRaisesRegex(FileNotFoundError, "^memory: no entry b.md in "):
            self.mem.delete("b")
        with self.assertRaisesRegex(FileNotFoundError, "no entry zz.md"):
            self.mem.read("zz")

    def test_help(self):
        self.assertIn(".write(name, text, index=", M.HELP["memory"])
        self.assertEqual(M.HELP["memory"], M.memory.__replhub_show__())
        self.assertTrue(callable(M.memory))


if __name__ == "__main__":
    unittest.main()
