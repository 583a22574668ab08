"""Tests of replhub_toolkit.shell with real bash, real processes and a
loopback HTTP server.  Every process a test starts is ended before it
returns; every wait is bounded."""

import http.server
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from unittest import mock

from replhub_toolkit import shell

BOOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def gone(pid, within=5.0):
    """Whether pid has ended (a zombie counts) within `within` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except (OSError, IndexError):
            pass
        time.sleep(0.05)
    return False


def written(path):
    """Whether path holds a whole line."""
    try:
        with open(path) as f:
            return f.read().endswith("\n")
    except OSError:
        return False


def kill(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


class Tmp(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test-shell-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def read_pid(self, name="pid"):
        path = os.path.join(self.tmp, name)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                with open(path) as f:
                    text = f.read().strip()
                if text:
                    pid = int(text)
                    self.addCleanup(kill, pid)
                    return pid
            except OSError:
                pass
            time.sleep(0.02)
        self.fail("no pid written to " + path)


class ShTest(Tmp):
    def test_str_runs_through_bash_with_pipefail(self):
        r = shell.sh("echo hello; echo there")
        self.assertEqual(r, "hello\nthere\n")
        self.assertIsInstance(r, str)
        self.assertEqual((r.out, r.err, r.code, r.ok), ("hello\nthere\n", "", 0, True))
        self.assertEqual(r.cmd, "echo hello; echo there")
        r = shell.sh("false | true", check=False)
        self.assertEqual(r.code, 1)

    def test_list_runs_without_a_shell(self):
        r = shell.sh(["printf", "%s|", "a b", "$HOME", ";"])
        self.assertEqual(r, "a b|$HOME|;|")

    def test_input(self):
        self.assertEqual(shell.sh(["cat"], input="sécret\n"), "sécret\n")
        self.assertEqual(shell.sh("wc -c", input=b"\x00" * 100000).strip(), "100000")
        self.assertEqual(shell.sh("cat"), "")  # stdin is /dev/null without input

    def test_input_a_command_does_not_read(self):
        r = shell.sh("exit 0", input="x" * (4 * 2 ** 20), timeout=10)
        self.assertTrue(r.ok)

    def test_merge_keeps_order(self):
        r = shell.sh("echo 1; echo 2 >&2; echo 3; echo 4 >&2", merge=True)
        self.assertEqual(r.out, "1\n2\n3\n4\n")
        self.assertEqual(r.err, "")

    def test_check(self):
        with self.assertRaises(shell.CommandError) as cm:
            shell.sh("echo out; echo first problem >&2; echo more >&2; exit 2")
        self.assertEqual(str(cm.exception), "sh: exit 2: first problem")
        self.assertEqual(cm.exception.result.out, "out\n")
        self.assertEqual(cm.exception.result.code, 2)
        r = shell.sh("echo out; echo bad >&2; exit 3", check=False)
        self.assertFalse(r.ok)
        self.assertEqual(r.__replhub_show__(), "out\n[stderr]\nbad\n[exit 3]")
        self.assertEqual(shell.sh("echo fine").__replhub_show__(), "fine")
        with self.assertRaises(shell.CommandError) as cm:
            shell.sh("echo last words; exit 4", merge=True)
        self.assertEqual(str(cm.exception), "sh: exit 4: last words")

    def test_cwd_and_env(self):
        self.assertEqual(shell.sh("pwd", cwd=self.tmp).strip(), os.path.realpath(self.tmp))
        r = shell.sh('echo "$REPLHUB_T1:${HOME:+home}"', env={"REPLHUB_T1": "one"})
        self.assertEqual(r, "one:home\n")
        with mock.patch.dict(os.environ, {"REPLHUB_T2": "set"}):
            r = shell.sh('echo "${REPLHUB_T2-unset}"', env={"REPLHUB_T2": None})
        self.assertEqual(r, "unset\n")

    def test_timeout_ends_the_group(self):
        start = time.monotonic()
        with self.assertRaises(shell.CommandTimeout) as cm:
            shell.sh("echo started; sleep 300 & echo $! > %s/pid; wait" % self.tmp, timeout=1)
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(str(cm.exception), "sh: no end within 1s; its processes were stopped")
        self.assertEqual(cm.exception.result.out, "started\n")
        self.assertTrue(gone(self.read_pid()), "the child sleep outlived the timeout")

    def test_interrupt_ends_the_group(self):
        old = signal.signal(signal.SIGINT, signal.default_int_handler)
        self.addCleanup(signal.signal, signal.SIGINT, old)
        pid = os.path.join(self.tmp, "pid")
        # Outside a worker, held() keeps no SIGINT pending: one that lands
        # before sh() has its process (the command may write its pid first)
        # leaves the group to run. Sent once both are there, sh() waits.
        spawned = threading.Event()
        real = shell._spawn

        def spawn(*args, **kwargs):
            proc = real(*args, **kwargs)
            spawned.set()
            return proc
        shell._spawn = spawn
        self.addCleanup(setattr, shell, "_spawn", real)

        def interrupt():
            deadline = time.monotonic() + 10
            while not (spawned.is_set() and written(pid)) and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.01)  # sh() past its assignment of the process
            os.kill(os.getpid(), signal.SIGINT)
        interrupter = threading.Thread(target=interrupt)
        interrupter.start()
        self.addCleanup(interrupter.join)
        with self.assertRaises(KeyboardInterrupt):
            shell.sh("sleep 300 & echo $! > %s/pid; wait" % self.tmp, timeout=30)
        self.assertTrue(gone(self.read_pid()), "the child sleep outlived the interrupt")

    def test_left_running_does_not_hold_sh(self):
        # sh() reads on for LINGER seconds after the command ends: a
        # shorter one here, for the test's time.
        p = mock.patch.object(shell, "LINGER", 0.2)
        p.start()
        self.addCleanup(p.stop)
        start = time.monotonic()
        r = shell.sh("(sleep 300 & echo $! > %s/pid); echo x" % self.tmp, timeout=30)
        self.read_pid()
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(r, "x\n")
        self.assertIn("start those with bg()", r.err)

    def test_flood_is_capped(self):
        r = shell.sh("yes | head -c 8000000", check=False)
        self.assertEqual(r.code, 141)
        self.assertLess(len(r), 3 * 2 ** 20)
        self.assertTrue(r.startswith("y\ny\n"))
        self.assertTrue(r.endswith("y\ny\n"))
        self.assertIn("of stdout dropped here]", r)
        r = shell.sh("head -c 5000000 /dev/zero | tr '\\0' e >&2")
        self.assertLess(len(r.err), 3 * 2 ** 20)
        self.assertIn("of stderr dropped here]", r.err)

    def test_flood_memory_is_bounded(self):
        code = (
            "import resource, sys\n"
            "sys.path.insert(0, %r)\n"
            "from replhub_toolkit import shell\n"
            "peak = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "before = peak()\n"
            "shell.sh('head -c 60000000 /dev/zero | tr \"\\\\0\" y', timeout=60)\n"
            "unit = 1 if sys.platform == 'darwin' else 1024\n"
            "print((peak() - before) * unit)\n" % BOOT)
        out = subprocess.check_output([sys.executable, "-c", code], timeout=120)
        self.assertLess(int(out), 40 * 2 ** 20)

    def test_no_such_command(self):
        with self.assertRaises(shell.CommandError) as cm:
            shell.sh("replhub-no-such-command --flag")
        self.assertEqual(str(cm.exception), "sh: no such command: replhub-no-such-command")
        with self.assertRaises(shell.CommandError) as cm:
            shell.sh(["replhub-no-such-command"])
        self.assertEqual(str(cm.exception), "sh: no such command: replhub-no-such-command")
        self.assertEqual(shell.sh("replhub-no-such-command", check=False).code, 127)

    def test_bad_input_is_one_line(self):
        cases = [
            ((42,), {}, TypeError),
            (([],), {}, ValueError),
            (("  ",), {}, ValueError),
            ((["ls", 3],), {}, TypeError),
            (("true",), {"input": 5}, TypeError),
            (("true",), {"env": {"A": 1}}, TypeError),
            (("true",), {"timeout": 0}, ValueError),
            (("true",), {"cwd": "/no/such/folder/here"}, FileNotFoundError),
        ]
        for args, kw, exc in cases:
            with self.subTest(args=args, kw=kw):
                with self.assertRaises(exc) as cm:
                    shell.sh(*args, **kw)
                msg = str(cm.exception)
                self.assertTrue(msg.startswith("sh: "), msg)
                self.assertNotIn("\n", msg)

    def test_host(self):
        with self.assertRaises(NotImplementedError):
            shell.sh("true", host="lab")
        calls = []

        def runner(*args):
            calls.append(args)
            return 2, b"remote out\n", b"remote err\n"
        with mock.patch.object(shell, "HOST_RUNNER", runner):
            r = shell.sh("uname", host="lab", check=False, input="in", env={"A": "b"}, timeout=5)
            with self.assertRaises(shell.CommandError) as cm:
                shell.sh(["uname"], host="lab")
        self.assertEqual((r.out, r.err, r.code), ("remote out\n", "remote err\n", 2))
        self.assertEqual(calls[0], ("lab", shell.BASH + ["uname"], b"in", None, {"A": "b"}, 5))
        self.assertEqual(calls[1][1], ["uname"])
        self.assertEqual(str(cm.exception), "sh: exit 2: remote err")


class RunProgramTest(Tmp):
    """run_program: subprocess.run's contract, for the shipped modules."""

    def test_output_whole_and_exit_status(self):
        big = shell.CAP * 3  # past what sh() keeps
        code, out, err = shell.run_program(["bash", "-c", "head -c %d /dev/zero; echo oops >&2; exit 3" % big])
        self.assertEqual((code, len(out), out.count(b"\0"), err), (3, big, big, b"oops\n"))
        code, out, _ = shell.run_program(["cat"], input=b"fed\n")
        self.assertEqual((code, out), (0, b"fed\n"))
        code, out, _ = shell.run_program(["cat"])  # stdin is /dev/null
        self.assertEqual((code, out), (0, b""))

    def test_cwd_and_env_whole(self):
        code, out, _ = shell.run_program(["bash", "-c", "pwd; echo ${A-unset} ${HOME-unset}"], cwd=self.tmp,
                                         env={"A": "a", "PATH": os.environ["PATH"]})
        self.assertEqual(out.decode().split(), [os.path.realpath(self.tmp), "a", "unset"])

    def test_errors_are_subprocess_run_s(self):
        with self.assertRaises(FileNotFoundError):
            shell.run_program(["no-such-program-here"])
        t0 = time.monotonic()
        with self.assertRaises(subprocess.TimeoutExpired) as cm:
            shell.run_program(["bash", "-c", "echo part; echo $$ > %s/pid; exec sleep 30" % self.tmp], timeout=0.5)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(cm.exception.output, b"part\n")
        self.assertTrue(gone(self.read_pid()), "the program outlived its timeout")


class BgTest(Tmp):
    def setUp(self):
        Tmp.setUp(self)
        shell.finished_jobs()
        self.addCleanup(shell.kill_all)

    def test_tail_wait_and_list(self):
        job = shell.bg("for i in $(seq 30); do echo line $i; done; echo oops >&2; sleep 0.2", cwd=self.tmp)
        self.assertEqual(job.wait(10), 0)
        self.assertFalse(job.running)
        self.assertEqual(job.code, 0)
        self.assertEqual(job.tail(3), "line 29\nline 30\noops")
        self.assertEqual(len(job.tail().splitlines()), 20)
        self.assertEqual(job.tail().__replhub_show__(), job.tail())
        self.assertEqual(stat.S_IMODE(os.stat(os.path.dirname(job.log)).st_mode), 0o700)
        jobs = shell.bg()
        self.assertIn(job, jobs)
        line = [l for l in jobs.__replhub_show__().splitlines() if str(job.pid) in l][0]
        self.assertIn("exit 0", line)
        self.assertIn("for i in", line)

    def test_kill_ends_the_group(self):
        job = shell.bg("sleep 300 & echo $! > %s/pid; wait" % self.tmp)
        pid = self.read_pid()
        self.assertTrue(job.running)
        self.assertIn("running", shell.bg().__replhub_show__())
        self.assertEqual(job.kill(), -signal.SIGTERM)
        self.assertTrue(gone(pid), "the job's child outlived kill()")
        self.assertIn("killed by SIGTERM", job.__replhub_show__())

    def test_wait_is_bounded(self):
        job = shell.bg("sleep 300")
        with self.assertRaises(TimeoutError) as cm:
            job.wait(0.2)
        self.assertIn("still running", str(cm.exception))
        job.kill()

    def test_finished_jobs_told_once(self):
        job = shell.bg("sleep 0.1; echo hi")
        deadline = time.monotonic() + 10
        lines = []
        while not lines and time.monotonic() < deadline:
            lines = shell.finished_jobs()
            time.sleep(0.05)
        self.assertEqual(lines, ["job %d (sleep 0.1; echo hi) ended: exit 0" % job.id])
        self.assertEqual(shell.finished_jobs(), [])

    def test_kill_all(self):
        job = shell.bg("sleep 300 & echo $! > %s/pid; wait" % self.tmp)
        pid = self.read_pid()
        log = job.log
        shell.kill_all(grace=1)
        self.assertFalse(job.running)
        self.assertTrue(gone(pid))
        self.assertFalse(os.path.exists(log))

    def test_bad_input(self):
        with self.assertRaises(FileNotFoundError) as cm:
            shell.bg("true", cwd="/no/such/folder/here")
        self.assertEqual(str(cm.exception), "bg: no such folder: /no/such/folder/here")
        with self.assertRaises(TypeError):
            shell.bg(["ls", None])


FAKE_SUDO = """#!/bin/bash
printf "%s\n" "$*" >> "$FAKE_SUDO_LOG"
mode=$1; shift
[ "$1" = -- ] && shift
case "$FAKE_SUDO_SAYS:$mode" in
  ok:*) command -v "$1" >/dev/null || { echo "sudo: $1: command not found" >&2; exit 1; }; exec "$@" ;;
  refuse:-n) echo "sudo: a password is required" >&2; exit 1 ;;
  refuse:-A) echo "sudo: 1 incorrect password attempt" >&2; exit 1 ;;
esac
"""


class SudoTest(Tmp):
    def setUp(self):
        Tmp.setUp(self)
        path = os.path.join(self.tmp, "sudo")
        with open(path, "w") as f:
            f.write(FAKE_SUDO)
        os.chmod(path, 0o755)
        self.log = os.path.join(self.tmp, "log")
        env = {"PATH": self.tmp + os.pathsep + os.environ.get("PATH", ""),
               "FAKE_SUDO_LOG": self.log, "FAKE_SUDO_SAYS": "ok"}
        for p in (mock.patch.dict(os.environ, env), mock.patch.object(shell.os, "geteuid", return_value=1000)):
            p.start()
            self.addCleanup(p.stop)
        os.environ.pop("SUDO_ASKPASS", None)

    def calls(self):
        with open(self.log) as f:
            return f.read().splitlines()

    def test_n_without_askpass(self):
        self.assertEqual(shell.sudo("echo $((6 * 7))"), "42\n")
        self.assertEqual(shell.sudo(["echo", "a b"]), "a b\n")
        self.assertEqual(self.calls(), ["-n -- bash --norc -o pipefail -c echo $((6 * 7))", "-n -- echo a b"])

    def test_a_with_askpass(self):
        os.environ["SUDO_ASKPASS"] = "/bin/false"
        self.assertEqual(shell.sudo("echo $X", env={"X": "x"}), "x\n")
        self.assertEqual(self.calls(), ["-A -- env X=x bash --norc -o pipefail -c echo $X"])

    def test_refused(self):
        os.environ["FAKE_SUDO_SAYS"] = "refuse"
        with self.assertRaises(shell.CommandError) as cm:
            shell.sudo("true")
        self.assertEqual(str(cm.exception), shell._NO_PASSWORD)
        with self.assertRaises(shell.CommandError) as cm:
            shell.sudo("true", check=False)
        self.assertEqual(str(cm.exception), shell._NO_PASSWORD)
        os.environ["SUDO_ASKPASS"] = "/bin/false"
        with self.assertRaises(shell.CommandError) as cm:
            shell.sudo("true")
        self.assertEqual(str(cm.exception), "sudo: 1 incorrect password attempt; "
                                            "check SUDO_ASKPASS or run the session as root (--sudo)")

    def test_command_fails(self):
        with self.assertRaises(shell.CommandError) as cm:
            shell.sudo("echo nope >&2; exit 1")
        self.assertEqual(str(cm.exception), "sudo: exit 1: nope")
        self.assertEqual(shell.sudo("exit 5", check=False).code, 5)
        with self.assertRaises(shell.CommandError) as cm:
            shell.sudo(["replhub-no-such-command"])
        self.assertEqual(str(cm.exception), "sudo: no such command: replhub-no-such-command")

    def test_root_runs_without_sudo(self):
        with mock.patch.object(shell.os, "geteuid", return_value=0):
            self.assertEqual(shell.sudo("echo root"), "root\n")
        self.assertFalse(os.path.exists(self.log))

    def test_no_sudo_here(self):
        os.environ["PATH"] = self.tmp + "/none"
        with self.assertRaises(shell.CommandError) as cm:
            shell.sudo(["true"])
        self.assertIn("no sudo command here", str(cm.exception))


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/text":
            self.reply(200, "text/plain; charset=latin-1", "caf\xe9".encode("latin-1"))
        elif self.path == "/bytes":
            self.reply(200, "application/octet-stream", bytes(range(256)))
        elif self.path == "/big":
            self.reply(200, "text/plain", b"x" * 5000)
        elif self.path == "/big-unsized":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(b"x" * 5000)
        elif self.path == "/echo-header":
            self.reply(200, "text/plain", self.headers.get("X-Test", "").encode())
        else:
            self.reply(404, "text/plain", b"not here")

    def reply(self, code, ctype, body):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class FetchTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        cls.thread = threading.Thread(target=cls.server.serve_forever, kwargs={"poll_interval": 0.05})
        cls.thread.start()
        cls.base = "http://127.0.0.1:%d" % cls.server.server_address[1]

    @classmethod
    def tearDownClass(cls):
        cls.server.shutdown()
        cls.thread.join(10)
        cls.server.server_close()

    def test_text_and_bytes(self):
        t = shell.fetch(self.base + "/text")
        self.assertEqual(t, "caf\xe9")
        self.assertEqual(t.__replhub_show__(), "caf\xe9")
        self.assertEqual(shell.fetch(self.base + "/bytes", binary=True), bytes(range(256)))
        self.assertEqual(shell.fetch(self.base + "/echo-header", headers={"X-Test": "yes"}), "yes")

    def test_404(self):
        with self.assertRaises(shell.FetchError) as cm:
            shell.fetch(self.base + "/missing")
        self.assertEqual(str(cm.exception), "fetch: HTTP 404 for %s/missing" % self.base)

    def test_cap(self):
        for path in ("/big", "/big-unsized"):
            with self.subTest(path=path):
                with self.assertRaises(shell.FetchError) as cm:
                    shell.fetch(self.base + path, max_bytes=1000)
                self.assertTrue(str(cm.exception).startswith("fetch: over the 1000 bytes cap"), str(cm.exception))
        self.assertEqual(len(shell.fetch(self.base + "/big-unsized", max_bytes=5000)), 5000)

    def test_no_answer(self):
        silent = socket.socket()
        self.addCleanup(silent.close)
        silent.bind(("127.0.0.1", 0))
        silent.listen(5)
        url = "http://127.0.0.1:%d/" % silent.getsockname()[1]
        start = time.monotonic()
        with self.assertRaises(shell.FetchError) as cm:
            shell.fetch(url, timeout=0.2)
        self.assertLess(time.monotonic() - start, 5)
        self.assertEqual(str(cm.exception), "fetch: no answer within 0.2s from " + url)

    def test_bad_input(self):
        for url, exc in (("file:///etc/passwd", ValueError), ("ftp://x/", ValueError), (b"http://x/", TypeError)):
            with self.subTest(url=url):
                with self.assertRaises(exc) as cm:
                    shell.fetch(url)
                self.assertTrue(str(cm.exception).startswith("fetch: "))
        with self.assertRaises(shell.FetchError) as cm:
            closed = socket.socket()
            closed.bind(("127.0.0.1", 0))
            port = closed.getsockname()[1]
            closed.close()
            shell.fetch("http://127.0.0.1:%d/" % port, timeout=2)
        self.assertIn("cannot reach", str(cm.exception))


class CdTest(Tmp):
    def setUp(self):
        Tmp.setUp(self)
        self.addCleanup(os.chdir, os.getcwd())

    def test_cd(self):
        t = shell.cd(self.tmp)
        self.assertEqual(t, "cwd: " + os.path.realpath(self.tmp))
        self.assertEqual(t.__replhub_show__(), t)
        self.assertEqual(os.getcwd(), os.path.realpath(self.tmp))
        with mock.patch.dict(os.environ, {"HOME": self.tmp}):
            os.mkdir(os.path.join(self.tmp, "sub"))
            self.assertEqual(shell.cd("~/sub"), "cwd: " + os.path.realpath(os.path.join(self.tmp, "sub")))
            self.assertEqual(shell.cd(), "cwd: " + os.path.realpath(self.tmp))

    def test_missing(self):
        with self.assertRaises(FileNotFoundError) as cm:
            shell.cd(self.tmp + "/nope")
        self.assertEqual(str(cm.exception), "cd: no such folder: %s/nope" % self.tmp)
        open(os.path.join(self.tmp, "file"), "w").close()
        with self.assertRaises(NotADirectoryError):
            shell.cd(self.tmp + "/file")


if __name__ == "__main__":
    unittest.main()
