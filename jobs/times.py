"""Times on the command line: a time option (``store.store_time``: ISO-8601 or epoch ms) as an
argparse type, and epoch milliseconds as an aware UTC datetime for Spark."""
from __future__ import annotations

import argparse
from datetime import UTC, datetime

from rocketlake.store import store_time
from rocketlake.store.store_time import format_time


def parse_time(text: str) -> int:
    """A time option (``store.store_time.parse_time``) -> epoch milliseconds; an argparse error
    naming the text otherwise."""
    try:
        return store_time.parse_time(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def duration(text: str) -> int:
    """A duration option (``store.store_time.parse_duration``: ISO-8601 ``PnDTnHnMnS``) ->
    milliseconds; an argparse error naming the text otherwise."""
    try:
        return store_time.parse_duration(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def time_fields(prefix: str, ms_time: int | None) -> dict[str, str | int | None]:
    """``<prefix>_time`` (``store.store_time.format_time``: ISO-8601 UTC, milliseconds) and
    ``<prefix>_timestamp`` (epoch ms), both None for no time: a time in a JSON row."""
    iso = None if ms_time is None else format_time(ms_time)
    return {f"{prefix}_time": iso, f"{prefix}_timestamp": ms_time}


def to_datetime(ms: int) -> datetime:
    """Epoch milliseconds -> an aware UTC datetime (exact to the millisecond)."""
    return datetime.fromtimestamp(ms // 1000, UTC).replace(microsecond=ms % 1000 * 1000)
