"""What the helpers that run programs share to end them whatever Ctrl-C
does: a KeyboardInterrupt can land between any two steps of user code's
thread, and a held Ctrl-C or a script's kill -INT in a loop sends
hundreds. The SIGINT critical section itself is the package's held()."""

import os
import subprocess
import time

from replhub_toolkit import guard


def reap(proc, grace):
    """Wait for proc, killed, grace seconds at most. Popen's own wait waits
    for ever where a KeyboardInterrupt left its lock taken (in poll(),
    between its acquire and its try): then proc is reaped here."""
    try:
        proc.wait(grace)
        return
    except subprocess.TimeoutExpired:
        pass
    end = time.monotonic() + grace
    while proc.returncode is None:
        try:
            pid, status = os.waitpid(proc.pid, os.WNOHANG)
        except ChildProcessError:
            return
        if pid:
            proc.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        elif time.monotonic() > end:
            return  # left to the reaper, with its group
        else:
            time.sleep(0.01)


# Popen.poll's own step between its lock's acquire and its try: a
# KeyboardInterrupt there keeps the lock, and the job or command is never
# seen to end. Every helper that runs programs imports this module.
guard(*[f for f in (getattr(subprocess.Popen, "_internal_poll", None),) if f is not None])
