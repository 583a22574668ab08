"""replhub's toolkit: helpers every session starts with (tkhelp() lists
them). Each module does one job: files (read, edit, grep ...), shell (sh,
bg, sudo, fetch, cd), memory (Claude Code's auto-memory), modlist
(modules(): what `from replhub import NAME` finds), display (how results
print).

A session gets a small stand-in for each helper, which imports the
helper's module at first use and then steps aside: a session that never
reads a file pays nothing for it at start. Standard library only, Python
3.6 through 3.13.
"""

# Every helper, by the module that holds it.
HELPERS = {
    "read": "files", "readn": "files", "write": "files", "edit": "files", "edits": "files",
    "sed": "files", "splice": "files", "insert": "files", "glob": "files", "grep": "files",
    "diff": "files",
    "sh": "shell", "bg": "shell", "sudo": "shell", "fetch": "shell", "cd": "shell",
    "memory": "memory",
    "modules": "modlist",
}


class CommandError(Exception):
    """A command that sh() ran failed; .result holds its output and code."""

    def __init__(self, message, result=None):
        Exception.__init__(self, message)
        self.result = result



# host_runner(host, argv, input, cwd, env, timeout) -> (code, out, err):
# how sh(cmd, host=h) reaches host h (through the hub); set by preload.
HOST_RUNNER = None


# group_hook(pgid, alive): the worker's reaper keeps the process groups
# that the shell helpers start, to end them with the worker.
GROUP_HOOK = None


# hub_request(kind, **fields) -> (header, data): one request to the hub
# (modules() asks it for the list); set by preload.
HUB_REQUEST = None


def module(name):
    """The module of helper name, imported on first use."""
    import importlib
    mod = importlib.import_module("replhub_toolkit." + HELPERS[name])
    if HELPERS[name] == "shell":
        mod.HOST_RUNNER, mod.GROUP_HOOK = HOST_RUNNER, GROUP_HOOK
    elif HELPERS[name] == "modlist":
        mod.HUB_REQUEST = HUB_REQUEST
    return mod


def tkhelp():
    """One line per helper."""
    lines = []
    for name in sorted(set(HELPERS.values())):
        try:
            mod = module(next(k for k, v in HELPERS.items() if v == name))
            lines.extend("%-8s %s" % kv for kv in sorted(getattr(mod, "HELP", {}).items()))
        except Exception as e:
            lines.append("%-8s (not available: %s)" % (name, e))
    lines.append("%-8s %s" % ("tkhelp", "this list"))
    from replhub_toolkit.display import Text
    return Text("\n".join(lines))


class _Stand(object):
    """A helper's stand-in in the session's namespace: the first use
    imports the helper and puts it in the stand-in's place."""

    def __init__(self, name, ns):
        self._name, self._ns = name, ns
        self.__name__ = self.__qualname__ = name
        self.__doc__ = "replhub toolkit: %s() (tkhelp() lists the helpers)" % name

    def _real(self):
        real = getattr(module(self._name), self._name)
        if self._ns.get(self._name) is self:
            self._ns[self._name] = real
        return real

    def __call__(self, *args, **kwargs):
        return self._real()(*args, **kwargs)

    def __getattr__(self, attr):
        if attr.startswith("_"):
            raise AttributeError(attr)
        return getattr(self._real(), attr)

    def __repr__(self):
        return "<replhub toolkit: %s>" % self._name


class _Unguarded(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


_UNGUARDED = _Unguarded()
_SIGINT = [None]  # the worker's SIGINT critical section (preload)


def held():
    """The worker's SIGINT critical section, to take a lock in that user
    code on the main thread takes and something else takes too (another
    thread, or the worker at the cell's end): a KeyboardInterrupt raised as
    a with statement lets go of a lock can keep it taken for good, and the
    next taker waits for ever. A SIGINT that lands inside is raised once
    the section (and the with statement that holds it) ends; off the main
    thread, or outside a worker, it is a no-op."""
    return _SIGINT[0] or _UNGUARDED


def guard(*fns):
    """Have the worker keep a SIGINT pending, as inside held(), while the
    innermost frame runs one of fns' own code: their except and finally
    clauses, where a cleanup begins, then run whole. The KeyboardInterrupt
    comes as the next held() section ends (an interrupt is sent again
    until it is raised); the code fns call is not covered, and fns must
    not block in their own frame (a read, a wait), which a SIGINT could then
    not cut short."""
    sigint = _SIGINT[0]
    if sigint is not None:
        sigint.guarded.update(tuple(fn.__code__ for fn in fns))  # one call: see Sigint


def preload(ns, host_runner=None, group_hook=None, hub_request=None, sigint=None):
    """Bind every helper's stand-in, tkhelp and CommandError in ns; sigint
    is the worker's SIGINT critical section (held)."""
    global HOST_RUNNER, GROUP_HOOK, HUB_REQUEST
    HOST_RUNNER, GROUP_HOOK, HUB_REQUEST = host_runner, group_hook, hub_request
    _SIGINT[0] = sigint
    guard(held)  # a finally clause's `with held():` must not fail at its call
    for name in HELPERS:
        ns[name] = _Stand(name, ns)
    ns["tkhelp"] = tkhelp
    ns["CommandError"] = CommandError
