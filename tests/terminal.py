"""The `rocketlake` program on a real pseudo-terminal: what a user sees in a terminal of a given
width (the tables' 80-column rule is tested through it)."""
from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def on_terminal(argv: list[str], columns: int) -> str:
    """What ``rocketlake <argv>`` shows on a real pseudo-terminal ``columns`` wide, colour codes
    dropped; asserts the command exits 0."""
    env = {**os.environ, "COLUMNS": str(columns), "TERM": "xterm",
           "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))}
    main, child = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "rocketlake.jobs.cli", *argv],
                         stdout=child, stderr=subprocess.PIPE, env=env)
    os.close(child)
    shown = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    os.close(main)
    assert p.wait(timeout=120) == 0
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown.decode())
