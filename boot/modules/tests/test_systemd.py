"""Tests of the shipped module systemd: its arguments, the refusal of
system-unit changes outside root, the commands it runs (no shell), the
fallback and its error where no manager runs, and the libsystemd binding
against a private dbus-daemon and a journal file made by
systemd-journal-remote. Each process a test starts is ended before it
returns; every wait is bounded."""

import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock

import systemd

CI = bool(os.environ.get("CI"))


def need(prog, *paths):
    """prog's path, or skip (in CI: fail)."""
    for p in (shutil.which(prog),) + paths:
        if p and os.path.exists(p):
            return p
    if CI:
        raise AssertionError("CI needs %s (see the README's test command)" % prog)
    raise unittest.SkipTest("needs %s" % prog)


class Fresh(unittest.TestCase):
    def setUp(self):
        self.addCleanup(setattr, systemd, "BACKEND", systemd.BACKEND)
        self.addCleanup(systemd._FALLBACK_WHY.clear)


class Arguments(Fresh):
    def test_unit_names(self):
        self.assertEqual(systemd.unit_name("ssh"), "ssh.service")
        self.assertEqual(systemd.unit_name("getty@tty1.service"), "getty@tty1.service")
        self.assertEqual(systemd.unit_name("-.mount"), "-.mount")
        self.assertEqual(systemd.unit_name("dev-disk-by\\x2duuid-1.device"), "dev-disk-by\\x2duuid-1.device")
        self.assertEqual(systemd.unit_name("a.b"), "a.b.service")
        for bad in ["", "a b", "x;rm -rf /", "$(id)", "../etc/passwd", "a/b", "x\0y", "x\n", ".service",
                    "é.service", "x" * 300, "a|b"]:
            with self.assertRaises(ValueError, msg=repr(bad)) as cm:
                systemd.unit_name(bad)
            self.assertNotIn("\n", str(cm.exception))
        with self.assertRaises(TypeError):
            systemd.unit_name(b"ssh")
        with self.assertRaises(ValueError):
            systemd.units("ssh;ls")

    def test_since(self):
        now = 1700000000.0
        self.assertEqual(systemd.parse_since("-1h", now), now - 3600)
        self.assertEqual(systemd.parse_since("-30min", now), now - 1800)
        self.assertEqual(systemd.parse_since("- 2 d", now), now - 2 * 86400)
        self.assertEqual(systemd.parse_since(12, now), 12.0)
        self.assertEqual(systemd.parse_since("now", now), now)
        self.assertIsNone(systemd.parse_since(None, now))
        self.assertLess(systemd.parse_since("yesterday", now), systemd.parse_since("today", now))
        self.assertAlmostEqual(systemd.parse_since("2024-05-01 12:00"),
                               time.mktime((2024, 5, 1, 12, 0, 0, 0, 0, -1)))
        for bad in ["1h", "-1parsec", "soon", "", "-" + "9" * 20 + "h", "2024-13-01"]:
            with self.assertRaises(ValueError, msg=bad):
                systemd.parse_since(bad, now)
        for bad in [True, [], object()]:
            with self.assertRaises(TypeError):
                systemd.parse_since(bad, now)

    def test_since_fuzz(self):
        rnd = random.Random(7)
        alphabet = "-0123456789.: hminsdwkT\t\n\x00é"
        for _ in range(3000):
            s = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 14)))
            try:
                v = systemd.parse_since(s, 1e9)
            except ValueError as e:
                self.assertNotIn("\n", str(e).replace(repr(s), ""))
                continue
            self.assertIsInstance(v, float, repr(s))

    def test_signatures(self):
        self.assertEqual(systemd.split_signature("ssa(sv)a(sa(sv))"), ["s", "s", "a(sv)", "a(sa(sv))"])
        self.assertEqual(systemd.split_signature("a{sv}ay"), ["a{sv}", "ay"])
        self.assertEqual(systemd.split_signature(""), [])
        for bad in ["a", "(", "()", "a{vs}", "a{s}", "a{sss}", "z", "(s", "s)", "a" * 40 + "s", "{ss}"]:
            with self.assertRaises(ValueError, msg=bad):
                systemd.split_signature(bad)

    def test_signature_fuzz(self):
        rnd = random.Random(11)
        for _ in range(5000):
            s = "".join(rnd.choice("sibtvay(){}ogz") for _ in range(rnd.randint(0, 12)))
            try:
                parts = systemd.split_signature(s)
            except ValueError:
                continue
            self.assertEqual("".join(parts), s)

    def test_run_takes_a_list(self):
        for bad in ["sleep 60", b"sleep", [], ["sleep", 60], ["a\0b"], None]:
            with self.assertRaises(TypeError, msg=repr(bad)) as cm:
                systemd.run(bad, user=True)
            self.assertNotIn("\n", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            systemd.run("ls -l")
        self.assertIn("no shell", str(cm.exception))


class Refusal(Fresh):
    """A system unit changes only from a root session: nothing is run."""

    def test_not_root(self):
        calls = []
        with mock.patch.object(os, "geteuid", return_value=1000), \
                mock.patch.object(subprocess, "run", side_effect=lambda *a, **k: calls.append(a)), \
                mock.patch.object(systemd, "Bus", side_effect=AssertionError("no bus either")):
            for fn in (systemd.start, systemd.stop, systemd.restart, systemd.reload, systemd.enable,
                       systemd.disable):
                with self.assertRaises(systemd.SystemdError) as cm:
                    fn("nginx")
                msg = str(cm.exception)
                self.assertIn("nginx.service", msg)
                self.assertIn("use a root session (session(name, sudo=True), or exec --sudo)", msg)
                self.assertNotIn("\n", msg)
            with self.assertRaises(systemd.SystemdError):
                systemd.run(["/bin/true"])
        self.assertEqual(calls, [])


class Commands(Fresh):
    """The fallback runs systemctl and friends with argv lists."""

    def run_recorded(self, fn, *args, **kw):
        calls = []

        def fake(argv, **k):
            calls.append((argv, k))
            return subprocess.CompletedProcess(argv, 0, b"", b"")
        systemd.BACKEND = "cli"
        with mock.patch.object(os, "geteuid", return_value=0), mock.patch.object(subprocess, "run", fake):
            fn(*args, **kw)
        for argv, k in calls:
            self.assertNotIn("shell", k)
            self.assertIs(k.get("stdin"), subprocess.DEVNULL)
        return [argv for argv, _ in calls]

    def test_argv(self):
        calls = self.run_recorded(systemd.restart, "web@1")
        self.assertEqual(calls[0][1:], ["--no-pager", "--no-ask-password", "restart", "--job-mode=replace", "--",
                                        "web@1.service"])
        self.assertEqual(calls[1][1:4], ["--no-pager", "--no-ask-password", "show"])
        calls = self.run_recorded(systemd.stop, "web", user=True, wait=False)
        self.assertEqual(calls[0][1:], ["--user", "--no-pager", "--no-ask-password", "stop", "--job-mode=replace",
                                        "--no-block", "--", "web.service"])
        with self.assertRaises(ValueError):
            systemd.start("web", user=True, mode="replace; reboot")
        calls = self.run_recorded(systemd.run, ["sleep", "60; rm -rf /"], unit="job")
        self.assertEqual(calls[0][1:], ["--unit=job.service", "--collect", "--quiet", "--",
                                        shutil.which("sleep"), "60; rm -rf /"])
        calls = self.run_recorded(systemd.call, "org.x", "/o", "org.x.I", "M", "sa{sv}(ib)", "a b",
                                  {"k": ("t", 5)}, (1, True))
        self.assertEqual(calls[0][-14:], ["call", "--", "org.x", "/o", "org.x.I", "M", "sa{sv}(ib)", "a b", "1",
                                          "k", "t", "5", "1", "true"])
        calls = self.run_recorded(systemd.journal, "web", since=1000, grep="x")
        self.assertIn("--since=@1000", calls[0])
        self.assertIn("--unit=web.service", calls[0])


class NoManager(Fresh):
    """This machine (like CI) runs no systemd manager: both ways say so."""

    def setUp(self):
        Fresh.setUp(self)
        if os.path.isdir("/run/systemd/system"):
            raise unittest.SkipTest("a systemd manager runs here")
        need("systemctl")

    def test_fallback_says_no_manager(self):
        for backend in (None, "cli"):
            systemd.BACKEND = backend
            for fn in (systemd.status, systemd.props):
                with self.assertRaises(systemd.SystemdError) as cm:
                    fn("ssh")
                msg = str(cm.exception)
                self.assertIn("systemd: no systemd manager runs here: PID 1 is", msg)
                self.assertNotIn("\n", msg)
            with self.assertRaises(systemd.SystemdError) as cm:
                systemd.units()
            self.assertIn("no systemd manager runs here", str(cm.exception))


class Binding(Fresh):
    """libsystemd through ctypes."""

    def setUp(self):
        Fresh.setUp(self)
        if systemd.libsystemd() is None:
            if CI:
                self.fail(systemd.libsystemd_error())
            raise unittest.SkipTest(systemd.libsystemd_error())
        self.tmp = tempfile.mkdtemp(prefix="test-systemd-")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_symbols(self):
        lib = systemd.libsystemd()
        for name, (res, args) in systemd.sd.SIGNATURES.items():
            self.assertEqual(getattr(lib, name).argtypes, args, name)

    def test_no_bus(self):
        with mock.patch.dict(os.environ, {"DBUS_SESSION_BUS_ADDRESS": "unix:path=%s/none" % self.tmp,
                                          "XDG_RUNTIME_DIR": self.tmp}):
            with self.assertRaises(systemd.SystemdError) as cm:
                systemd.Bus(user=True)
            self.assertIn("systemd: no user bus: ", str(cm.exception))
            systemd.BACKEND = "bus"
            with self.assertRaises(systemd.SystemdError):
                systemd.status("x", user=True)

    def dbus(self):
        """A private dbus-daemon, as the user bus."""
        exe = need("dbus-daemon")
        sock = os.path.join(self.tmp, "bus")
        p = subprocess.Popen([exe, "--session", "--nofork", "--nopidfile", "--address=unix:path=" + sock],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def end():
            p.kill()
            p.wait(10)
        self.addCleanup(end)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until it accepts: the file comes before listen()
            s = socket.socket(socket.AF_UNIX)
            try:
                s.connect(sock)
                break
            except OSError:
                time.sleep(0.02)
            finally:
                s.close()
        patch = mock.patch.dict(os.environ, {"DBUS_SESSION_BUS_ADDRESS": "unix:path=" + sock})
        patch.start()
        self.addCleanup(patch.stop)

    def test_calls(self):
        self.dbus()
        bus_name, path = "org.freedesktop.DBus", "/org/freedesktop/DBus"
        for backend in ("bus", "cli"):
            if backend == "cli":
                need("busctl")
            systemd.BACKEND = backend
            names = systemd.call(bus_name, path, bus_name, "ListNames", user=True)
            self.assertIn(bus_name, names)
            creds = systemd.call(bus_name, path, bus_name, "GetConnectionCredentials", "s", bus_name, user=True)
            self.assertIsInstance(creds["ProcessID"], int)
            self.assertEqual(systemd.call(bus_name, path, bus_name, "RequestName", "su",
                                          "org.example.T" + backend, 0, user=True), 1)
            self.assertIsNone(systemd.call(bus_name, path, bus_name, "UpdateActivationEnvironment", "a{ss}",
                                           {"A": "b"}, user=True))
            with self.assertRaises(systemd.SystemdError) as cm:
                systemd.call(bus_name, path, bus_name, "NoSuch", user=True)
            self.assertIn("NoSuch", str(cm.exception))
        systemd.BACKEND = "bus"
        # What run() sends builds (sd-bus checks each value against the
        # signature); the daemon refuses the method only.
        props = [("Description", ("s", "x")), ("ExecStart", ("a(sasb)", [("/bin/true", ["true"], False)])),
                 ("MemoryMax", ("t", 1 << 30))]
        with self.assertRaises(systemd.BusCallError) as cm:
            systemd.call(bus_name, path, bus_name, "StartTransientUnit", "ssa(sv)a(sa(sv))", "x.service", "fail",
                         props, [], user=True)
        self.assertEqual(cm.exception.name, "org.freedesktop.DBus.Error.UnknownMethod")
        with self.assertRaises(TypeError):
            systemd.call(bus_name, path, bus_name, "M", "a(sv)", [("k", 5)], user=True)
        with self.assertRaises(TypeError):
            systemd.call(bus_name, path, bus_name, "RequestName", "su", "x", "not a number", user=True)
        with self.assertRaises(systemd.SystemdError) as cm:
            systemd.status("x", user=True)
        self.assertIn("no systemd manager answers on this bus", str(cm.exception))

    def test_journal(self):
        remote = need("systemd-journal-remote", "/lib/systemd/systemd-journal-remote",
                      "/usr/lib/systemd/systemd-journal-remote")
        now = int(time.time())
        entries = [("demo.service", "old news", 6), ("demo.service", "started demo", 6),
                   ("demo.service", "ERROR: disk full", 3), ("other.service", "unrelated", 6)]
        export = []
        for i, (unit, msg, prio) in enumerate(entries):
            t = now - 7200 if msg == "old news" else now - 60 + i
            export.append("__CURSOR=s=1;i=%d\n__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=%d\n"
                          "_BOOT_ID=0123456789abcdef0123456789abcdef\n_HOSTNAME=t\nMESSAGE=%s\n"
                          "_SYSTEMD_UNIT=%s\nPRIORITY=%d\n_PID=%d\n\n" % (i + 1, t * 1000000, i + 1, msg, unit,
                                                                         prio, 40 + i))
        d = os.path.join(self.tmp, "journal")
        os.mkdir(d)
        subprocess.run([remote, "-o", os.path.join(d, "t.journal"), "-"], input="".join(export).encode(),
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=30, check=True)
        for backend in (None, "cli"):
            if backend == "cli":
                need("journalctl")
            systemd.BACKEND = backend
            got = systemd.journal("demo", directory=d)
            self.assertEqual([e.message for e in got], ["started demo", "ERROR: disk full"], backend)
            self.assertEqual((got[1].unit, got[1].pid, got[1].priority), ("demo.service", 42, "err"))
            self.assertIn("demo.service[41]: started demo", got.__replhub_show__())
            self.assertEqual([e.message for e in systemd.journal("demo", grep="error", directory=d)],
                             ["ERROR: disk full"], "all lower case: case-blind")
            self.assertEqual(systemd.journal("demo", grep="error$", directory=d), [])
            self.assertEqual([e.message for e in systemd.journal(since="-3h", lines=2, directory=d)],
                             ["ERROR: disk full", "unrelated"])
            self.assertEqual(len(systemd.journal("demo", since=None, directory=d)), 3)
        with self.assertRaises(ValueError):
            systemd.journal(grep="(", directory=d)
        with self.assertRaises(systemd.SystemdError):
            systemd.journal(directory=os.path.join(self.tmp, "none"))


class Show(unittest.TestCase):
    def test_status_text(self):
        s = systemd.Status(id="web.service", description="Web", load="loaded", active="active",
                           sub="running", file_state="enabled", fragment="/lib/systemd/system/web.service",
                           main_pid=42, since="Mon 2024-05-01 12:00:00 UTC", result="success")
        self.assertEqual(s.__replhub_show__(), "* web.service - Web\n"
                         "     Loaded: loaded (/lib/systemd/system/web.service; enabled)\n"
                         "     Active: active (running) since Mon 2024-05-01 12:00:00 UTC\n"
                         "   Main PID: 42")
        self.assertTrue(s.running)
        self.assertEqual(s.main_pid, 42)
        self.assertEqual(systemd.Changes([("symlink", "/a", "/b")]).__replhub_show__(), "symlink /a -> /b")


if __name__ == "__main__":
    unittest.main()
