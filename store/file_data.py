"""Where a store file's data ends, and the data of many one-file directories read in bulk.

Store files are pre-allocated: past their data they are holes or unwritten extents, which read
as zeros, so a scan stops at the end of the data (``data_end_of``). Loading a store of many
queues reads, for each queue directory, its listing and its one file's data
(``read_one_file_dir``): 11 system calls, 20-25 us a queue here. Threads of one process gain
nothing there (each call's thread holds the GIL about as long as it releases it), so
``read_one_file_dirs`` hands a share of many directories to a helper process, this module run by
a bare interpreter (``python -I -S``, 10 ms to start), and reads the rest itself meanwhile. The
helper sends back what it read, framed; should it not start, or not answer in full and in time,
its share is read in this process.

This module imports nothing beyond a few standard modules: the helper runs its source alone,
without the package or its dependencies, and starts in about 10 ms.
"""
from __future__ import annotations

import errno
import os
import sys
import time

TYPE_CHECKING = False  # typing's own: the helper would take 9 ms more to start
if TYPE_CHECKING:
    import subprocess
    import threading
    from collections.abc import Sequence

#: what ``read_one_file_dir`` found in a directory (see there)
Found = tuple[str, bytes] | None
#: directories from which a helper process reads a share (below this, starting it costs more
#: than it saves)
HELPED = 2048
#: seconds the process waits for the helper's answer once it has read its own share (or twice
#: as long as that took, when longer): then it stops the helper and reads the helper's share
HELPER_PATIENCE = 2.0
#: what ends the helper's answer, before the count of its frames (``_trailer``)
TRAILER = b"rocketlake.store.file_data/1"
#: the helper's share of the directories: this process starts it and decodes its answer, the
#: helper starts about 10 ms later; halves finish together here
HELPER_SHARE = 0.5


def data_end_of(fd: int, size: int | None = None) -> int:
    """Where the last ``SEEK_DATA`` region of the file open at ``fd`` ends (0: it has none), no
    further than ``size`` (by default the file's size). An unwritten extent whose pages are in
    the page cache counts as data; a file system without ``SEEK_DATA`` reports the whole file
    as data."""
    end = pos = 0
    if size is None:
        size = os.fstat(fd).st_size
    while pos < size:
        hole = os.lseek(fd, pos, os.SEEK_HOLE)  # ``pos`` itself in a hole; data: where it ends
        if hole > pos:
            end = min(size, hole)
        if hole >= size:
            break
        try:
            pos = os.lseek(fd, hole, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:  # no data after the hole
                break
            raise
    return end


def data_end_in_units(fd: int, size: int, unit: int) -> int:
    """``data_end_of`` rounded up to a whole ``unit``, at most ``size`` (the file's size)."""
    return min(size, data_end_of(fd, size) + unit - 1) // unit * unit


def read_one_file_dir(path: str, file_size: int, unit: int, max_bytes: int,
                      name_digits: int) -> Found:
    """(its file's name, its bytes up to its last ``unit`` that is not all zeros) of directory
    ``path`` when it holds one store file (names starting with '.' left out): a name of
    ``name_digits`` digits that is a multiple of ``file_size``, no link, ``file_size`` bytes,
    its data at most ``max_bytes``; ("", b"") when it holds no file. None for anything else, an
    error included: the caller's checked load finds and reports it."""
    try:
        names = os.listdir(path)
        if len(names) != 1 or names[0].startswith("."):  # the common case first: one file
            names = [n for n in names if not n.startswith(".")]
            if len(names) != 1:
                return None if names else ("", b"")
        name = names[0]
        if len(name) != name_digits or not (name.isascii() and name.isdecimal()) or int(name) % file_size:
            return None
        fd = os.open(f"{path}/{name}", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        try:
            if os.fstat(fd).st_size != file_size:
                return None
            end = data_end_in_units(fd, file_size, unit)
            if end > max_bytes:
                return None
            data = os.pread(fd, end, 0)
        finally:
            os.close(fd)
    except OSError:
        return None
    if len(data) != end:
        return None
    # a data region is whole pages, mostly zeros: only the units up to the last non-zero one
    # are kept (joined for 100,000 queues, the pages would be 400 MB); its last non-zero byte
    # is the little-endian integer's highest bit (3x faster than ``rstrip``'s byte-by-byte scan)
    nonzero = (int.from_bytes(data, "little").bit_length() + 7) // 8
    return name, data[:-(-nonzero // unit) * unit]


def read_one_file_dirs(paths: Sequence[str], file_size: int, unit: int, max_bytes: int,
                       name_digits: int) -> list[Found]:
    """``read_one_file_dir`` of each of ``paths``, in order: from ``HELPED`` directories on, and
    with a core to spare, a helper process reads the last ``HELPER_SHARE`` of them meanwhile."""
    args = (file_size, unit, max_bytes, name_digits)
    if len(paths) < HELPED or not _spare_core():
        return [read_one_file_dir(p, *args) for p in paths]
    cut = len(paths) - int(len(paths) * HELPER_SHARE)
    helper = _Helper(paths[cut:], args)
    try:
        began = time.monotonic()
        own = [read_one_file_dir(p, *args) for p in paths[:cut]]
        theirs = helper.results(max(HELPER_PATIENCE, 2 * (time.monotonic() - began)))
    except BaseException:
        helper.stop()
        raise
    if theirs is None:
        theirs = [read_one_file_dir(p, *args) for p in paths[cut:]]
    return own + theirs


class _Helper:
    """A helper process reading ``paths`` (``read_one_file_dir`` with ``args``), started at once;
    one thread of this process feeds it the paths and collects its answer."""

    def __init__(self, paths: Sequence[str], args: tuple[int, ...]) -> None:
        import subprocess  # here: the helper, which runs this module, starts sooner without
        import threading

        self.count = len(paths)
        self.answer: bytes | None = None
        self.proc: subprocess.Popen[bytes] | None = None
        self.thread: threading.Thread | None = None
        source = _source()
        if not sys.executable or getattr(sys, "frozen", False) or source is None:
            return  # no interpreter to run it with (an embedding or frozen application)
        try:
            self.proc = subprocess.Popen([sys.executable, "-I", "-S", "-c", source, *map(str, args)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.DEVNULL)
        except OSError:
            return
        request = b"\0".join(map(os.fsencode, paths))
        self.thread = threading.Thread(target=self._talk, args=(self.proc, request),
                                       name="queue-dirs helper", daemon=True)
        self.thread.start()

    def _talk(self, proc: subprocess.Popen[bytes], request: bytes) -> None:
        try:
            out, _ = proc.communicate(request)
        except (OSError, ValueError):  # stopped meanwhile
            return
        if proc.returncode == 0:
            self.answer = out

    def results(self, patience: float) -> list[Found] | None:
        """What the helper read, in order; None when it did not start, did not answer within
        ``patience`` seconds (it is stopped), or answered anything but its whole answer."""
        if self.thread is None:
            return None
        self.thread.join(patience)
        if self.thread.is_alive():
            self.stop()
            return None
        return None if self.answer is None else _unframe(self.answer, self.count)

    def stop(self) -> None:
        """End the helper if it still runs, and wait for it."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.kill()
            except OSError:  # it ended meanwhile
                pass
        if self.thread is not None:
            self.thread.join()


def _frame(found: Found) -> bytes:
    """One answer of the helper: 0 for None; else 1, the name's length (one byte) and the
    name (ASCII digits, or none), the data's length (4 bytes, little-endian) and the data."""
    if found is None:
        return b"\0"
    name, data = found
    return b"\1" + bytes((len(name),)) + name.encode("ascii") + len(data).to_bytes(4, "little") + data


def _trailer(count: int) -> bytes:
    """What ends the helper's answer of ``count`` frames: who answers, in which framing (a
    helper running another version of this module does not end its answer so), and how many."""
    return TRAILER + count.to_bytes(4, "little")


def _unframe(raw: bytes, count: int) -> list[Found] | None:
    """The ``count`` answers ``_frame`` made of ``raw``, followed by their ``_trailer``; None
    when it holds anything else (a cut answer among them)."""
    trailer = _trailer(count)
    if not raw.endswith(trailer):
        return None
    end = len(raw) - len(trailer)
    out: list[Found] = []
    at = 0
    while at < end:
        if raw[at] == 0:
            out.append(None)
            at += 1
            continue
        if raw[at] != 1 or at + 2 > end:
            return None
        data_at = at + 2 + raw[at + 1] + 4
        name = raw[at + 2:data_at - 4]
        if data_at > end or (name and not name.isdigit()):  # bytes' isdigit: ASCII digits only
            return None
        at = data_at + int.from_bytes(raw[data_at - 4:data_at], "little")
        if at > end:
            return None
        out.append((name.decode("ascii"), raw[data_at:at]))
    return out if len(out) == count else None


def _spare_core() -> bool:
    """Whether this process may run on more than one core."""
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else range(os.cpu_count() or 1)
    return len(cores) > 1


def _source() -> str | None:
    """This module's source, which the helper runs (None where the loader cannot give it)."""
    loader = globals().get("__loader__")
    try:
        return loader.get_source(__name__) if loader is not None else None
    except (ImportError, OSError):
        return None


def _serve() -> None:
    """The helper: ``read_one_file_dir(path, *argv)`` of each NUL-separated path on stdin,
    framed (``_frame``) on stdout, then the ``_trailer``."""
    args = tuple(map(int, sys.argv[1:5]))
    request = sys.stdin.buffer.read()
    paths = request.split(b"\0") if request else []
    found = [_frame(read_one_file_dir(os.fsdecode(p), *args)) for p in paths]
    sys.stdout.buffer.write(b"".join(found) + _trailer(len(found)))


if __name__ == "__main__":
    _serve()
