"""What a command said on stderr, line by line, without the time, level and logger a log line
starts with when stderr is not a terminal (``jobs/console_log.py``); a line that is not a log
line (the error verdict, argparse's usage) is taken as it is."""
from __future__ import annotations

import re

#: ``<time> <LEVEL> <logger> <message>``, the time as the store writes it (UTC, ms)
LOG_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z (DEBUG|INFO|WARNING|ERROR|CRITICAL) "
                      r"(rocketlake(?:\.\w+)*) (.*)$")


def said(err: str) -> list[str]:
    """Each stderr line's message (a log line's text after its logger)."""
    return [m.group(3) if (m := LOG_LINE.match(line)) else line for line in err.splitlines()]
