"""A writer process killed at a random moment: ``durability_writer.py`` started, SIGKILLed, and
what it acknowledged before (the kill -9 tests' one way to crash a writer mid-write)."""
from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

WRITER = Path(__file__).parent / "durability_writer.py"


def run_and_kill(root: Path, mode: str, rnd: int, threads: int, rng: random.Random,
                 wait_ready: bool, *writer_args: str,
                 delay: tuple[float, float] = (0.02, 0.4),
                 ready_line: str = "READY") -> list[tuple[str, int, int]]:
    """Start a writer (``durability_writer.py``, extra ``writer_args``), SIGKILL it at a random
    moment (``delay`` seconds after it first prints ``ready_line`` when ``wait_ready``); return
    what it acknowledged."""
    proc = subprocess.Popen([sys.executable, str(WRITER), str(root), mode, str(rnd), str(threads),
                             *writer_args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    ready = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            if line == ready_line + "\n":
                ready.set()
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if wait_ready:
            assert ready.wait(60), f"writer never printed {ready_line}"
            time.sleep(rng.uniform(*delay))
        else:  # anywhere from start-up and recovery to the first writes
            time.sleep(rng.uniform(0.0, 0.8))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reader.join()
    err = proc.stderr.read()
    assert proc.returncode == -signal.SIGKILL, err
    assert "Traceback" not in err, err
    acks = []
    for line in lines:
        if line.startswith("ACK ") and line.endswith("\n"):
            _, key, off, qoff = line.split()
            acks.append((key, int(off), int(qoff)))
    return acks
