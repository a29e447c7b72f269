"""Writing store files: never through a symbolic link, whole or not at all, a full disk named.

The one rule for every file a command creates, writes or replaces inside a store (CommitLog,
ConsumeQueue and index files, ``checkpoint``, ``lock``, ``abort``, the config JSON files and their
``.tmp`` and ``.bak``):

- it is opened with ``O_NOFOLLOW``: a symbolic link at its name, also a dangling one, is refused
  with LinkedFileError naming the path, in the same system call (no check-then-open race, no extra
  call on paths written often, like the checkpoint);
- a file created new is made under a temporary name with ``O_EXCL|O_NOFOLLOW`` and renamed into
  place once whole; a file replaced whole (``replace_files``) is written the same way in its
  directory, which is itself opened without following a link, then renamed over and the
  directory fsynced;
- a write that fails (a full disk) removes the temporary files it made and raises an OSError
  naming the path (StoreFullError, telling the free space, when the disk is full);
- durable file by file (the file's data and its name fsynced when created or flushed), except
  in a *bulk output* (``bulk_output``): a new tree written aside, which nothing reads before
  it is whole (a rebuild's output), is made durable once as a whole when its writing ends
  (``make_durable``: one ``syncfs`` of its file system), and the files created or flushed in it
  meanwhile are not fsynced one by one.

Reading follows links (a store may be read where it is linked from), and so do the directories
above a store file except the one ``replace_files`` writes into: a store's `commitlog/` may be
a link to another disk, as a broker's storePathCommitLog may point elsewhere.
"""
from __future__ import annotations

import ctypes
import errno
import os
import shutil
import stat
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from rocketlake.store.errors import LinkedFileError, StoreFormatError, StoreFullError

_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
_NO_FOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
#: the bulk outputs being written in this context (``bulk_output``), each as its absolute path
#: followed by a separator
_BULK: ContextVar[tuple[str, ...]] = ContextVar("bulk_outputs", default=())


def linked(path: str | os.PathLike[str]) -> LinkedFileError:
    """The refusal of a store file at ``path`` that is a symbolic link."""
    return LinkedFileError(f"{path}: is a symbolic link; refusing to write through it")


def directory_in_place(path: str | os.PathLike[str]) -> StoreFormatError:
    """The refusal of a directory at ``path``, where a store file belongs."""
    return StoreFormatError(f"{path}: is a directory where a store file belongs")


def open_file(path: str | os.PathLike[str], flags: int, mode: int = 0o644, dir_fd: int | None = None) -> int:
    """``os.open(path, flags)`` that never follows a link at ``path`` (LinkedFileError naming it)
    and refuses a directory there when opening it for writing (``directory_in_place``); other
    OSErrors as they come. ``dir_fd``: ``path`` is a name in that directory."""
    try:
        return os.open(path, flags | _NO_FOLLOW, mode, dir_fd=dir_fd)
    except OSError as e:
        # ELOOP: O_NOFOLLOW met a link; EEXIST with O_EXCL: a link (even dangling) is there
        if e.errno in (errno.ELOOP, errno.EEXIST) and _is_link(path, dir_fd):
            raise linked(path) from None
        if e.errno == errno.EISDIR:
            raise directory_in_place(path) from None
        raise


def _is_dir(name: str, dir_fd: int) -> bool:
    """Whether ``name`` in the directory ``dir_fd`` is a directory (not a link to one)."""
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _is_link(path: str | os.PathLike[str], dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.stat(path, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def create_temporary(path: Path, dir_fd: int | None = None) -> int:
    """An O_RDWR descriptor of the new, empty file ``path``, a temporary name only writers use:
    a regular file already there (left by an interrupted write) is replaced, a link refused."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL
    try:
        return open_file(path, flags, dir_fd=dir_fd)
    except FileExistsError:
        os.unlink(path, dir_fd=dir_fd)
        return open_file(path, flags, dir_fd=dir_fd)


def fsync_dir(directory: Path) -> None:
    """Make the names in ``directory`` (a rename, a new file) survive a power loss."""
    dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def fsync_tree(directory: Path) -> None:
    """Make everything under ``directory`` durable: every regular file's data and every
    directory's names (links are not followed)."""
    for parent, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(parent, name)
            if stat.S_ISREG(os.lstat(path).st_mode):
                fd = os.open(path, os.O_RDONLY | _NO_FOLLOW)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
        fsync_dir(Path(parent))


@contextmanager
def bulk_output(root: Path) -> Iterator[Path]:
    """Write the new tree ``root`` as a bulk output (the module docstring): inside the block,
    files created under ``root`` (``create_file``) and flushed (``deferred``) are not fsynced
    one by one; when the block ends without an error, ``make_durable(root)`` makes all of it
    durable at once. Only for a tree nothing reads before the block ends (a rebuild's output,
    written aside before it is swapped in or handed over); files outside ``root`` keep the
    per-file rule. ``root`` is created if missing."""
    Path(root).mkdir(parents=True, exist_ok=True)
    token = _BULK.set((*_BULK.get(), os.path.join(os.path.abspath(root), "")))
    try:
        yield root
    finally:
        _BULK.reset(token)
    make_durable(root)


def deferred(path: Path | str) -> bool:
    """Whether ``path`` is inside a bulk output being written (``bulk_output``): its durability
    then comes from that output's ``make_durable``, so a writer need not fsync it now."""
    outputs = _BULK.get()
    if not outputs:
        return False
    p = os.path.abspath(path)
    return any(p.startswith(o) for o in outputs)


def make_durable(root: Path) -> None:
    """Make everything written under the directory ``root`` durable (its files' data, the names
    in its directories): one ``syncfs`` of the file system holding it, and of each other file
    system mounted at one of its subdirectories (a rebuild's output has no deeper mounts: the
    directories below those are its own); ``fsync_tree`` where there is no ``syncfs``. Nothing
    is written; no link inside ``root`` is followed (``root`` itself may be one, as a store
    directory may). A failed write-back raises an OSError naming ``root``."""
    root = Path(root)
    fds = [os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)]
    try:
        devices = {os.fstat(fds[0]).st_dev}
        with os.scandir(root) as entries:
            for e in entries:
                dev = e.stat(follow_symlinks=False).st_dev
                if e.is_dir(follow_symlinks=False) and dev not in devices:
                    devices.add(dev)
                    fds.append(os.open(e.path, os.O_RDONLY | os.O_DIRECTORY | _NO_FOLLOW))
        if _syncfs is None:
            fsync_tree(root)
            return
        for fd in fds:
            if _syncfs(fd) != 0:
                err = ctypes.get_errno()
                raise disk_error(OSError(err, os.strerror(err)), root, "making it durable")
    finally:
        for fd in fds:
            os.close(fd)


def _load_syncfs() -> Callable[[int], int] | None:
    """libc's ``syncfs`` (Linux), None where there is none."""
    try:
        f = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return None
    f.argtypes, f.restype = [ctypes.c_int], ctypes.c_int
    return f


_syncfs = _load_syncfs()


def create_file(path: Path, size: int) -> int:
    """Create ``path`` with ``size`` bytes of zeros reserved on disk; return an O_RDWR descriptor.

    The space is allocated now (``posix_fallocate``, as RocketMQ's ``warmMappedFile`` touches
    every page), so writing through the mapping later can never meet a full disk, which would
    kill the process with SIGBUS. A full disk raises StoreFullError naming the path instead.
    The file is sized under a hidden temporary name and then renamed, so a crash leaves either
    no file or a whole one, never a short one that would stop the store from opening. Refuses to
    replace an existing file (FileExistsError) or a link (LinkedFileError). Its name is made
    durable now (a directory fsync), unless it is in a bulk output (``deferred``).
    """
    path = Path(path)
    if os.path.lexists(path):
        raise linked(path) if path.is_symlink() else FileExistsError(f"{path}: already exists")
    tmp = path.with_name(f".{path.name}.tmp")
    fd = -1
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = create_temporary(tmp)
        reserve(fd, size)
        os.rename(tmp, path)
    except BaseException as e:
        if fd >= 0:
            os.close(fd)
            tmp.unlink(missing_ok=True)
        if not isinstance(e, OSError) or isinstance(e, LinkedFileError):
            raise
        raise disk_error(e, path, f"creating a {size}-byte file") from None
    if not deferred(path):
        fsync_dir(path.parent)
    return fd


def reserve(fd: int, size: int) -> None:
    """Make the new, empty file ``fd`` ``size`` bytes of zeros, its space allocated on disk
    (``posix_fallocate``): writing it later, also through a mapping, never meets a full disk.
    An OSError (ENOSPC: the disk is full) as it comes."""
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise
        # glibc already emulates posix_fallocate by writing where the file system has no
        # fallocate; this is reached only where neither works (e.g. a libc without the
        # emulation). The file is then sparse: its space is not reserved.
        os.ftruncate(fd, size)


def replace_files(directory: Path, contents: Sequence[tuple[str, bytes]]) -> None:
    """Replace the files ``directory/<name>`` with ``contents``, each whole or not at all.

    Every file is first written to ``<name>.tmp`` (created ``O_EXCL|O_NOFOLLOW``) and fsynced;
    only when all are, they are renamed over their names in the order given and the directory
    is fsynced. A failure before the renames (a full disk) leaves every file as it was and no
    ``.tmp`` behind. ``directory`` is created if missing; it and every name must not be a link
    (LinkedFileError naming it), nor a name a directory (StoreFormatError naming it)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    try:
        dfd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | _NO_FOLLOW)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR) and directory.is_symlink():
            raise linked(directory) from None
        raise
    for name, _ in contents:
        if _is_link(Path(name), dfd):
            os.close(dfd)
            raise linked(directory / name)
        if _is_dir(name, dfd):
            os.close(dfd)
            raise directory_in_place(directory / name)
    staged: list[str] = []
    try:
        for name, data in contents:
            fd = create_temporary(Path(f"{name}.tmp"), dfd)
            staged.append(name)
            try:
                write_at(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
    except BaseException as e:
        for done in staged:  # nothing renamed yet: every file is as it was
            os.unlink(f"{done}.tmp", dir_fd=dfd)
        os.close(dfd)
        if isinstance(e, LinkedFileError):  # at the temporary name
            raise linked(directory / f"{name}.tmp") from None
        if isinstance(e, OSError):
            raise disk_error(e, directory / name, "writing its replacement (nothing was "
                                                  "replaced)") from None
        raise
    try:
        for name, _ in contents:
            os.rename(f"{name}.tmp", name, src_dir_fd=dfd, dst_dir_fd=dfd)
        os.fsync(dfd)
    finally:
        os.close(dfd)


def write_whole(path: Path, data: bytes, doing: str) -> None:
    """Write the small file ``path`` whole and durably: to ``.<name>.tmp`` next to it (created
    ``O_EXCL|O_NOFOLLOW``), fsync, rename over ``path``, fsync the directory. A failure leaves no
    temporary and raises ``disk_error`` naming ``path`` and what was being done (``doing``)."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        fd = create_temporary(tmp)
        try:
            write_at(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, path)
        fsync_dir(path.parent)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise disk_error(e, path, doing) from None


def write_at(fd: int, data: bytes | memoryview, pos: int = 0) -> None:
    """Write all of ``data`` to ``fd`` at ``pos``: a write the disk cuts short (it returns fewer
    bytes, no error, when less space is left than asked) goes on with the rest, which then fails
    (an OSError as it comes)."""
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, pos)
        view, pos = view[n:], pos + n


def empty_directory(directory: Path) -> None:
    """Remove everything in ``directory`` (one a command was given empty and wrote into, when
    that command fails): each subdirectory with what it holds, each file or link itself (a
    link's target is never touched); ``directory`` stays, empty. A missing one is left so."""
    for entry in directory.iterdir() if directory.is_dir() else ():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def read_file(path: Path) -> bytes:
    """The bytes of the store file ``path``, never read through a link (LinkedFileError): for a
    writer about to replace or rewrite it; a directory there is a StoreFormatError naming it."""
    fd = open_file(path, os.O_RDONLY)
    if stat.S_ISDIR(os.fstat(fd).st_mode):
        os.close(fd)
        raise directory_in_place(path)
    with os.fdopen(fd, "rb") as f:
        return f.read()


def disk_error(e: OSError, path: str | os.PathLike[str], doing: str) -> OSError:
    """``e`` (met while ``doing`` something to ``path``) restated to name the path and the
    problem: a StoreFullError, telling the free space, when the disk is full."""
    message = f"{path}: {(e.strerror or str(e)).lower()} {doing}"
    if e.errno not in _FULL:
        return OSError(e.errno, message)
    directory = Path(path).parent
    while not directory.exists():
        directory = directory.parent
    st = os.statvfs(directory)
    return StoreFullError(e.errno, f"{message} ({st.f_bavail * st.f_frsize} bytes free)")
