"""systemd: units, journal and D-Bus calls (libsystemd, else systemctl)

    from replhub import systemd
    systemd.status("nginx")                  # the unit's state, shown like systemctl's
    systemd.units("ssh*")                    # loaded units, a pattern optional
    systemd.props("nginx")["MainPID"]        # every property
    systemd.restart("nginx")                 # start, stop, restart, reload: wait for the job
    systemd.enable("nginx"), systemd.disable("nginx")
    systemd.run(["sleep", "60"])             # a transient service; its name back
    systemd.journal("nginx", since="-1h", grep="error")
    systemd.call("org.freedesktop.hostname1", "/org/freedesktop/hostname1",
                 "org.freedesktop.DBus.Properties", "Get", "ss",
                 "org.freedesktop.hostname1", "Hostname")

user=True works on the session user's own manager (systemctl --user).
Changes to system units are refused unless the session is root: open a
root session (sudo=True) for them; polkit could otherwise pop an
authentication dialog on a desktop.

The machine's libsystemd is bound with ctypes: sd-bus for the manager,
sd-journal for the journal. Where it or a bus is missing, systemctl,
journalctl, systemd-run and busctl do the work, run without a shell.
Results print as plain text and stay Python values (dict, list, str).
Standard library only, Python 3.6 through 3.13.
"""
import collections
import json
import os
import re
import shutil
import subprocess
import time

__all__ = ["status", "units", "props", "start", "stop", "restart", "reload", "enable", "disable",
           "run", "journal", "call", "SystemdError"]


if __name__.startswith("replhub."):
    from replhub import _libsystemd as sd, _programs
else:  # imported from its folder, as its tests do
    import _libsystemd as sd
    import _programs

SystemdError, BusCallError, Bus = sd.SystemdError, sd.BusCallError, sd.Bus
libsystemd, libsystemd_error, split_signature = sd.libsystemd, sd.libsystemd_error, sd.split_signature


# -- arguments ----------------------------------------------------------------

_SUFFIXES = ("service", "socket", "target", "device", "mount", "automount", "swap", "timer",
             "path", "slice", "scope")
_UNIT = re.compile(r"\A[A-Za-z0-9:_.\\@-]+\Z")
_PATTERN = re.compile(r"\A[A-Za-z0-9:_.\\@*?\[\]!-]+\Z")
UNIT_MAX = 255


def unit_name(name):
    """name as a full unit name (".service" added where it has no known
    suffix), or ValueError: nothing else ever reaches a command line."""
    if not isinstance(name, str):
        raise TypeError("systemd: a unit name is a str, not %s" % type(name).__name__)
    if name.rpartition(".")[2] not in _SUFFIXES:
        name += ".service"
    if len(name) > UNIT_MAX or not _UNIT.match(name) or name.startswith("."):
        raise ValueError("systemd: %r is not a unit name (letters, digits and :_.\\@-, at most %d)"
                         % (name[:80], UNIT_MAX))
    return name


def _pattern(p):
    if not isinstance(p, str) or len(p) > UNIT_MAX or not _PATTERN.match(p):
        raise ValueError("systemd: %r is not a unit pattern (a unit name with * ? [ ])" % (p,))
    return p


_SPANS = {"s": 1, "sec": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "minute": 60,
          "minutes": 60, "h": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400,
          "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}
_RELATIVE = re.compile(r"\A-\s*(\d{1,9}(?:\.\d{1,6})?)\s*([a-z]+)\Z")
_ABSOLUTE = ("%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d", "%Y-%m-%dT%H:%M:%S")


def parse_since(since, now=None):
    """A journal bound as epoch seconds: None, a number, a datetime,
    "-1h"/"-30min"/"-2d", "now", "today", "yesterday", or local
    "YYYY-MM-DD[ HH:MM[:SS]]"."""
    now = time.time() if now is None else now
    if since is None:
        return None
    if isinstance(since, bool):
        raise TypeError("systemd: since=%r is not a time" % (since,))
    if isinstance(since, (int, float)):
        return float(since)
    if hasattr(since, "timestamp"):
        return since.timestamp()
    if not isinstance(since, str):
        raise TypeError("systemd: since=%r is not a time" % (since,))
    s = since.strip().lower()
    m = _RELATIVE.match(s)
    if m and m.group(2) in _SPANS:
        return now - float(m.group(1)) * _SPANS[m.group(2)]
    if s == "now":
        return now
    if s in ("today", "yesterday"):
        t = time.localtime(now)
        midnight = time.mktime((t.tm_year, t.tm_mon, t.tm_mday, 0, 0, 0, 0, 0, -1))
        return midnight - (86400 if s == "yesterday" else 0)
    for fmt in _ABSOLUTE:
        try:
            return time.mktime(time.strptime(since.strip(), fmt))
        except (ValueError, OverflowError):
            pass
    raise ValueError("systemd: since=%r: give '-1h', '-30min', '2024-05-01 12:00', "
                     "'today', a datetime or epoch seconds" % (since[:80],))


def _need_root(what, unit, user):
    if not user and os.geteuid() != 0:
        raise SystemdError("systemd: %s %s changes a system unit, which needs root: use a root session "
                           "(session(name, sudo=True), or exec --sudo); user=True works on your own units"
                           % (what, unit))


# -- results ------------------------------------------------------------------

class Status(dict):
    """status(): a dict (id, description, load, active, sub, file_state,
    fragment, main_pid, since, result), shown like systemctl status."""

    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError:
            raise AttributeError(k)

    @property
    def running(self):
        return self.get("active") == "active"

    def __replhub_show__(self):
        dot = {"active": "*", "failed": "x"}.get(self.get("active"), "o")
        lines = ["%s %s - %s" % (dot, self.get("id"), self.get("description") or "")]
        loaded = self.get("load") or ""
        extra = "; ".join(x for x in (self.get("fragment"), self.get("file_state")) if x)
        lines.append("     Loaded: %s%s" % (loaded, " (%s)" % extra if extra else ""))
        active = "%s (%s)" % (self.get("active"), self.get("sub"))
        if self.get("since") and self.get("active") == "active":
            active += " since %s" % self["since"]
        if self.get("result") not in (None, "", "success"):
            active += "; result: %s" % self["result"]
        lines.append("     Active: %s" % active)
        if self.get("main_pid"):
            lines.append("   Main PID: %s" % self["main_pid"])
        return "\n".join(lines)


Unit = collections.namedtuple("Unit", "name load active sub description")


class UnitList(list):
    """units(): a list of Unit, shown as a table."""

    def __replhub_show__(self):
        if not self:
            return "(no units)"
        w = max(len(u.name) for u in self)
        return "\n".join("%-*s %-9s %-8s %-9s %s" % (w, u.name, u.load, u.active, u.sub, u.description)
                         for u in self)


class Props(dict):
    """props(): every property, shown as Key=value lines."""

    def __replhub_show__(self):
        return "\n".join("%s=%s" % (k, _prop_text(v)) for k, v in sorted(self.items()))


def _prop_text(v):
    if isinstance(v, (list, tuple)):
        return " ".join(_prop_text(x) for x in v)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return "%s" % (v,)


class Changes(list):
    """enable()/disable(): the symlinks made or removed, (kind, path, target)."""

    def __replhub_show__(self):
        if not self:
            return "(nothing changed)"
        return "\n".join("%s %s%s" % (k, p, " -> %s" % d if d else "") for k, p, d in self)


class Started(str):
    """run(): the transient unit's name."""

    def __replhub_show__(self):
        return "started %s: status(%r), journal(%r)" % (self, str(self), str(self))


Entry = collections.namedtuple("Entry", "time unit pid priority message")
PRIORITIES = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")


class Journal(list):
    """journal(): a list of Entry (time is epoch seconds), shown one a line."""

    def __replhub_show__(self):
        if not self:
            return "(no entries)"
        return "\n".join("%s %s[%s]: %s" % (time.strftime("%b %d %H:%M:%S", time.localtime(e.time)),
                                             e.unit or "-", e.pid or "-", e.message) for e in self)


def _when(usec):
    if not usec:
        return ""
    return time.strftime("%a %Y-%m-%d %H:%M:%S %Z", time.localtime(usec / 1e6))


# -- the manager ------------------------------------------------------------------

SD1 = "org.freedesktop.systemd1"
SD1_PATH = "/org/freedesktop/systemd1"
MANAGER = SD1 + ".Manager"
PROPERTIES = "org.freedesktop.DBus.Properties"
_IFACE = {"service": "Service", "socket": "Socket", "target": "Target", "device": "Device",
          "mount": "Mount", "automount": "Automount", "swap": "Swap", "timer": "Timer",
          "path": "Path", "slice": "Slice", "scope": "Scope"}

# Which way the manager is reached: "bus" (libsystemd), "cli" (systemctl
# and friends), or None: the bus where it can be had, else the commands.
BACKEND = None


def _backend(user):
    """An open Bus, or None: use the commands."""
    if BACKEND == "cli":
        return None
    try:
        return Bus(user)
    except SystemdError as e:
        if BACKEND == "bus":
            raise
        _FALLBACK_WHY[bool(user)] = str(e)
        return None


_FALLBACK_WHY = {}


def _manager_error(e):
    """A bus error from the manager, in words that say what to do."""
    if isinstance(e, BusCallError) and (e.name in ("org.freedesktop.DBus.Error.ServiceUnknown",
                                                   "org.freedesktop.DBus.Error.NameHasNoOwner")
                                        or e.name.startswith("org.freedesktop.DBus.Error.Spawn.")):
        return SystemdError("systemd: no systemd manager answers on this bus (%s): PID 1 is %s"
                            % (e.name, _pid1()))
    return e


def _pid1():
    try:
        with open("/proc/1/comm") as f:
            return repr(f.read().strip())
    except OSError:
        return "unknown"


def _mcall(bus, member, sig="", *args):
    try:
        return bus.call(SD1, SD1_PATH, MANAGER, member, sig, args)
    except SystemdError as e:
        raise _manager_error(e) from None


def _unit_path(bus, unit):
    return _mcall(bus, "LoadUnit", "s", unit)[0]


def _getall(bus, path, iface):
    try:
        return bus.call(SD1, path, PROPERTIES, "GetAll", "s", (iface,))[0]
    except SystemdError as e:
        raise _manager_error(e) from None


def _status_of(p, unit):
    return Status(id=p.get("Id") or unit, description=p.get("Description", ""), load=p.get("LoadState", ""),
                  active=p.get("ActiveState", ""), sub=p.get("SubState", ""),
                  file_state=p.get("UnitFileState", ""), fragment=p.get("FragmentPath", ""),
                  main_pid=_int(p.get("MainPID")), since=p.get("ActiveEnterTimestamp", ""),
                  result=p.get("Result", ""))


def _int(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


def status(unit, user=False):
    """The unit's state: a dict that shows as systemctl status does."""
    unit = unit_name(unit)
    bus = _backend(user)
    if bus is None:
        return _status_of(_show(unit, user, _STATUS_PROPS), unit)
    with bus:
        path = _unit_path(bus, unit)
        p = dict(_getall(bus, path, SD1 + ".Unit"))
        kind = _IFACE.get(unit.rpartition(".")[2])
        if kind in ("Service", "Socket", "Mount", "Swap"):
            p.update(_getall(bus, path, SD1 + "." + kind))
        p["ActiveEnterTimestamp"] = _when(p.get("ActiveEnterTimestamp"))
        return _status_of(p, unit)


_STATUS_PROPS = ("Id", "Description", "LoadState", "ActiveState", "SubState", "UnitFileState",
                 "FragmentPath", "MainPID", "ActiveEnterTimestamp", "Result")


def props(unit, user=False):
    """Every property of the unit and of its kind (Service, Timer, ...):
    typed values over the bus, strings through systemctl."""
    unit = unit_name(unit)
    bus = _backend(user)
    if bus is None:
        return Props(_show(unit, user, ()))
    with bus:
        path = _unit_path(bus, unit)
        p = Props(_getall(bus, path, SD1 + ".Unit"))
        kind = _IFACE.get(unit.rpartition(".")[2])
        if kind:
            p.update(_getall(bus, path, SD1 + "." + kind))
        return p


def units(pattern=None, user=False, all=False):
    """The loaded units (all=True: inactive ones too), those matching
    pattern ("ssh*") if given."""
    patterns = [_pattern(pattern)] if pattern is not None else []
    bus = _backend(user)
    if bus is None:
        argv = ["list-units", "--plain", "--no-legend", "--full"] + (["--all"] if all else []) + ["--"] + patterns
        out = UnitList()
        for line in _systemctl(argv, user).splitlines():
            f = line.split(None, 4)
            if len(f) >= 4:
                out.append(Unit(f[0], f[1], f[2], f[3], f[4] if len(f) > 4 else ""))
        return out
    with bus:
        rows = _mcall(bus, "ListUnitsByPatterns", "asas", [], patterns)[0]
    return UnitList(sorted(Unit(r[0], r[2], r[3], r[4], r[1]) for r in rows if all or r[3] != "inactive"))


MODES = ("replace", "fail", "isolate", "ignore-dependencies", "ignore-requirements", "flush",
         "replace-irreversibly")


def _job(verb, member):
    def change(unit, user=False, mode="replace", wait=True, timeout=90.0):
        unit = unit_name(unit)
        if mode not in MODES:
            raise ValueError("systemd: mode=%r is not one of %s" % (mode, ", ".join(MODES)))
        _need_root(verb, unit, user)
        bus = _backend(user)
        if bus is None:
            _command("systemctl", ["--no-pager", "--no-ask-password", verb, "--job-mode=" + mode] +
                     ([] if wait else ["--no-block"]) + ["--", unit], user, timeout=timeout)
            return status(unit, user)
        with bus:
            job = _mcall(bus, member, "ss", unit, mode)[0]
            if wait:
                _wait_job(bus, job, timeout)
        return status(unit, user)
    change.__name__ = change.__qualname__ = verb
    change.__doc__ = ("%s the unit (systemctl %s) and, with wait, wait for its job; its status back. "
                      "A system unit needs a root session." % (verb.capitalize(), verb))
    return change


def _wait_job(bus, job, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            bus.call(SD1, job, PROPERTIES, "Get", "ss", (SD1 + ".Job", "State"))
        except BusCallError:
            return  # the job is gone: done
        time.sleep(0.05)
    raise SystemdError("systemd: the job %s still runs after %g s" % (job, timeout))


start = _job("start", "StartUnit")
stop = _job("stop", "StopUnit")
restart = _job("restart", "RestartUnit")
reload = _job("reload", "ReloadUnit")


def enable(unit, user=False):
    """Enable the unit's file (systemctl enable): the symlinks made."""
    return _unit_files("enable", "EnableUnitFiles", unit, user)


def disable(unit, user=False):
    """Disable the unit's file (systemctl disable): the symlinks removed."""
    return _unit_files("disable", "DisableUnitFiles", unit, user)


def _unit_files(verb, member, unit, user):
    unit = unit_name(unit)
    _need_root(verb, unit, user)
    bus = _backend(user)
    if bus is None:
        out = _systemctl([verb, "--", unit], user, both=True)
        return Changes(_symlink_lines(out))
    with bus:
        if verb == "enable":
            changes = _mcall(bus, member, "asbb", [unit], False, False)[1]
        else:
            changes = _mcall(bus, member, "asb", [unit], False)[0]
        _mcall(bus, "Reload")
    return Changes(tuple(c) for c in changes)


def _symlink_lines(text):
    out = []
    for line in text.splitlines():
        m = re.match(r"^Created symlink (\S+) (?:\u2192|->) (\S+?)\.?$", line)
        if m:
            out.append(("symlink", m.group(1), m.group(2)))
            continue
        m = re.match(r'^Removed "?(\S+?)"?\.?$', line)
        if m:
            out.append(("unlink", m.group(1), ""))
    return out


def run(argv, unit=None, user=False, description=None, env=None, cwd=None):
    """Start argv (a list: no shell) as a transient service (systemd-run);
    the unit's name back."""
    if isinstance(argv, (str, bytes)) or not isinstance(argv, (list, tuple)) or not argv:
        raise TypeError("systemd: run takes a list of arguments, no shell: run(['sleep', '60'])")
    argv = [a for a in argv]
    for a in argv:
        if not isinstance(a, str) or "\0" in a:
            raise TypeError("systemd: run's arguments are str without NUL, not %r" % (a,))
    name = unit_name(unit) if unit else "replhub-run-%d-%d.service" % (os.getpid(), int(time.time() * 1000) % 10 ** 9)
    _need_root("run", name, user)
    exe = argv[0] if "/" in argv[0] else shutil.which(argv[0])
    if not exe:
        raise SystemdError("systemd: %s is not on this session's PATH: give its full path" % argv[0])
    env = dict(env or {})
    for k, v in env.items():
        if not isinstance(k, str) or not isinstance(v, str) or "=" in k or "\0" in k + v:
            raise TypeError("systemd: env holds str names (no =) and str values")
    if cwd is not None and (not isinstance(cwd, str) or not cwd.startswith("/")):
        raise ValueError("systemd: cwd is an absolute path")
    bus = _backend(user)
    if bus is None:
        cmd = ["--unit=" + name, "--collect", "--quiet"]
        if description:
            cmd.append("--description=" + description)
        cmd += ["--setenv=%s=%s" % kv for kv in sorted(env.items())]
        if cwd:
            cmd.append("--working-directory=" + cwd)
        _command("systemd-run", cmd + ["--", exe] + argv[1:], user)
        return Started(name)
    properties = [("Description", ("s", description or " ".join(argv)[:200])),
                  ("CollectMode", ("s", "inactive-or-failed")),
                  ("ExecStart", ("a(sasb)", [(exe, argv, False)]))]
    if env:
        properties.append(("Environment", ("as", ["%s=%s" % kv for kv in sorted(env.items())])))
    if cwd:
        properties.append(("WorkingDirectory", ("s", cwd)))
    with bus:
        _mcall(bus, "StartTransientUnit", "ssa(sv)a(sa(sv))", name, "fail", properties, [])
    return Started(name)


def call(destination, path, interface, member, signature="", *args, **kw):
    """Call any D-Bus method: call(dest, path, iface, member, "ss", a, b,
    user=False, timeout=25). One value back, a tuple for several, None for
    none. A variant argument is (signature, value)."""
    user, timeout = kw.pop("user", False), kw.pop("timeout", 25.0)
    if kw:
        raise TypeError("systemd: call() takes user and timeout, not %s" % ", ".join(sorted(kw)))
    sd.arity(signature, args)
    for s in (destination, path, interface, member):
        if not isinstance(s, str) or not s or "\0" in s or s.startswith("-"):
            raise ValueError("systemd: %r is not a D-Bus name or path" % (s,))
    bus = _backend(user)
    if bus is None:
        out = _busctl(destination, path, interface, member, signature, args, user, timeout)
    else:
        with bus:
            out = bus.call(destination, path, interface, member, signature, args, timeout)
    return None if not out else out[0] if len(out) == 1 else out


# -- the commands ---------------------------------------------------------------

def _command(prog, argv, user, both=False, timeout=120):
    exe = shutil.which(prog) or (("/usr/bin/" + prog) if os.path.exists("/usr/bin/" + prog) else None)
    if exe is None:
        why = _FALLBACK_WHY.get(bool(user)) or libsystemd_error() or "no bus"
        raise SystemdError("systemd: neither libsystemd's bus (%s) nor %s is here" % (why, prog))
    full = [exe] + (["--user"] if user else []) + argv
    try:
        code, out, err = _programs.run(full, timeout=timeout, env=dict(
            os.environ, SYSTEMD_PAGER="", SYSTEMD_COLORS="0", LC_ALL="C.UTF-8"))
    except subprocess.TimeoutExpired:
        raise SystemdError("systemd: %s %s took over %d s" % (prog, " ".join(argv[:2]), timeout)) from None
    out = out.decode("utf-8", "replace")
    err = err.decode("utf-8", "replace")
    if code != 0:
        why = "; ".join(line.strip() for line in err.splitlines() if line.strip()) or "exit status %d" % code
        if "not been booted with systemd" in err or "Failed to connect to bus" in err:
            raise SystemdError("systemd: no systemd manager runs here: PID 1 is %s (%s: %s)" % (_pid1(), prog, why))
        raise SystemdError("systemd: %s: %s" % (prog, why))
    return out + err if both else out


def _systemctl(argv, user, both=False):
    return _command("systemctl", ["--no-pager", "--no-ask-password"] + argv, user, both)


def _show(unit, user, names):
    argv = ["show"] + (["--property=" + ",".join(names)] if names else []) + ["--", unit]
    out = {}
    for line in _systemctl(argv, user).splitlines():
        k, sep, v = line.partition("=")
        if sep:
            out[k] = v
    return out


def _busctl(dest, path, iface, member, sig, args, user, timeout):
    argv = ["--json=short", "--allow-interactive-authorization=no", "--timeout=%g" % timeout,
            "call", "--", dest, path, iface, member]
    if sig:
        argv.append(sig)
        for t, v in zip(split_signature(sig), args):
            argv += _busctl_arg(t, v)
    out = _command("busctl", argv, user, timeout=timeout + 5).strip()
    if not out:
        return ()
    reply = json.loads(out)
    return tuple(_from_json(t, d) for t, d in zip(split_signature(reply.get("type", "")), reply.get("data", [])))


def _busctl_arg(t, v):
    """busctl's words for value v of type t."""
    c = t[0]
    if c in sd.STRINGS:
        if not isinstance(v, str):
            raise TypeError("systemd: %r is not a D-Bus string" % (v,))
        return [v]
    if c == "b":
        return ["true" if v else "false"]
    if c in sd.BASIC:
        if isinstance(v, str) or not isinstance(v, (int, float)):
            raise TypeError("systemd: %r is not a D-Bus %s" % (v, c))
        return ["%r" % v]
    if c == "v":
        inner, value = sd.variant(v)
        return [inner] + _busctl_arg(inner, value)
    if c == "a":
        et = t[1:]
        if et[0] == "{":
            kt, vt = split_signature(et[1:-1])
            d = dict(v)
            words = [str(len(d))]
            for k, x in d.items():
                words += _busctl_arg(kt, k) + _busctl_arg(vt, x)
            return words
        v = list(v)
        words = [str(len(v))]
        for x in v:
            words += _busctl_arg(et, x)
        return words
    words = []
    for ft, x in zip(split_signature(t[1:-1]), tuple(v)):
        words += _busctl_arg(ft, x)
    return words


def _from_json(t, d):
    """busctl's JSON value d of type t as the bus would give it."""
    c = t[0]
    if c == "v":
        return _from_json(d["type"], d["data"])
    if c == "a":
        et = t[1:]
        if et == "y":
            return bytes(d)
        if et[0] == "{":
            kt, vt = split_signature(et[1:-1])
            return dict((_key(kt, k), _from_json(vt, x)) for k, x in d.items())
        return [_from_json(et, x) for x in d]
    if c == "(":
        return tuple(_from_json(ft, x) for ft, x in zip(split_signature(t[1:-1]), d))
    return d


def _key(t, k):
    if t in sd.STRINGS:
        return k
    if t == "d":
        return float(k)
    if t == "b":
        return k == "true"
    return int(k)


# -- the journal ------------------------------------------------------------------

def journal(unit=None, since="-1h", grep=None, lines=200, user=False, until=None, directory=None):
    """The journal's entries for unit (all units: None) since a time
    ("-1h", "-30min", "today", a datetime...), those whose message matches
    grep (a regular expression; case-blind when all lower case), the last
    `lines` of them. directory reads the journal files there."""
    if unit is not None:
        unit = unit_name(unit)
    t0, t1 = parse_since(since), parse_since(until)
    if not isinstance(lines, int) or isinstance(lines, bool) or lines < 1:
        raise ValueError("systemd: lines is a count of at least 1")
    rx = None
    if grep is not None:
        try:
            rx = re.compile(grep, 0 if grep != grep.lower() else re.IGNORECASE)
        except (re.error, TypeError) as e:
            raise ValueError("systemd: grep=%r is not a regular expression: %s" % (grep, e)) from None
    if directory is not None and not os.path.isdir(directory):
        raise SystemdError("systemd: %s is not a folder" % directory)
    keep = collections.deque(maxlen=lines)
    if BACKEND != "cli" and libsystemd() is not None:
        source = (_entry(t, f) for t, f in sd.read_journal(_matches(unit, user), _FIELDS, t0, user, directory))
    else:
        source = _journal_cli(unit, user, t0, t1, directory, lines if t0 is None and rx is None else None)
    for e in source:
        if t1 is not None and e.time > t1:
            break
        if rx is None or rx.search(e.message):
            keep.append(e)
    return Journal(keep)


def _matches(unit, user):
    if unit is None:
        return []
    if user:
        return [["_SYSTEMD_USER_UNIT=" + unit], ["USER_UNIT=" + unit]]
    return [["_SYSTEMD_UNIT=" + unit], ["UNIT=" + unit, "_PID=1"]]


_FIELDS = ("MESSAGE", "_SYSTEMD_UNIT", "_SYSTEMD_USER_UNIT", "UNIT", "SYSLOG_IDENTIFIER", "_PID", "PRIORITY")


def _entry(t, f):
    unit = f.get("_SYSTEMD_UNIT") or f.get("_SYSTEMD_USER_UNIT") or f.get("UNIT") or f.get("SYSLOG_IDENTIFIER")
    prio = _int(f.get("PRIORITY")) if f.get("PRIORITY") is not None else 6
    return Entry(t, unit or "", _int(f.get("_PID")) or None, PRIORITIES[prio] if 0 <= prio < 8 else str(prio),
                 f.get("MESSAGE") or "")


def _journal_cli(unit, user, t0, t1, directory, lines):
    # --lines only without --since, where journalctl counts from the end;
    # the caller keeps the last entries.
    argv = ["--no-pager", "--output=json", "--quiet"]
    if lines is not None:
        argv.append("--lines=%d" % lines)
    if t0 is not None:
        argv.append("--since=@%d" % int(t0))
    if t1 is not None:
        argv.append("--until=@%d" % int(t1 + 1))
    if directory is not None:
        argv.append("--directory=" + directory)
    if unit is not None:
        argv.append(("--user-unit=" if user else "--unit=") + unit)
    for line in _command("journalctl", argv, user and directory is None).splitlines():
        try:
            d = json.loads(line)
        except ValueError:
            continue
        f = dict((k, _json_text(d.get(k))) for k in _FIELDS)
        yield _entry(_int(d.get("__REALTIME_TIMESTAMP")) / 1e6, f)


def _json_text(v):
    if isinstance(v, list):  # journalctl gives a binary field as its bytes
        try:
            return bytes(v).decode("utf-8", "replace")
        except (TypeError, ValueError):
            return None
    return v
