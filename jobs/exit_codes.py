"""The exit codes of every `rocketlake` command (and of ``spark-submit jobs/<job>.py``), and
which error gets which code. docs/user-guide.md's "Exit codes" section documents the same table."""
from __future__ import annotations

import errno
import logging
import re
import sys
import warnings
from collections.abc import Callable
from enum import IntEnum
from functools import partial
from typing import TextIO

from rocketlake.jobs import console_log
from rocketlake.jobs.printable import printable
from rocketlake.store import errors
from rocketlake.store.errors import (
    ConfigFileError,
    CorruptRecordError,
    DataLossError,
    StoreFormatError,
    StoreFullError,
    StoreLockedError,
    UnsafePathError,
)

log = logging.getLogger(__name__)
#: the logger of the Python warnings a command shows (the library's ``warnings.warn``)
_warnings = logging.getLogger(f"{console_log.ROOT}.warnings")


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


#: the table above as the last lines of every command's ``--help``
HELP = """exit codes:
  0  ok
  1  the check found problems (verify, a pipeline check)
  2  bad usage or input (options, --set, an event line, a refused path, not a store)
  3  the store is unusable (corrupt beyond reading, locked by a live writer, disk full)
"""


#: error class -> exit code, first match wins (subclasses before their bases)
_CODES: tuple[tuple[type[BaseException] | tuple[type[BaseException], ...], ExitCode], ...] = (
    (UnsafePathError, ExitCode.USAGE),  # a StoreFormatError, but the refusal of a path
    ((StoreFormatError, CorruptRecordError, ConfigFileError, StoreLockedError, StoreFullError,
      DataLossError), ExitCode.UNUSABLE),
    ((ValueError, FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError,
      RuntimeError),
     ExitCode.USAGE),
)


#: the Python exceptions a Spark task can fail with that a command may expect, by name: the store
#: library's, the builtins of the table, and OSError (a full disk)
_TASK_ERRORS = {c.__name__: c for c in (
    *(c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, errors.RocketlakeError)),
    *(c for group, _ in _CODES for c in (group if isinstance(group, tuple) else (group,))),
    OSError)}
#: the last "[module.]Name: message" line of a Python traceback. The one place an error is read
#: back from text, because Spark keeps no structured form of it: a Python worker sends the JVM
#: only its formatted traceback (``pyspark.util.handle_worker_exception``), so PySpark 4's
#: ``PythonException`` has the condition PYTHON_EXCEPTION for every Python error and message
#: parameters ``msg`` (a fixed sentence) and ``traceback`` (that text); a ``Py4JJavaError`` or
#: ``AnalysisException`` wraps the same text.
_TRACEBACK_LAST = re.compile(r"^(?:\w+\.)*(\w+): (.+)$", re.MULTILINE)
#: how an OSError with an errno prints
_ERRNO = re.compile(r"^\[Errno (\d+)\] ")


def task_error(error: BaseException) -> BaseException | None:
    """The expected error inside a failed Spark task (PySpark's ``PythonException`` and Py4J's
    ``Py4JJavaError`` carry the executor's traceback as text, and so does the
    ``AnalysisException`` of a Python data source that failed while planning), rebuilt so it
    maps to its exit code and prints as one line; None when there is none."""
    if type(error).__name__ not in ("PythonException", "Py4JJavaError", "AnalysisException",
                                    "StreamingQueryException"):
        return None
    found = [m for m in _TRACEBACK_LAST.finditer(str(error)) if m.group(1) in _TASK_ERRORS]
    if not found:
        return None
    name, message = found[-1].groups()
    inner = _TASK_ERRORS[name](f"in a Spark task: {message}")
    if isinstance(inner, OSError) and (errno_at := _ERRNO.match(message)):
        inner.errno = int(errno_at.group(1))
    return inner


#: the top-level modules the ``spark`` extra installs (pyproject.toml) and what they import
SPARK_MODULES = frozenset({"pyspark", "delta", "py4j", "pandas", "deltalake"})


def missing_spark(error: BaseException) -> RuntimeError | None:
    """A RuntimeError (exit 2) saying to install ``rocketlake[spark]`` when ``error`` is the
    import of a module of the ``spark`` extra that is not installed; None otherwise."""
    name = getattr(error, "name", None) or ""
    if not isinstance(error, ModuleNotFoundError) or name.partition(".")[0] not in SPARK_MODULES:
        return None
    return RuntimeError(f"this command needs the spark extra (Spark, Delta), which is not installed "
                        f"here (no module {name!r}): install rocketlake[spark] "
                        f"(pip install 'rocketlake[spark]')")


def exit_code(error: BaseException) -> ExitCode | None:
    """The exit code for ``error``; None for an error no command expects (a bug: traceback)."""
    if isinstance(error, OSError) and error.errno == errno.ENOSPC:
        return ExitCode.UNUSABLE
    for classes, code in _CODES:
        if isinstance(error, classes):
            return code
    inner = task_error(error)
    return exit_code(inner) if inner is not None else None


def run(prog: str, body: Callable[[], int], log_level: int = logging.INFO) -> int:
    """Run a command's body with its log lines on stderr from ``log_level`` up
    (:mod:`console_log`; a Python warning is one of them, ``<prog>: warning: ...``). An expected
    error becomes the command's last line, ``<prog>: error: ...`` on stderr, written as it is and
    whatever the level, as argparse writes a usage error (scripts and people read it as the
    command's verdict), with its notes after it (what became of the store), and its exit code;
    its traceback is a debug record. Stored strings are made printable (``jobs.printable``).
    A closed stdout (``| head``) ends the command quietly."""
    with console_log.to_stderr(log_level), warnings.catch_warnings():  # restores showwarning
        warnings.showwarning = partial(_warning_record, prog)
        try:
            return body()
        except BrokenPipeError:
            return ExitCode.OK
        except Exception as caught:  # re-raised below unless the table maps it
            e = missing_spark(caught) or caught
            code = exit_code(e)
            if code is None:
                raise
            log.debug("%s: the error's traceback", prog, exc_info=e)
            notes = "".join(f"; {note}" for note in getattr(e, "__notes__", ()))
            print(printable(f"{prog}: error: {task_error(e) or e}{notes}"), file=sys.stderr)
            return code


def _warning_record(prog: str, message: Warning | str, category: type[Warning], filename: str,
                    lineno: int, file: TextIO | None = None, line: str | None = None) -> None:
    _warnings.warning("%s: warning: %s", prog, message)
