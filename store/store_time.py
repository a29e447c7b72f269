"""Store times for people: the one format every human-readable output shows a store time in
(ISO-8601 UTC with milliseconds, ``2026-11-22T11:06:14.078Z``, as docs/user-guide.md says) and the one
parser of a time a person gives (that format, any ISO-8601, or epoch milliseconds), and of a
duration (ISO-8601, ``P1DT2H``, as Java's Duration.parse takes it). JSON outputs keep their own
fields (epoch ms next to the formatted time)."""
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


_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?=\d)(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:[.,](\d{1,3})\d*)?S)?)?",
                       re.IGNORECASE)
#: milliseconds of a day, an hour, a minute, a second: the units of _DURATION's groups
_UNIT_MS = (86_400_000, 3_600_000, 60_000, 1000)


def parse_duration(text: str) -> int:
    """An ISO-8601 duration ``PnDTnHnMn.nS`` (Java's Duration.parse, as Kafka's
    ``--by-duration`` takes it; days are 24 hours; no sign: a span back) -> milliseconds
    (fractions of a second beyond the millisecond dropped). ValueError naming the text
    otherwise."""
    m = _DURATION.fullmatch(text.strip())
    if m is None or not any(m.groups()):
        raise ValueError(f"not a duration: {text!r} (give ISO-8601 PnDTnHnMnS such as P1DT2H, "
                         f"PT30M or PT1.5S)")
    *whole, fraction = m.groups()
    ms = sum(int(n) * unit for n, unit in zip(whole, _UNIT_MS) if n is not None)
    return ms + int((fraction or "0").ljust(3, "0"))
