"""Tables of user topics and system topics apart (``store.topic_kinds``): what `topic-stats` and
`topics` print without ``--json``."""
from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from rocketlake.jobs.cli.tables import Row, show_rows
from rocketlake.jobs.printable import printable
from rocketlake.store.topic_kinds import is_system_topic

log = logging.getLogger(__name__)


def show_apart(a: argparse.Namespace, rows: Sequence[Row],
               tables: Sequence[tuple[str, Sequence[str]]]) -> None:
    """The rows of user topics, then those of system topics (by each row's ``topic``), each
    part as one table per ``(what, columns)`` of ``tables``, titled "user topics of STORE:
    what". Piped, the plain columns have no title: a line ``title:`` leads each table, a blank
    line parts them. No rows: a line on stderr says so."""
    if not rows:
        log.info("%s: no topics", a.store)
    out, first = sys.stdout, True
    for system, kind in ((False, "user topics"), (True, "system topics")):
        part = [r for r in rows if is_system_topic(r["topic"]) == system]
        for what, columns in tables if part else ():
            title = f"{kind} of {a.store}: {what}"
            if not out.isatty():
                out.write(("" if first else "\n") + printable(title) + ":\n")
            first = False
            show_rows(a, part, columns, title)
