"""`rocketlake report` writes one self-contained page that headless Chromium renders."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from datetime import datetime, timedelta

import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib import image

from rocketlake.jobs.cli import main
from rocketlake.jobs.cli.lag_status import group_statuses
from rocketlake.jobs.cli.report import (
    PageInput,
    RecordCounts,
    TopicTotal,
    _cell,
    consumer_lag,
    explain_counts,
    lag_figure,
    layout_figure,
    page_view,
    rate_figure,
    render,
    retention_rows,
    store_facts,
    topic_totals,
    trend_words,
)
from rocketlake.store import Message, MessageStore, codec
from rocketlake.store.config_files import write_consumer_offsets
from rocketlake.store.retention import HOUR_MS, RetentionPolicy
from rocketlake.store.store_time import parse_time

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture()
def report(tmp_path):
    root = tmp_path / "store"
    with MessageStore(root) as ms:
        ms.put_batch([Message(t, b"x" * 50, q, tags="A", store_timestamp=1_700_000_000_000 + i * 250)
                      for i, (t, q) in enumerate((t, q) for t in ("orders", "audit") for q in range(3)
                                                  for _ in range(40))])
    out = tmp_path / "r" / "report.html"
    assert main(["report", "--store", str(root), "--out", str(out)]) == 0
    return out


def test_page_is_self_contained_and_has_the_sections(report):
    page = report.read_text()
    for section in ("Store layout", "Message rate", "Consumer lag", "Last maintenance runs",
                    "Store health", "User topics", "System topics"):
        assert section in page
    imgs = re.findall(r'<img alt="[^"]+" src="([^"]+)"', page)
    assert len(imgs) == 3 and all(src.startswith("data:image/png;base64,") for src in imgs)
    assert not re.search(r'(src|href)="(http|//)', page)  # nothing fetched from elsewhere
    assert "<div class=v>240</div><div class=k>messages in ConsumeQueues</div>" in page  # 2 x 3 x 40
    assert page.count("<td>40</td>") >= 6  # each queue row: 40 messages


def test_headless_chromium_renders_a_non_blank_page(report, tmp_path):
    assert CHROMIUM, "chromium is not installed (make test installs Debian's chromium)"
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking", "--disable-component-update",
                    "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1100,1600",
                    f"--screenshot={shot}", report.as_uri()], check=True, timeout=120,
                   capture_output=True)
    px = image.imread(shot)[..., :3]
    assert px.shape[0] >= 1000 and px.shape[1] >= 1000
    colours = np.unique((px * 255).astype(np.uint8).reshape(-1, 3), axis=0)
    assert len(colours) > 50                       # charts and text, not a blank page
    assert (px < 0.5).mean() > 0.01                # some dark ink on the white background


# --- the page's parts, without Chromium ------------------------------------------------------------
def test_records_and_units_differ_by_transactions_and_delays(tmp_path):
    root = tmp_path / "store"
    with MessageStore(root) as ms:
        ms.put_batch([Message("orders", b"p", 0) for _ in range(10)]
                     + [Message("orders", b"d", 0, delay_level=2) for _ in range(3)]
                     + [Message("orders", b"t", 1, sys_flag=codec.TRANSACTION_PREPARED) for _ in range(2)]
                     + [Message("orders", b"r", 1, sys_flag=codec.TRANSACTION_ROLLBACK)]
                     + [Message("orders", b"c", 1, sys_flag=codec.TRANSACTION_COMMIT) for _ in range(2)])
    facts = store_facts(root, {})
    assert facts.records == RecordCounts(18, 2, 1, {"orders": 3})
    units = sum(q["messages"] for q in facts.queues)
    assert units == 10 + 3 + 2  # plain, delayed (under SCHEDULE_TOPIC_XXXX queue 1), COMMIT
    assert {(q["topic"], q["queue_id"]): q["messages"] for q in facts.queues} == {
        ("orders", 0): 10, ("orders", 1): 2, ("SCHEDULE_TOPIC_XXXX", 1): 3}
    assert explain_counts(facts.records, units) == [
        "The CommitLog holds 18 records; the ConsumeQueues hold 15 units.",
        "2 PREPARED and 1 ROLLBACK transactional records get no unit (only plain and COMMIT "
        "records are dispatched).",
        "3 delayed messages have their unit under SCHEDULE_TOPIC_XXXX (queue = delay level - 1), "
        "not under their real topic (orders 3), until the broker delivers them."]
    assert explain_counts(RecordCounts(5, 0, 0, {}), 3)[-1].startswith("The other 2 records have no unit")


def test_lag_per_topic_and_queue_is_consumer_progress():
    queues = [{"topic": "orders", "queue_id": 0, "min": 0, "max": 40, "messages": 40},
              {"topic": "orders", "queue_id": 1, "min": 5, "max": 30, "messages": 25},
              {"topic": "audit", "queue_id": 0, "min": 0, "max": 7, "messages": 7}]
    committed = {("orders", "billing"): {0: 38}, ("audit", "billing"): {0: 9}, ("gone", "x"): {0: 1}}
    assert consumer_lag(queues, committed) == [
        {"group": "billing", "topic": "audit", "queue_id": 0, "committed": 9, "max": 7, "lag": 0},
        {"group": "billing", "topic": "orders", "queue_id": 0, "committed": 38, "max": 40, "lag": 2},
        # a queue the group never committed counts from 0
        {"group": "billing", "topic": "orders", "queue_id": 1, "committed": 0, "max": 30, "lag": 30},
        # a committed queue the store does not have: max 0 (as `rocketlake lag` shows it)
        {"group": "x", "topic": "gone", "queue_id": 0, "committed": 1, "max": 0, "lag": 0}]


def test_retention_rows_say_when_each_file_expires_and_what_gates_deletion():
    now = 1_795_392_000_000 + 30 * HOUR_MS          # 2026-11-24 06:00 UTC
    other_hour = frozenset({(time.localtime(now / 1000).tm_hour + 12) % 24})
    policy = RetentionPolicy(48, other_hour, 75)
    files = [("00000000000000000000", now - 72 * HOUR_MS, 2**30),   # expired 24 h ago
             ("00000000001073741824", now - 50 * HOUR_MS, 2**30),   # expired 2 h ago
             ("00000000002147483648", now - 1 * HOUR_MS, 2**30)]    # the last file
    decision, rows = retention_rows(files, now, policy, disk_ratio=0.40)
    assert decision.delete == ()
    assert [r["expires at (UTC)"] for r in rows] == ["2026-11-23T06:00:00.000Z", "2026-11-24T04:00:00.000Z",
                                                     "2026-11-26T05:00:00.000Z"]
    assert rows[0]["modified (UTC)"] == "2026-11-21T06:00:00.000Z" and rows[0]["size"] == "1,024.0 MiB"
    assert rows[0]["at the next expiry run"].startswith("kept: expired (72.0 h old) but deletion waits")
    assert rows[2]["at the next expiry run"].startswith("kept: the last file")
    decision, rows = retention_rows(files, now, policy, disk_ratio=0.80)  # above the disk ratio
    assert decision.delete == ("00000000000000000000", "00000000001073741824")
    assert [r["at the next expiry run"] for r in rows[:2]] == [
        "deleted (disk use above diskMaxUsedSpaceRatio)"] * 2


def _overlaps(fig) -> bool:
    fig.canvas.draw()
    ax = fig.axes[0]
    return ax.get_legend().get_window_extent().overlaps(ax.get_window_extent())


def test_legends_sit_outside_the_axes():
    queues = [{"topic": t, "queue_id": q, "min": 0, "max": 40, "messages": 40}
              for t in ("orders", "audit") for q in range(8)]
    history = [{"consumer_group": g, "snapshot_ts": datetime(2026, 11, 23, h), "lag": 5 * h}
               for g in ("billing", "audit") for h in range(4)]
    for fig in (layout_figure(queues), lag_figure(history),
                rate_figure(np.arange(0, 10_000, 100), np.array(["a", "b"] * 50, dtype=object))):
        assert not _overlaps(fig)
        plt.close(fig)


def test_page_shows_group_status_runs_in_words_and_renders_without_history(tmp_path):
    root = tmp_path / "store"
    with MessageStore(root) as ms:
        ms.put_batch([Message("orders", b"x", 0) for _ in range(12)])
    facts = store_facts(root, {})
    t0 = datetime(2026, 11, 23, 1)
    history = [{"consumer_group": "billing", "topic": "orders", "queue_id": 0,
                "snapshot_ts": t0 + timedelta(hours=h), "consumer_offset": 3, "lag": 6 + h} for h in range(3)]
    runs = [{"job": "compact", "status": "ok", "started_ms": 1_795_392_000_000 + 4 * HOUR_MS,
             "finished_ms": 1_795_392_000_000 + 4 * HOUR_MS + 2000,
             "summary": json.dumps({"plan": {"reason": "scheduled", "delete": [], "kept": {}},
                                    "compacted": {"user-state": {"kept": 17}}})}]
    policy = RetentionPolicy(48, frozenset({4}), 75)
    page = render(PageInput(root, facts, history, runs, 1_795_392_000_000, policy, 0.5, lake=True))
    assert ("<td>billing</td><td>orders</td><td class=STALLED>STALLED</td><td>orders/0</td><td>8</td>"
            "<td>rose by 2</td><td>3</td>") in page
    assert ("<li>compact at 2026-11-23T04:00:00.000Z: deleted no CommitLog file (none expired), "
            "compacted user-state: 17 keys kept (took 2.0 s)</li>") in page
    empty = render(PageInput(root, facts, [], [], 1_795_392_000_000, policy, 0.5))
    assert "No offsets history (no --lake given)" in empty and "No maintenance run recorded yet." in empty
    assert empty.count("data:image/png;base64,") == 3


def test_names_from_the_store_and_the_lake_are_escaped_in_the_page(tmp_path):
    root = tmp_path / "store"
    with MessageStore(root) as ms:
        ms.put_batch([Message("orders", b"x", 0) for _ in range(4)])
    group, topic = "<script>alert(1)</script>", "<script>t</script>"
    write_consumer_offsets(root, {("orders", group): {0: 1}})
    history = [{"consumer_group": group, "topic": topic, "queue_id": 0,
                "snapshot_ts": datetime(2026, 11, 23, h), "consumer_offset": 1, "lag": 3} for h in range(2)]
    page = render(PageInput(root, store_facts(root, {}), history, [], 1_795_392_000_000,
                            RetentionPolicy(48, frozenset({4}), 75), 0.5, lake=True))
    assert "<script" not in page
    assert "<td>&lt;script&gt;alert(1)&lt;/script&gt;</td><td>orders</td>" in page  # lag now
    assert "<td>&lt;script&gt;t&lt;/script&gt;/0</td>" in page  # status
    assert "<div class=k>group &lt;script&gt;alert(1)&lt;/script&gt;</div>" in page


def test_a_lake_that_does_not_exist_is_an_error_naming_it(tmp_path, capsys):
    root = tmp_path / "store"
    with MessageStore(root) as ms:
        ms.put_batch([Message("orders", b"x", 0)])
    out, lake = tmp_path / "report.html", tmp_path / "nolake"
    assert main(["report", "--store", str(root), "--lake", str(lake), "--out", str(out)]) == 2
    assert f"{lake}: no such lake directory" in capsys.readouterr().err
    assert not out.exists() and not lake.exists()


# --- the headline, topics, health, group status per topic, one format -----------------------------
T0 = 1_795_392_000_000                                     # 2026-11-23T00:00:00.000Z


def test_facts_name_both_counts_and_put_system_topics_apart_with_their_bytes(tmp_path):
    root = tmp_path / "store"
    with MessageStore(root) as ms:
        ms.put_batch([Message("orders", b"o" * 100, q, store_timestamp=T0) for q in (0, 1) for _ in range(5)])
        orders_end = ms.commitlog.max_offset
        ms.put_batch([Message("orders", b"d", 0, delay_level=2, store_timestamp=T0) for _ in range(3)])
        delayed_end = ms.commitlog.max_offset
        ms.put_batch([Message("orders", b"t", 1, sys_flag=codec.TRANSACTION_PREPARED, store_timestamp=T0)])
        prepared_end = ms.commitlog.max_offset
        ms.put_batch([Message("%RETRY%billing", b"r", 0, store_timestamp=T0) for _ in range(2)])
        end = ms.commitlog.max_offset
    facts = store_facts(root, {})
    user, system = topic_totals(facts)
    # orders: 10 units; 10 plain records and the PREPARED one (no unit) stored under its name
    assert user == [TopicTotal("orders", 2, 10, 11, orders_end + (prepared_end - delayed_end))]
    assert system == [TopicTotal("%RETRY%billing", 1, 2, 2, end - prepared_end),
                      TopicTotal("SCHEDULE_TOPIC_XXXX", 1, 3, 3, delayed_end - orders_end)]
    assert facts.health[0].startswith("OK: 16 records, 15 ConsumeQueue units, ")
    view = page_view(PageInput(root, facts, [], [], T0, RetentionPolicy(48, frozenset({4}), 75), 0.5))
    assert view["headline"] == "15 messages in ConsumeQueues; 16 records in the CommitLog"
    assert [r[0] for r in view["user_topics"]["rows"]] == ["orders"]
    assert [r[0] for r in view["system_topics"]["rows"]] == ["%RETRY%billing", "SCHEDULE_TOPIC_XXXX"]
    assert view["health"] == facts.health


def test_store_health_is_verify_summary_of_a_damaged_store(tmp_path):
    root = tmp_path / "store"
    with MessageStore(root) as ms:
        ms.put_batch([Message("orders", b"x" * 100, 0) for _ in range(4)])
    log = next((root / "commitlog").iterdir())
    data = log.read_bytes()
    with open(log, "r+b") as f:   # a body byte of the second record: its body CRC fails
        f.seek(data.index(b"x" * 100, data.index(b"x" * 100) + 100) + 50)
        f.write(b"\xff")
    health = store_facts(root, {}).health
    assert health[0].startswith("FAILED: ") and "errors" in health[0]
    assert any("commitlog" in line for line in health[1:])


def test_group_status_per_topic_is_its_worst_queue_with_the_lag_trend():
    t0 = datetime(2026, 11, 23, 1)
    rows = [{"consumer_group": "billing", "topic": "orders", "queue_id": q,
             "snapshot_ts": t0 + timedelta(hours=h), "consumer_offset": off, "lag": lag}
            for h in range(3) for q, off, lag in ((0, 5, 100), (1, 10 + 1000 * h, 3000 - 1000 * h))]
    rows += [{"consumer_group": "billing", "topic": "audit", "queue_id": 0,
              "snapshot_ts": t0 + timedelta(hours=h), "consumer_offset": 7, "lag": 0} for h in range(3)]
    by_topic = group_statuses(rows, by_topic=True)
    # orders/0 never moves with lag 100: STALLED decides orders, while its lag fell by 2,000 (q1)
    assert [(s.topic, s.status, s.worst, s.lag, s.change) for s in by_topic] == [
        ("audit", "OK", "audit/0", 0, 0), ("orders", "STALLED", "orders/0", 1100, -2000)]
    assert [trend_words(s) for s in by_topic] == ["unchanged", "fell by 2,000"]
    (group,) = group_statuses(rows)
    assert (group.topic, group.status, group.lag, group.change) == (None, "STALLED", 1100, -2000)
    assert trend_words(group_statuses(rows[:2])[0]) == "-"   # one snapshot: no trend


def test_numbers_have_separators_and_the_rate_axis_shows_iso_utc_clock_times():
    assert [_cell(v) for v in (7, 1234, 48943, -2000, np.int64(50000), "1.2 MiB", True)] == [
        "7", "1,234", "48,943", "-2,000", "50,000", "1.2 MiB", "True"]
    ts = T0 + 36 * HOUR_MS + np.arange(0, 2 * HOUR_MS, 30_000)   # 2026-11-24 12:00 to 14:00 UTC
    fig = rate_figure(ts, np.array(["orders"] * ts.size, dtype=object))
    fig.canvas.draw()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert len(labels) >= 3
    for label in labels:  # format_time's one format, on the chart's span
        assert re.fullmatch(r"2026-11-24T1[234]:\d\d:00\.000Z", label), label
        assert T0 + 36 * HOUR_MS <= parse_time(label) <= T0 + 38 * HOUR_MS
    assert ax.get_xlabel() == "UTC"
    plt.close(fig)
