"""Store times for people: the one format every human-readable output shows a store time in
(ISO-8601 UTC with milliseconds, ``2026-11-22T11:06:14.078Z``, as docs/user-guide.md says) and the one
parser of a time a person gives (that format, any ISO-8601, or epoch milliseconds). JSON outputs
keep their own fields (epoch ms next to the formatted time)."""
from __future__ import annotations

import re
from datetime import UTC, datetime


def format_time(ms: int) -> str:
    """Epoch milliseconds -> ``2026-11-22T11:06:14.078Z`` (the number itself when no date has it)."""
    try:
        ts = datetime.fromtimestamp(ms // 1000, UTC).replace(microsecond=ms % 1000 * 1000)
    except (ValueError, OverflowError, OSError):
        return str(ms)
    return ts.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_time(text: str) -> int:
    """Epoch milliseconds (``1700000000000``) or ISO-8601 (``2026-11-22T10:00:00Z``; no zone
    means UTC) -> epoch milliseconds. ValueError naming the text otherwise."""
    if re.fullmatch(r"-?\d+", text.strip()):
        return int(text)
    try:
        ts = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(f"not a time: {text!r} (give ISO-8601 such as 2026-11-22T10:00:00Z, "
                         f"or epoch ms)") from None
    ts = ts if ts.tzinfo else ts.replace(tzinfo=UTC)
    return int(ts.timestamp()) * 1000 + ts.microsecond // 1000
