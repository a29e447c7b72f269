"""`rocketlake topic-stats` (mqadmin statsAll, kafka-log-dirs) on a hand-built store with known
store times: counts, bytes and windows per queue and topic, system topics apart, JSON field by
field, tables at 80 columns."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from terminal import on_terminal

from rocketlake.jobs import cli
from rocketlake.store import Message, MessageStore
from rocketlake.store.message_store import now_ms

SMALL = {"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 600,
         "maxHashSlotNum": 16, "maxIndexNum": 40}
SETTINGS = [a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")]
#: 2026-11-22T10:00:00.000Z: the newest store time of the store, where the windows end
END = 1795341600000
H, M = 3_600_000, 60_000
LONG_TOPIC = "inventory-adjustments-from-warehouse-management"


def _build(root: Path, topic: str = "orders", end: int = END) -> dict[tuple[str, int], list[int]]:
    """orders queue 0: 2 days, 23 h, 30 min before the end and at the end; queue 1: exactly 1 h
    and 10 min before; payments queue 0: 5 h before; %RETRY%g1 and a delayed message (under
    SCHEDULE_TOPIC_XXXX) 2 h before. Returns (topic, queue) -> the put records' sizes."""
    msgs = [Message(topic, b"a" * 10, queue_id=0, store_timestamp=end - 48 * H),
            Message(topic, b"b" * 20, queue_id=0, store_timestamp=end - 23 * H),
            Message(topic, b"c" * 30, queue_id=1, store_timestamp=end - H),
            Message("payments", b"d" * 40, store_timestamp=end - 5 * H),
            Message("%RETRY%g1", b"e" * 50, store_timestamp=end - 2 * H),
            Message("payments", b"f" * 60, delay_level=3, store_timestamp=end - 2 * H),
            Message(topic, b"g" * 70, queue_id=0, store_timestamp=end - 30 * M),
            Message(topic, b"h" * 80, queue_id=1, store_timestamp=end - 10 * M),
            Message(topic, b"i" * 90, queue_id=0, store_timestamp=end)]
    sizes: dict[tuple[str, int], list[int]] = {}
    with MessageStore(root, **SMALL) as ms:
        for p in ms.put_batch(msgs):
            sizes.setdefault((p.topic, p.queue_id), []).append(p.size)
    assert set(sizes) == {(topic, 0), (topic, 1), ("payments", 0), ("%RETRY%g1", 0),
                          ("SCHEDULE_TOPIC_XXXX", 2)}  # delay level 3: queue 2
    return sizes


def _row(topic: str, q: int | None, system: bool, n: int, size: int, hour: int, day: int,
         oldest: tuple[str, int], newest: tuple[str, int]) -> dict:
    return {"topic": topic, "queue_id": q, "system": system, "messages": n, "bytes": size,
            "last_hour": hour, "last_day": day, "oldest_time": oldest[0], "oldest_timestamp": oldest[1],
            "newest_time": newest[0], "newest_timestamp": newest[1]}


def _json(capsys: pytest.CaptureFixture[str], root: Path, *more: str) -> list[dict]:
    assert cli.main(["topic-stats", "--store", str(root), *SETTINGS, "--json", *more]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_counts_bytes_windows_and_times_per_queue_and_topic(tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    sizes = _build(root)
    t = {"-48h": ("2026-11-20T10:00:00.000Z", END - 48 * H),
         "-23h": ("2026-11-21T11:00:00.000Z", END - 23 * H),
         "-5h": ("2026-11-22T05:00:00.000Z", END - 5 * H), "-2h": ("2026-11-22T08:00:00.000Z", END - 2 * H),
         "-1h": ("2026-11-22T09:00:00.000Z", END - H), "-10m": ("2026-11-22T09:50:00.000Z", END - 10 * M),
         "0": ("2026-11-22T10:00:00.000Z", END)}
    o0, o1 = sum(sizes[("orders", 0)]), sum(sizes[("orders", 1)])
    assert _json(capsys, root) == [
        # user topics first: the hour is (09:00, 10:00], the day (2026-11-21T10:00, 10:00]
        _row("orders", 0, False, 4, o0, 2, 3, t["-48h"], t["0"]),
        _row("orders", 1, False, 2, o1, 1, 2, t["-1h"], t["-10m"]),  # exactly 1 h before: not in the hour
        _row("orders", None, False, 6, o0 + o1, 3, 5, t["-48h"], t["0"]),
        _row("payments", 0, False, 1, sizes[("payments", 0)][0], 0, 1, t["-5h"], t["-5h"]),
        _row("payments", None, False, 1, sizes[("payments", 0)][0], 0, 1, t["-5h"], t["-5h"]),
        # then system topics, by name
        _row("%RETRY%g1", 0, True, 1, sizes[("%RETRY%g1", 0)][0], 0, 1, t["-2h"], t["-2h"]),
        _row("%RETRY%g1", None, True, 1, sizes[("%RETRY%g1", 0)][0], 0, 1, t["-2h"], t["-2h"]),
        _row("SCHEDULE_TOPIC_XXXX", 2, True, 1, sizes[("SCHEDULE_TOPIC_XXXX", 2)][0], 0, 1,
             t["-2h"], t["-2h"]),
        _row("SCHEDULE_TOPIC_XXXX", None, True, 1, sizes[("SCHEDULE_TOPIC_XXXX", 2)][0], 0, 1,
             t["-2h"], t["-2h"]),
    ]


def test_one_topic_keeps_the_stores_window(tmp_path: Path, capsys) -> None:
    """--topic payments: its windows still end at the store's newest time (10:00), not at its
    own newest message (05:00): none of its messages is in the last hour."""
    root = tmp_path / "s"
    _build(root)
    rows = _json(capsys, root, "--topic", "payments")
    assert [(r["queue_id"], r["last_hour"], r["last_day"]) for r in rows] == [(0, 0, 1), (None, 0, 1)]


def test_now_ends_the_windows_at_the_clock(tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    end = now_ms() - 5 * M  # the newest message 5 min ago: the clock's hour holds what it did
    _build(root, end=end)
    rows = {(r["topic"], r["queue_id"]): r for r in _json(capsys, root, "--now")}
    assert (rows[("orders", 0)]["last_hour"], rows[("orders", 0)]["last_day"]) == (2, 3)
    # 1 h 5 min and 15 min before the clock: only the second is in its hour
    assert (rows[("orders", 1)]["last_hour"], rows[("orders", 1)]["last_day"]) == (1, 2)
    old = tmp_path / "old"
    _build(old)  # 2026-11-22, days before the clock: nothing in the clock's day
    assert {(r["last_hour"], r["last_day"]) for r in _json(capsys, old, "--now")} == {(0, 0)}


def test_an_unknown_topic_is_a_usage_error(tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    _build(root)
    assert cli.main(["topic-stats", "--store", str(root), *SETTINGS, "--topic", "nosuch"]) == 2
    assert "no ConsumeQueue of topic 'nosuch'" in capsys.readouterr().err


def test_plain_tables_name_user_and_system_topics_apart(tmp_path: Path, capsys) -> None:
    root = tmp_path / "s"
    _build(root)
    assert cli.main(["topic-stats", "--store", str(root), *SETTINGS]) == 0
    out = capsys.readouterr().out
    titles = [line for line in out.splitlines() if line.endswith(":")]
    assert titles == [f"{kind} topics of {root}: {what}:" for kind in ("user", "system")
                      for what in ("messages and bytes", "store times")]
    sections = out.split("\n\n")
    assert "%RETRY%g1" not in sections[0] + sections[1] and "orders" not in sections[2] + sections[3]
    assert "orders    all              6    " in sections[0]


def test_tables_on_80_columns_cut_nothing(tmp_path: Path) -> None:
    root = tmp_path / "s"
    _build(root, topic=LONG_TOPIC)
    text = on_terminal(["topic-stats", "--store", str(root), *SETTINGS], 80)
    assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80, text
    for iso in ("2026-11-20T10:00:00.000Z", "2026-11-22T10:00:00.000Z", "2026-11-22T09:50:00.000Z"):
        assert iso in text
    folded = "".join(line.split("│")[1].strip() for line in text.splitlines()
                     if line.startswith("│") and line.split("│")[1].strip()[:1] in "inventory-adjustm")
    assert LONG_TOPIC in folded


@pytest.mark.parametrize("command", ["topic-stats", "topics"])
def test_a_store_without_topics_says_so(tmp_path: Path, capsys, command: str) -> None:
    root = tmp_path / "s"
    MessageStore(root, **SMALL).close()
    assert cli.main([command, "--store", str(root), *SETTINGS]) == 0
    out, err = capsys.readouterr()
    assert out == "" and f"{root}: no topics" in err
