"""Times on the command line: epoch milliseconds or ISO-8601 in, aware UTC datetimes out."""
from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime


def parse_time(text: str) -> int:
    """A time option: epoch milliseconds (``1700000000000``) or ISO-8601 (``2026-11-22T10:00:00Z``,
    no zone means UTC) -> epoch milliseconds."""
    if re.fullmatch(r"-?\d+", text.strip()):
        return int(text)
    try:
        ts = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a time: {text!r} (give ISO-8601 such as 2026-11-22T10:00:00Z, or epoch ms)") from None
    ts = ts if ts.tzinfo else ts.replace(tzinfo=UTC)
    return int(ts.timestamp()) * 1000 + ts.microsecond // 1000


def to_datetime(ms: int) -> datetime:
    """Epoch milliseconds -> an aware UTC datetime (exact to the millisecond)."""
    return datetime.fromtimestamp(ms // 1000, UTC).replace(microsecond=ms % 1000 * 1000)
