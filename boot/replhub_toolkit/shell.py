"""replhub toolkit: commands, background jobs, sudo, HTTP GET and cd.

sh() runs a command to its end and returns its output as a Result (a str
that is its stdout); bg() starts a job that outlives the cell, logging to a
file; sudo() is sh() as root; fetch() is an HTTP(S) GET; cd() moves the
session.  Every wait here is bounded (a timeout, or an interrupt), every
failure is one line, and output a command floods is capped in memory.

A command runs in a process group of its own, so a timeout or a
KeyboardInterrupt ends all of it, and the session's own interrupt does not
reach a background job.  Each group is told to the worker's reaper
(GROUP_HOOK), which ends the live ones when the worker dies, however it
dies; the worker calls finished_jobs() after each cell.

What a value shows in a reply is its __replhub_show__(), plain text.
Standard library only, Python 3.6+.
"""

import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

CAP = 2 ** 20       # bytes kept from each end of a command's stdout and of its stderr
GRACE = 2.0         # seconds between SIGTERM and SIGKILL
LINGER = 1.0        # seconds sh() reads on after the command ended
BASH = ["bash", "--norc", "-o", "pipefail", "-c"]

# Set by the worker: runs argv on another host through the hub,
# HOST_RUNNER(host, argv, input, cwd, env, timeout) -> (code, out, err).
HOST_RUNNER = None

# Set by the worker: GROUP_HOOK(pgid, alive) tells its reaper of a process
# group started here (alive) or ended, so that a worker that dies, however
# it dies, takes the commands and jobs it started with it.
GROUP_HOOK = None


def _group(pgid, alive):
    if GROUP_HOOK is not None:
        try:
            GROUP_HOOK(pgid, alive)
        except Exception:
            pass

HELP = {
    "sh": "sh(cmd, input=None, cwd=None, env=None, timeout=600, check=True, merge=False, host=None): "
          "run a bash command (str) or an argv (list); returns its stdout with .err .code .ok",
    "bg": "bg(cmd, cwd=None, env=None): start a background job logging to a file; "
          "bg() lists jobs; job.tail() job.wait() job.kill()",
    "sudo": "sudo(cmd, **kw): sh() as root, through sudo -A with $SUDO_ASKPASS, else sudo -n",
    "fetch": "fetch(url, timeout=30, max_bytes=10*2**20, binary=False, headers=None): "
             "HTTP(S) GET; returns text, or bytes with binary=True",
    "cd": "cd(path=None): change the session's working folder (~ expanded; none: home)",
}


from replhub_toolkit.display import Text  # noqa: E402  (a str shown as itself)


# A command that failed; .result holds what it wrote and its exit code.
# The package's, which every session has as CommandError from the start.
from replhub_toolkit import CommandError, guard, held  # noqa: E402
from replhub_toolkit.children import reap  # noqa: E402


class CommandTimeout(CommandError):
    """A command that ran past its timeout; its process group was ended."""


class FetchError(Exception):
    """A fetch() that brought back nothing: the reason is the message."""


class Result(str):
    """What a command wrote: the str is its stdout.

    .out and .err are stdout and stderr (.err is "" with merge=True), .code
    the exit status (negative: the signal that ended it), .ok whether that
    is 0, .cmd the command as given.
    """

    def __new__(cls, out, err, code, cmd):
        self = str.__new__(cls, out)
        self.out = out
        self.err = err
        self.code = code
        self.ok = code == 0
        self.cmd = cmd
        return self

    def __replhub_show__(self):
        parts = [self.out]
        if self.err:
            parts.append("[stderr]\n" + self.err)
        if self.code != 0:
            parts.append("[%s]" % _status(self.code))
        return "\n".join(p[:-1] if p.endswith("\n") else p for p in parts if p)


def _status(code):
    if code is None:
        return "running"
    if code < 0:
        try:
            return "killed by %s" % signal.Signals(-code).name
        except ValueError:
            return "killed by signal %d" % -code
    return "exit %d" % code


def _first_line(text):
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def _last_line(text):
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()[:300]
    return ""


def _size(n):
    if n >= 2 ** 20 and n % 2 ** 20 == 0:
        return "%d MiB" % (n // 2 ** 20)
    if n >= 2 ** 20:
        return "%.1f MiB" % (n / 2.0 ** 20)
    return "%d bytes" % n


def _short(cmd, width=60):
    text = cmd if isinstance(cmd, str) else " ".join(cmd)
    text = " ".join(text.split())
    return text if len(text) <= width else text[:width - 3] + "..."


# -- preparing a command -------------------------------------------------

def _argv(cmd, who):
    """The argv for cmd: a str runs through bash, a list as it is."""
    if isinstance(cmd, str):
        if not cmd.strip():
            raise ValueError("%s: the command is empty" % who)
        return BASH + [cmd]
    if isinstance(cmd, (list, tuple)):
        if not cmd:
            raise ValueError("%s: the argv list is empty" % who)
        argv = []
        for a in cmd:
            if isinstance(a, bytes):
                a = os.fsdecode(a)
            elif hasattr(a, "__fspath__"):
                a = os.fspath(a)
            if not isinstance(a, str):
                raise TypeError("%s: every argv item must be a str, not %s" % (who, type(a).__name__))
            argv.append(a)
        return argv
    raise TypeError("%s: cmd must be a str (run by bash) or a list of str (an argv), not %s"
                    % (who, type(cmd).__name__))


def _cwd(cwd, who):
    if cwd is None:
        return None
    cwd = os.path.abspath(os.path.expanduser(os.fspath(cwd)))
    if not os.path.isdir(cwd):
        raise FileNotFoundError("%s: no such folder: %s" % (who, cwd))
    return cwd


def _env(env, who):
    """os.environ with env added; a None value removes that variable."""
    if env is None:
        return None
    if not isinstance(env, dict):
        raise TypeError("%s: env must be a dict of str, not %s" % (who, type(env).__name__))
    full = dict(os.environ)
    for k, v in env.items():
        if not isinstance(k, str) or not (v is None or isinstance(v, str)):
            raise TypeError("%s: env keys and values must be str (or None to remove): %r" % (who, k))
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    return full


def _input(data, who):
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode("utf-8")
    raise TypeError("%s: input must be str or bytes, not %s" % (who, type(data).__name__))


def _timeout(timeout, who):
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ValueError("%s: timeout must be a number of seconds above 0, or None" % who)
    return timeout


def _spawn(argv, who, **kw):
    """Popen in a new session, its group told to the reaper; a missing
    program is a one-line CommandError (the OSError itself where who is
    None)."""
    try:
        proc = subprocess.Popen(argv, start_new_session=True, **kw)
    except OSError as e:
        if who is None:
            raise
        if isinstance(e, FileNotFoundError):
            raise CommandError("%s: no such command: %s" % (who, argv[0])) from None
        if isinstance(e, PermissionError):
            raise CommandError("%s: cannot run %s: permission denied" % (who, argv[0])) from None
        raise CommandError("%s: cannot run %s: %s" % (who, argv[0], e.strerror or e)) from None
    _group(proc.pid, True)
    return proc


def _kill_group(proc, grace=GRACE):
    """SIGTERM proc's process group, SIGKILL what is left after grace, reap proc."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except OSError:
        pass
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        pass
    # The rest of the group gets no more grace than its leader did.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    reap(proc, grace)


# -- sh ------------------------------------------------------------------

class _Capped(object):
    """Keeps the first and the last `cap` bytes of a stream, counting the
    rest; all of it in head where cap is None."""

    def __init__(self, cap):
        self.cap = cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data):
        self.total += len(data)
        if self.cap is None:
            self.head += data
            return
        room = self.cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.cap:
                del self.tail[:-self.cap]

    def text(self, name):
        tail = bytes(self.tail[-self.cap:])
        dropped = self.total - len(self.head) - len(tail)
        head = self.head.decode("utf-8", "replace")
        if not dropped:
            return head + tail.decode("utf-8", "replace") if tail else head
        note = "\n[sh: %s of %s dropped here]\n" % (_size(dropped), name)
        return head + note + tail.decode("utf-8", "replace")


def _collect(proc, data, deadline, cap=CAP):
    """Feed data to proc's stdin and read its stdout and stderr until they
    close, the deadline passes (returns "timeout") or, once proc has ended,
    LINGER seconds go by (returns "linger": something it left running still
    holds the output).  Returns (state, stdout _Capped, stderr _Capped)."""
    out, err = _Capped(cap), _Capped(cap)
    pos, ended, sel = 0, None, None
    try:
        with held():
            sel = selectors.DefaultSelector()
        for f, buf in ((proc.stdout, out), (proc.stderr, err)):
            if f is not None:
                sel.register(f.fileno(), selectors.EVENT_READ, (f, buf))
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE, (proc.stdin, None))
        while sel.get_map():
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return "timeout", out, err
            if ended is None and proc.poll() is not None:
                ended = now
            if ended is not None and now - ended > LINGER:
                return "linger", out, err
            wait = 0.2 if deadline is None else max(0.0, min(0.2, deadline - now))
            for key, _ in sel.select(wait):
                f, buf = key.data
                if buf is None:
                    try:
                        pos += os.write(key.fd, data[pos:pos + 65536])
                    except BlockingIOError:
                        continue
                    except (BrokenPipeError, ConnectionResetError):
                        pos = len(data)
                    if pos >= len(data):
                        sel.unregister(key.fd)
                        f.close()
                    continue
                chunk = os.read(key.fd, 65536)
                if chunk:
                    buf.add(chunk)
                else:
                    sel.unregister(key.fd)
                    f.close()
        return "done", out, err
    finally:
        with held():
            if sel is not None:
                sel.close()
            _close_pipes(proc)


def _close_pipes(proc):
    for f in (proc.stdin, proc.stdout, proc.stderr):
        if f is not None and not f.closed:
            try:
                f.close()
            except OSError:
                pass  # a stdin whose reader went: the data is not wanted


_NOT_FOUND = re.compile(r"^bash: (?:line \d+: )?(.+?): command not found$", re.M)


def _check(result, who, merge=False):
    """Raises CommandError for a failed result: one line, the likeliest cause first."""
    if result.code == 0:
        return result
    if result.code == 127:
        m = _NOT_FOUND.search(result.err or result.out)
        if m:
            raise CommandError("%s: no such command: %s" % (who, m.group(1)), result)
    line = _last_line(result.out) if merge else _first_line(result.err)
    msg = "%s: %s" % (who, _status(result.code))
    if result.code == 141:
        msg += " (SIGPIPE: a pipe's reader ended first)"
    raise CommandError(msg + (": " + line if line else ""), result)


def _decode(data):
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data or ""


def sh(cmd, input=None, cwd=None, env=None, timeout=600, check=True, merge=False, host=None):
    """Run cmd and return its output as a Result (the str is stdout).

    A str runs as `bash --norc -o pipefail -c cmd`; a list runs as an argv
    with no shell: use that, with input=, for anything holding a secret.
    input (str or bytes) goes to stdin, else stdin is /dev/null.  env adds
    to the session's environment (a None value removes a variable).
    merge=True sends stderr into stdout, in the order it was written.

    A non-zero exit raises CommandError (its .result has the output) unless
    check=False.  Past timeout seconds (None: no limit) the command's whole
    process group gets SIGTERM, then SIGKILL, and CommandTimeout is raised
    whatever check says; a KeyboardInterrupt ends the group the same way.
    Each of stdout and stderr keeps its first and last MiB; what lies
    between is dropped, with a note.  Processes the command leaves running
    in the background keep running, but what they write after it ended is
    not collected: start those with bg().
    """
    result = _run("sh", cmd, _argv(cmd, "sh"), input, cwd, env, timeout, merge, host)
    return _check(result, "sh", merge) if check else result


def _run(who, cmd, argv, input, cwd, env, timeout, merge, host):
    """sh() but for check: the Result whatever the exit status."""
    data = _input(input, who)
    timeout = _timeout(timeout, who)
    if host is not None:
        return _run_host(who, cmd, argv, data, cwd, env, timeout, merge, host)
    state, code, out, err = _execute(who, argv, data, _cwd(cwd, who), _env(env, who), timeout, merge, CAP)
    errtext = err.text("stderr")
    if state == "linger":
        errtext += "[%s: processes the command left running still hold its output; start those with bg()]\n" % who
    result = Result(out.text("stdout"), errtext, code, cmd)
    if state == "timeout":
        raise CommandTimeout("%s: no end within %gs; its processes were stopped" % (who, timeout), result)
    return result


def _execute(who, argv, data, cwd, env, timeout, merge, cap):
    """Runs argv (env whole) to its end, and ends its process group
    however it ends: (state as _collect's or "timeout", the exit status,
    stdout and stderr kept as _Capped(cap) keeps them)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    proc = None
    try:
        # A KeyboardInterrupt comes once proc is known (held), and ends it
        # below; the ending is not cut short by another.
        with held():
            proc = _spawn(argv, who, cwd=cwd, env=env,
                          stdin=subprocess.PIPE if data else subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT if merge else subprocess.PIPE)
        state, out, err = _collect(proc, data, deadline, cap)
        if state != "timeout":
            try:
                proc.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                state = "timeout"
    except BaseException:
        if proc is not None:
            with held():
                _close_pipes(proc)
                _kill_group(proc)
                if proc.returncode is not None:
                    _group(proc.pid, False)  # else it stays the reaper's (reap)
        raise
    if state == "timeout":
        _kill_group(proc)
    if state != "linger" and proc.returncode is not None:
        # What the command left running still holds its output: it goes
        # with the worker (so does a group whose leader reap gave up on).
        _group(proc.pid, False)
    return state, proc.returncode, out, err


def run_program(argv, input=None, cwd=None, env=None, timeout=None):
    """subprocess.run(argv, input=input, cwd=cwd, env=env, timeout=timeout)
    with stdout and stderr captured whole, for the shipped modules that run
    programs (git, systemd): the program runs as sh() runs a command, in a
    process group of its own that a timeout or a KeyboardInterrupt ends,
    its pipes closed and it reaped however many KeyboardInterrupts land.
    env is the whole environment (None: the session's). Returns (exit
    status, stdout bytes, stderr bytes); raises the OSError where argv
    cannot start (FileNotFoundError: no such program) and
    subprocess.TimeoutExpired past timeout, as subprocess.run does."""
    state, code, out, err = _execute(None, list(argv), input, cwd, env, timeout, False, None)
    if state == "timeout":
        raise subprocess.TimeoutExpired(argv, timeout, bytes(out.head), bytes(err.head))
    return code, bytes(out.head), bytes(err.head)


def _run_host(who, cmd, argv, data, cwd, env, timeout, merge, host):
    if HOST_RUNNER is None:
        raise NotImplementedError("%s(host=...) needs a session" % who)
    if merge:
        argv = BASH + ['exec 2>&1; exec "$@"', who] + argv
    if env is not None:
        for k, v in env.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise TypeError("%s: env keys and values must be str: %r" % (who, k))
    try:
        code, out, err = HOST_RUNNER(host, argv, data, cwd, env, timeout)
    except Exception as e:
        # The hub's answer (no connection, a refusal, the timeout) is one
        # line, raised as a command's would be.
        msg = str(e) if str(e).startswith(who) else "%s: %s" % (who, e)
        raise (CommandTimeout if "no end within" in msg else CommandError)(msg) from None
    return Result(_decode(out), _decode(err), code, cmd)


# -- bg ------------------------------------------------------------------

_lock = threading.Lock()
_jobs = []          # every Job of this session, oldest first
_unreported = []    # Jobs that ended and finished_jobs() has not yet told of
_logdir = None


def _log_path(n):
    global _logdir
    if _logdir is None or not os.path.isdir(_logdir):
        _logdir = tempfile.mkdtemp(prefix="replhub-jobs-")  # mode 0700
    return os.path.join(_logdir, "job-%d.log" % n)


def _clock(seconds):
    seconds = int(seconds)
    if seconds >= 3600:
        return "%d:%02d:%02d" % (seconds // 3600, seconds // 60 % 60, seconds % 60)
    return "%d:%02d" % (seconds // 60, seconds % 60)


class Job(object):
    """A background command: bash in a process group of its own, its stdout
    and stderr going to the file .log."""

    def __init__(self, n, cmd, proc, log):
        self.id = n
        self.cmd = cmd
        self.pid = proc.pid
        self.log = log
        self._proc = proc
        self._started = time.monotonic()
        self._ended = None

    def _poll(self):
        """The exit code, or None while it runs; notes the end once."""
        code = self._proc.poll()
        if code is not None and self._ended is None:
            with held(), _lock:
                if self._ended is None:
                    self._ended = time.monotonic()
                    _unreported.append(self)
                    _group(self.pid, False)
        return code

    @property
    def code(self):
        """The exit status (negative: the signal that ended it); None while running."""
        return self._poll()

    @property
    def running(self):
        return self._poll() is None

    def wait(self, timeout=None):
        """Wait for the end and return the exit status; TimeoutError after timeout seconds."""
        # Polls rather than Popen.wait: poll is guarded (below), wait's loop
        # is not, and a KeyboardInterrupt there can keep Popen's lock, after
        # which no poll ever sees the job end (see reap).
        deadline = None if timeout is None else time.monotonic() + timeout
        delay = 0.001
        while self._poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError("bg: job %d still running after %gs" % (self.id, timeout))
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        return self._poll()

    def kill(self, grace=GRACE):
        """SIGTERM the job's process group, SIGKILL it after grace seconds;
        returns the status.  A job that had already ended is left as it is:
        its process group id may since belong to another process."""
        if self._poll() is None:
            _kill_group(self._proc, grace)
        return self._poll()

    def tail(self, n=20):
        """The last n lines of the job's log."""
        try:
            with open(self.log, "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - CAP))
                data = f.read()
        except OSError as e:
            raise FileNotFoundError("bg: job %d's log is gone: %s" % (self.id, e.strerror)) from None
        lines = data.decode("utf-8", "replace").splitlines()
        return Text("\n".join(lines[-n:]) if n > 0 else "")

    def line(self):
        code = self._poll()
        end = self._ended if self._ended is not None else time.monotonic()
        return "%-3d pid %-7d %-18s %8s  %s" % (self.id, self.pid, _status(code),
                                               _clock(end - self._started), _short(self.cmd))

    def __repr__(self):
        return "<Job %d pid %d %s: %s>" % (self.id, self.pid, _status(self._poll()), _short(self.cmd))

    def __replhub_show__(self):
        return "job " + self.line().strip() + "\nlog: " + self.log


class Jobs(list):
    """The session's jobs; shows one line a job."""

    def __replhub_show__(self):
        if not self:
            return "no background jobs"
        return "\n".join(j.line() for j in self)


def bg(cmd=None, cwd=None, env=None):
    """Start cmd (bash, as in sh()) in the background and return its Job;
    with no cmd, list the session's jobs."""
    if cmd is None:
        with held(), _lock:
            return Jobs(_jobs)
    argv = _argv(cmd, "bg")
    cwd = _cwd(cwd, "bg")
    full_env = _env(env, "bg")
    with held(), _lock:
        n = len(_jobs) + 1
        log = _log_path(n)
        with open(log, "wb") as f:
            proc = _spawn(argv, "bg", cwd=cwd, env=full_env,
                          stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
        job = Job(n, cmd, proc, log)
        _jobs.append(job)
    return job


def finished_jobs():
    """One line for each job that ended since the last call, e.g.
    "job 2 (sleep 1; echo hi) ended: exit 0"; each is told of once."""
    with held(), _lock:
        jobs = list(_jobs)
    for j in jobs:
        j._poll()
    with held(), _lock:
        ended = sorted(_unreported, key=lambda j: j.id)
        del _unreported[:]
    return ["job %d (%s) ended: %s" % (j.id, _short(j.cmd), _status(j._proc.returncode)) for j in ended]


def kill_all(grace=GRACE):
    """End every running job (SIGTERM, then SIGKILL after grace) and remove
    the logs: for the session's end."""
    global _logdir
    with held(), _lock:
        jobs = list(_jobs)
    live = [j for j in jobs if j._proc.poll() is None]
    for j in live:
        try:
            os.killpg(j.pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + grace
    for j in live:
        try:
            j._proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
    for j in live:
        try:
            os.killpg(j.pid, signal.SIGKILL)
        except OSError:
            pass
        j._proc.wait()
    if _logdir is not None:
        shutil.rmtree(_logdir, ignore_errors=True)
        _logdir = None


# -- sudo ----------------------------------------------------------------

_NO_PASSWORD = "sudo: a password is required; set SUDO_ASKPASS or run the session as root (--sudo)"


def sudo(cmd, input=None, cwd=None, env=None, timeout=600, check=True, merge=False, host=None):
    """sh() as root: through `sudo -A` when $SUDO_ASKPASS is set (in the
    environment or in env=), else `sudo -n`, which fails at once rather
    than ask for a password.  A str runs through bash as root, a list as an
    argv.  env= reaches the command too, past sudo's environment reset.  A
    session that is already root runs the command without sudo (unless
    host= is given).  sudo refusing (no password, a wrong one) raises
    CommandError even with check=False: the command did not run."""
    argv = _argv(cmd, "sudo")
    if env:
        _env(env, "sudo")
        argv = ["env"] + ["%s=%s" % kv for kv in sorted(env.items()) if kv[1] is not None] + argv
    if host is None and os.geteuid() == 0:
        result = _run("sudo", cmd, argv, input, cwd, env, timeout, merge, host)
        return _check(result, "sudo", merge) if check else result
    askpass = (env or {}).get("SUDO_ASKPASS") or os.environ.get("SUDO_ASKPASS")
    mode = "-A" if askpass and host is None else "-n"
    try:
        result = _run("sudo", cmd, ["sudo", mode, "--"] + argv, input, cwd, env, timeout, merge, host)
    except CommandError as e:
        if e.result is None and "no such command: sudo" in str(e):
            raise CommandError("sudo: no sudo command here; run the session as root (--sudo)") from None
        raise
    line = _first_line(result.err) if result.code == 1 else ""
    if line.startswith("sudo: ") and line.endswith(": command not found"):
        raise CommandError("sudo: no such command: " + line[6:-19], result)
    if "a password is required" in line:
        raise CommandError(_NO_PASSWORD, result)
    if line.startswith("sudo:") and ("password" in line or "askpass" in line):
        raise CommandError("sudo: %s; check SUDO_ASKPASS or run the session as root (--sudo)"
                           % line[5:].strip(), result)
    return _check(result, "sudo", merge) if check else result


# -- fetch ---------------------------------------------------------------

def fetch(url, timeout=30, max_bytes=10 * 2 ** 20, binary=False, headers=None):
    """HTTP(S) GET url; returns its body as text (decoded by its charset,
    UTF-8 when it names none) or, with binary=True, as bytes.  Redirects
    are followed.  A body over max_bytes is an error, not a partial result;
    so is a server that takes more than timeout seconds to answer or to
    send the rest (each wait on it is bounded by timeout, the whole by
    twice that)."""
    if not isinstance(url, str):
        raise TypeError("fetch: url must be a str, not %s" % type(url).__name__)
    scheme = urllib.parse.urlsplit(url).scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError("fetch: only http and https URLs, not %r" % (scheme or url))
    timeout = _timeout(timeout, "fetch")
    if timeout is None:
        raise ValueError("fetch: timeout must be a number of seconds above 0")
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes <= 0:
        raise ValueError("fetch: max_bytes must be a whole number of bytes above 0")
    if headers is not None and not isinstance(headers, dict):
        raise TypeError("fetch: headers must be a dict, not %s" % type(headers).__name__)
    start = time.monotonic()
    req = urllib.request.Request(url, headers=dict(headers or {}))
    late = FetchError("fetch: no answer within %gs from %s" % (timeout, url))
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            if urllib.parse.urlsplit(resp.geturl()).scheme.lower() not in ("http", "https"):
                raise FetchError("fetch: %s redirected to %s" % (url, resp.geturl()))
            length = resp.headers.get("Content-Length")
            if length and length.isdigit() and int(length) > max_bytes:
                raise FetchError("fetch: over the %s cap: %s is %s" % (_size(max_bytes), url, _size(int(length))))
            body = bytearray()
            while True:
                chunk = resp.read(min(65536, max_bytes + 1 - len(body)))
                if not chunk:
                    break
                body += chunk
                if len(body) > max_bytes:
                    raise FetchError("fetch: over the %s cap: %s" % (_size(max_bytes), url))
                if time.monotonic() - start > 2 * timeout:
                    raise FetchError("fetch: %s did not finish within %gs" % (url, 2 * timeout))
            charset = resp.headers.get_content_charset() or "utf-8"
    except urllib.error.HTTPError as e:
        e.close()
        raise FetchError("fetch: HTTP %d for %s" % (e.code, url)) from None
    except urllib.error.URLError as e:
        if isinstance(e.reason, socket.timeout):
            raise late from None
        reason = getattr(e.reason, "strerror", None) or e.reason
        raise FetchError("fetch: cannot reach %s: %s" % (url, reason)) from None
    except socket.timeout:
        raise late from None
    except (OSError, ValueError) as e:
        raise FetchError("fetch: %s: %s" % (url, getattr(e, "strerror", None) or e)) from None
    if binary:
        return bytes(body)
    try:
        return Text(body.decode(charset, "replace"))
    except LookupError:
        return Text(body.decode("utf-8", "replace"))


# -- cd ------------------------------------------------------------------

def cd(path=None):
    """Make path (~ expanded; None: the home folder) the session's working
    folder; returns "cwd: /the/absolute/path"."""
    target = os.path.expanduser("~" if path is None else os.fspath(path))
    try:
        os.chdir(target)
    except FileNotFoundError:
        raise FileNotFoundError("cd: no such folder: %s" % target) from None
    except NotADirectoryError:
        raise NotADirectoryError("cd: not a folder: %s" % target) from None
    except PermissionError:
        raise PermissionError("cd: permission denied: %s" % target) from None
    return Text("cwd: " + os.getcwd())


# A KeyboardInterrupt is raised in these at a held() section's end only:
# the command's pipes are closed and its group ended (see guard).
guard(_execute, _collect)
