"""Writing a file whole or not at all, under Ctrl-C too: what the file
tools' write() and edit() and the memory module share."""

import _thread
import os

from replhub_toolkit import guard, held


def replace(path, data, mode=0o666, keep=None):
    """Writes data (bytes) over path: into a new file in its folder, synced,
    then renamed over path, and the folder synced. A reader sees the old
    file or the new one, never a part. A new file is made with mode (less
    the umask); keep, the old file's os.stat_result, gives it the old mode,
    and the old owner where this process may set it (root), before a byte
    is written. Raises the OSError of the step that failed, with nothing
    left behind.

    The temporary file and its fd are known, and let go of, in the SIGINT
    section (held), and a KeyboardInterrupt (a held Ctrl-C sends many)
    comes in this function's own code only at its ends (guard, below):
    never between the last write and the rename, never leaving the file
    or the fd behind. It may come while the bytes are written, which
    _write_all does WRITE_CHUNK at a time: a Ctrl-C stops a large write
    then, and the old file stays; or, for data of WRITE_CHUNK or more,
    while it waits for their sync (_sync), which a Ctrl-C stops too. The
    sync of less, and the folder's, are calls it waits for."""
    folder = os.path.dirname(path) or "."
    fd = tmp = None
    try:
        with held():
            # Only its owner reads what takes the place of a file whose
            # mode is not known yet.
            fd, tmp = _create(folder, os.path.basename(path), 0o600 if keep is not None else mode)
        if keep is not None:
            if hasattr(os, "geteuid") and os.geteuid() == 0:
                os.fchown(fd, keep.st_uid, keep.st_gid)  # before the mode: it clears setuid and setgid
            os.fchmod(fd, keep.st_mode & 0o7777)
        _write_all(fd, data)
        if len(data) >= WRITE_CHUNK:
            _sync(fd)
        else:
            os.fsync(fd)  # soon done: a thread's start would double the cost
        with held():
            fd, closing = None, fd  # never closed twice, even when close fails
            os.close(closing)
        with held():
            os.replace(tmp, path)
            tmp = None
    finally:
        with held():
            for fn, arg in ((os.close, fd), (os.unlink, tmp)):
                if arg is not None:
                    _quietly(fn, arg)
    sync_folder(folder)


WRITE_CHUNK = 4 << 20


def _write_all(fd, data):
    """Writes data to fd, WRITE_CHUNK at a time: not guarded, so that a
    KeyboardInterrupt can come between two writes."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view[:WRITE_CHUNK]):]


def _sync(fd):
    """os.fsync(fd), made by a thread of its own (_sync_aside) while this
    one waits: not guarded, so that a KeyboardInterrupt ends the wait,
    and the thread goes on alone to sync and close a dup of fd. A sync
    waits on the storage in the kernel, where no signal cuts it short.
    Where no thread starts, the sync is this thread's."""
    aside = _sync_aside(fd)
    if aside is None:
        os.fsync(fd)
        return
    done, errors = aside
    done.acquire()  # a signal's handler runs in the wait
    if errors:
        raise errors[0]


def _sync_aside(fd):
    """(done, errors) of a new thread that syncs and closes a dup of fd:
    a lock it lets go of once it has, and the OSError it met; None where
    no dup is made or no thread starts. Guarded, and calling no Python
    code: the dup is the thread's, or closed here."""
    try:
        dup = os.dup(fd)
    except OSError:
        return None
    done, errors = _thread.allocate_lock(), []
    done.acquire()
    try:
        _thread.start_new_thread(_sync_dup, (dup, done, errors))
    except BaseException as e:
        # Closed in this guarded frame: _quietly's would be a frame that a
        # KeyboardInterrupt can enter before the close.
        try:
            os.close(dup)
        except OSError:
            pass
        if not isinstance(e, RuntimeError):  # MemoryError: the dup goes too
            raise
        return None
    return done, errors


def _sync_dup(dup, done, errors):
    try:
        os.fsync(dup)
    except OSError as e:
        errors.append(e)
    finally:
        _quietly(os.close, dup)
        done.release()


def _create(folder, base, mode):
    """(fd, path) of a new file in folder, named after base, that no one
    else made (O_EXCL)."""
    for _ in range(100):
        name = os.path.join(folder, ".%s.%s.replhub-tmp" % (base, os.urandom(4).hex()))
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode), name
        except FileExistsError:
            continue
    raise FileExistsError("no free name for a temporary file in %s" % folder)


def sync_folder(folder):
    """Syncs folder, where a rename in it is made lasting; quietly: the
    rename is made already."""
    dfd = None
    try:
        with held():
            dfd = os.open(folder, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        if dfd is not None:
            with held():
                _quietly(os.close, dfd)


def _quietly(fn, arg):
    try:
        fn(arg)
    except OSError:
        pass


guard(replace, sync_folder, _sync_aside)
