"""The exit codes of every `rocketlake` command (and of ``spark-submit jobs/<job>.py``), and
which error gets which code. The README's "Exit codes" section documents the same table."""
from __future__ import annotations

import errno
import sys
from collections.abc import Callable
from enum import IntEnum

from rocketlake.store.errors import (
    ConfigFileError,
    CorruptRecordError,
    StoreFormatError,
    StoreFullError,
    StoreLockedError,
    UnsafePathError,
)


class ExitCode(IntEnum):
    OK = 0
    #: the check ran and found problems (``verify``, a pipeline check that disagreed)
    PROBLEMS = 1
    #: bad usage or input: an argparse error, a bad ``--set``, a bad event line, a refused path,
    #: a path that is not a store (argparse itself exits with 2 too)
    USAGE = 2
    #: the store is unusable: corrupt beyond what the command can read, locked by a live writer
    #: where the command must write, or the disk is full
    UNUSABLE = 3


class NotAStoreError(FileNotFoundError):
    """A ``--store`` path that is missing, not a directory or not a RocketMQ store."""


#: error class -> exit code, first match wins (subclasses before their bases)
_CODES: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], ExitCode], ...] = (
    (UnsafePathError, ExitCode.USAGE),  # a StoreFormatError, but the refusal of a path
    ((StoreFormatError, CorruptRecordError, ConfigFileError, StoreLockedError, StoreFullError),
     ExitCode.UNUSABLE),
    ((ValueError, FileNotFoundError, FileExistsError, NotADirectoryError, RuntimeError),
     ExitCode.USAGE),
)


def exit_code(error: BaseException) -> ExitCode | None:
    """The exit code for ``error``; None for an error no command expects (a bug: traceback)."""
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        return ExitCode.UNUSABLE
    for classes, code in _CODES:
        if isinstance(error, classes):
            return code
    return None


def run(prog: str, body: Callable[[], int]) -> int:
    """Run a command's body; an expected error becomes one line ``<prog>: error: ...`` on stderr
    and its exit code. A closed stdout (``| head``) ends the command quietly."""
    try:
        return body()
    except BrokenPipeError:
        return ExitCode.OK
    except Exception as e:  # re-raised below unless the table maps it
        code = exit_code(e)
        if code is None:
            raise
        print(f"{prog}: error: {e}", file=sys.stderr)
        return code
