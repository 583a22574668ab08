"""What the shipped modules that run programs (git, systemd) share.

In a session a program runs as the toolkit's sh() runs a command: in a
process group of its own that a timeout or a KeyboardInterrupt ends, its
pipes closed and it reaped however many KeyboardInterrupts land (a held
Ctrl-C, a script's kill -INT in a loop). Through subprocess.run, each call
that one cut short left a zombie and two open pipes. Where the toolkit
cannot be imported (the modules' tests take them from their folder), it is
plain subprocess. Importing it imports nothing more than the toolkit's
package (loaded in every session): git's import stays cheap.
"""

import sys


def run(argv, input=None, cwd=None, env=None, timeout=None):
    """(exit status, stdout bytes, stderr bytes) of argv, stdin input or
    /dev/null; raises the OSError where argv cannot start
    (FileNotFoundError: no such program) and subprocess.TimeoutExpired
    past timeout seconds."""
    try:
        from replhub_toolkit.shell import run_program
    except ImportError:
        import subprocess
        feed = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=env,
                           timeout=timeout, **feed)
        return p.returncode, p.stdout, p.stderr
    return run_program(argv, input=input, cwd=cwd, env=env, timeout=timeout)


def start(argv, **kw):
    """subprocess.Popen(argv, **kw) for a program that lives on (git's
    cat-file): in a session, Popen's poll step is guarded as the toolkit's
    are (children), or a KeyboardInterrupt there could keep Popen's lock
    and the process's end wait for it for ever. Call it in held()."""
    try:
        import replhub_toolkit.children  # noqa: F401  (it guards Popen's poll step)
    except ImportError:
        pass
    import subprocess
    return subprocess.Popen(argv, **kw)


def reap(p, grace):
    """Waits for p, which start() started and which was killed: grace
    seconds at most in a session (the toolkit's children.reap, which
    reaps it itself where a KeyboardInterrupt left Popen's lock taken, and
    Popen's own wait would wait for ever); Popen's wait elsewhere. No
    import: start() loaded children where there is one."""
    children = sys.modules.get("replhub_toolkit.children")
    if children is not None:
        children.reap(p, grace)
    else:
        p.wait()


class _Unguarded(object):
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


# Taken once: an import in held() would run importlib's own code, where a
# KeyboardInterrupt is raised, in the steps of a cleanup's `with held():`.
try:
    from replhub_toolkit import held as _held, guard as _guard
except ImportError:
    _held = _guard = None


def held():
    """The session's SIGINT critical section (the toolkit's held()); none
    outside a session."""
    return _held() if _held is not None else _Unguarded()


def guard(*fns):
    """The toolkit's guard(fns): a SIGINT waits while fns' own code runs;
    nothing outside a session."""
    if _guard is not None:
        _guard(*fns)


# A finally or except clause's `with held():` must not be cut short in
# held's own steps.
guard(held)
