"""Where the log lines of a `rocketlake` command or a ``spark-submit`` job go: the one place that
configures logging. Every other module only gets its logger (``logging.getLogger(__name__)``).

Lines go to stderr, so stdout keeps only a command's output (JSON Lines, tables): through rich's
handler when stderr is a terminal, else as plain lines ``<time> <LEVEL> <logger> <message>``
(``2026-11-22T10:00:00.000Z INFO rocketlake.jobs.rebuild ...``), one record a line, as a log
file or Airflow's task log keeps them. The handler sits on the ``rocketlake`` logger: Spark's and
py4j's Python loggers stay as they are. A stored string in a message (a group, a file name) is
made printable (:mod:`rocketlake.jobs.printable`), so it cannot drive the terminal.
"""
from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

from rich.console import Console
from rich.logging import RichHandler

from rocketlake.jobs.printable import printable
from rocketlake.store.store_time import format_time

#: the logger every module of the package logs under (``rocketlake.<package>.<module>``)
ROOT = "rocketlake"


def add_verbosity(p: argparse.ArgumentParser) -> None:
    """``-q`` (warnings and errors only) and ``-v`` (debug lines too) -> ``args.log_level``
    (default: info)."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("-q", "--quiet", dest="log_level", action="store_const", const=logging.WARNING,
                   default=logging.INFO, help="log only warnings and errors on stderr")
    g.add_argument("-v", "--verbose", dest="log_level", action="store_const", const=logging.DEBUG,
                   help="also log debug lines on stderr (an expected error's traceback, ...)")


class _Printable(logging.Formatter):
    """A record's message and traceback with what is not printable escaped (a message stays one
    line); ``fmt`` around them."""

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802
        record.message = printable(record.message)
        return super().formatMessage(record)

    def formatException(self, ei: Any) -> str:  # noqa: N802
        return "\n".join(map(printable, super().formatException(ei).splitlines()))


class _PlainLines(_Printable):
    """``<time> <LEVEL> <logger> <message>``, the time as the store writes it (UTC, ms)."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:  # noqa: N802
        return format_time(int(record.created * 1000))


def _handler(stream: TextIO) -> logging.Handler:
    """Rich's handler on a terminal (it draws time and level), plain lines otherwise."""
    handler: logging.Handler
    if stream.isatty():
        handler = RichHandler(console=Console(file=stream), show_path=False, markup=False,
                              rich_tracebacks=False)
        handler.setFormatter(_Printable("%(message)s"))
    else:
        handler = logging.StreamHandler(stream)
        handler.setFormatter(_PlainLines())
    return handler


@contextmanager
def to_stderr(level: int = logging.INFO) -> Iterator[None]:
    """Log the package's records at ``level`` and above to stderr while the block runs (the
    stderr of that moment: a test's capture too); the logger is as it was afterwards."""
    # a job run as ``spark-submit jobs/<job>.py`` is the module ``__main__``: its logger too
    loggers = [logging.getLogger(name) for name in (ROOT, "__main__")]
    handler, before = _handler(sys.stderr), [lg.level for lg in loggers]
    handler.setLevel(level)
    for lg in loggers:
        lg.addHandler(handler)
        lg.setLevel(level)
    try:
        yield
    finally:
        for lg, was in zip(loggers, before):
            lg.removeHandler(handler)
            lg.setLevel(was)
