"""What `dump`, `get` and `query` select must be able to match: an unknown topic or queue, or a
range that cannot match, is an error (exit 2) naming what the store has, never a silent empty
answer. The stores are built here: the topics, queues and counts are the ones written."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketlake.jobs.cli import main
from rocketlake.store import TRANSACTION_COMMIT, TRANSACTION_PREPARED, Message, MessageStore

SMALL = ["--set", "mappedFileSizeCommitLog=8192", "--set", "mappedFileSizeConsumeQueue=200",
         "--set", "maxHashSlotNum=32", "--set", "maxIndexNum=50"]


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    """orders: queues 0, 1, 2 (one message each, keys k0..k2); audit: queue 0 (two messages);
    half: one PREPARED message in queue 0 (a record with no ConsumeQueue unit)."""
    root = tmp_path / "s"
    with MessageStore(root, mappedFileSizeCommitLog=8192, mappedFileSizeConsumeQueue=200,
                      maxHashSlotNum=32, maxIndexNum=50) as ms:
        ms.put_batch([*(Message("orders", b"o", q, keys=f"k{q}") for q in range(3)),
                      Message("audit", b"a", 0), Message("audit", b"b", 0),
                      Message("half", b"h", 0, sys_flag=TRANSACTION_PREPARED)])
    return root


@pytest.fixture()
def run(store, capsys):
    def go(*argv: str) -> tuple[int, list[str], str]:
        head = [a for a in argv if not a.startswith("-")][:2 if argv[0] == "dump" else 1]
        rc = main([*head, "--store", str(store), *SMALL, *argv[len(head):]])
        out, err = capsys.readouterr()
        return rc, out.splitlines(), err
    return go


def test_an_unknown_topic_is_an_error_naming_the_topics(run, store):
    for argv in (["dump", "commitlog", "--topic", "nosuch"],
                 ["get", "--topic", "nosuch", "--queue", "0"],
                 ["query", "--topic", "nosuch", "--key", "k0"],
                 ["query", "--topic", "nosuch", "--queue", "0", "--time", "0"]):
        rc, out, err = run(*argv)
        # dump commitlog read the PREPARED record of "half", which no ConsumeQueue names
        have = "audit, half, orders" if argv[1] == "commitlog" else "audit, orders"
        assert (rc, out, err) == (2, [], f"rocketlake {argv[0]}: error: {store}: no topic "
                                         f"'nosuch': its topics are {have}\n"), argv
    rc, out, err = run("dump", "consumequeue", "--topic", "nosuch")
    assert (rc, out) == (2, []) and err.endswith("no topic 'nosuch': its topics are audit, orders\n")


def test_an_unknown_queue_is_an_error_naming_the_queues(run, store):
    for argv in (["dump", "consumequeue", "--topic", "orders", "--queue", "9"],
                 ["dump", "commitlog", "--topic", "orders", "--queue", "9"],
                 ["get", "--topic", "orders", "--queue", "9"],
                 ["query", "--topic", "orders", "--queue", "9", "--time", "0"]):
        rc, out, err = run(*argv)
        assert (rc, out, err) == (2, [], f"rocketlake {argv[0]}: error: {store}: topic 'orders' "
                                         f"has no queue 9: its queues are 0-2\n"), argv
    rc, out, err = run("dump", "consumequeue", "--queue", "9")
    assert (rc, out, err) == (2, [], f"rocketlake dump: error: {store}: no topic has a queue 9: "
                                     f"the queue ids are 0-2\n")


def test_known_topics_and_queues_still_read(run):
    rc, out, _ = run("dump", "commitlog", "--topic", "half")  # a topic with no ConsumeQueue
    assert rc == 0 and [json.loads(x)["topic"] for x in out] == ["half"]
    rc, out, _ = run("dump", "consumequeue", "--queue", "1")
    assert rc == 0 and [(json.loads(x)["topic"], json.loads(x)["queue_id"]) for x in out] == [("orders", 1)]
    rc, out, err = run("get", "--topic", "audit", "--queue", "0", "--offset", "2")
    assert (rc, json.loads(out[0])["status"]) == (0, "OFFSET_OVERFLOW_ONE") and "no message" in err
    rc, out, err = run("query", "--topic", "orders", "--key", "nope")
    assert (rc, out) == (0, []) and "no message with key 'nope'" in err


def test_an_empty_store_says_it_has_no_topics(tmp_path, capsys):
    root = tmp_path / "empty"
    MessageStore(root).close()
    assert main(["dump", "consumequeue", "--store", str(root), "--topic", "t"]) == 2
    assert capsys.readouterr().err == f"rocketlake dump: error: {root}: no topic 't': it has no topics\n"


def test_a_range_that_cannot_match_is_an_error(run):
    for argv in (["dump", "commitlog", "--begin", "2026-01-02T00:00:00Z", "--end", "2026-01-01T00:00:00Z"],
                 ["query", "--topic", "orders", "--key", "k0", "--begin", "2026-01-02T00:00:00Z",
                  "--end", "2026-01-01T00:00:00Z"]):
        rc, out, err = run(*argv)
        assert (rc, out, err) == (2, [], f"rocketlake {argv[0]}: error: --begin 2026-01-02T00:00:00.000Z "
                                         f"is after --end 2026-01-01T00:00:00.000Z: no store time is "
                                         f"in that range\n"), argv
    for what in ("commitlog", "consumequeue", "index"):
        rc, out, err = run("dump", what, "--from-offset", "5", "--to-offset", "5")
        assert (rc, out, err) == (2, [], "rocketlake dump: error: --to-offset 5 (exclusive) is not "
                                         "after --from-offset 5: no offset is in that range\n"), what
    rc, out, _ = run("dump", "consumequeue", "--from-offset", "1", "--to-offset", "2")
    assert rc == 0 and [json.loads(x)["topic"] for x in out] == ["audit"]  # only audit has offset 1


# --- dump --max and --tags, query --key cut -----------------------------------------------------
TAGS = ["TagA", "TagB", "TagC"]


@pytest.fixture()
def tagged(tmp_path: Path) -> tuple[Path, list[int]]:
    """9 messages in orders/0, tags TagA, TagB, TagC in turn; then 40 in logs/0 all with key
    "dup". Returns the store and the CommitLog offsets of all 49."""
    root = tmp_path / "t"
    with MessageStore(root, mappedFileSizeCommitLog=1 << 16, mappedFileSizeConsumeQueue=2000,
                      maxHashSlotNum=64, maxIndexNum=400) as ms:
        put = ms.put_batch([*(Message("orders", b"o", 0, tags=TAGS[i % 3]) for i in range(9)),
                            *(Message("logs", b"l", 0, keys="dup") for _ in range(40))])
    return root, [p.commitlog_offset for p in put]


def _dump(capsys, root: Path, *argv: str) -> tuple[int, list[dict], str]:
    rc = main(["dump", *argv[:1], "--store", str(root), *argv[1:]])
    out, err = capsys.readouterr()
    return rc, [json.loads(line) for line in out.splitlines()], err


def test_dump_max_counts_messages_and_says_when_more_match(tagged, capsys):
    root, offsets = tagged
    rc, rows, err = _dump(capsys, root, "commitlog", "--max", "3")
    assert (rc, [r["commitlog_offset"] for r in rows]) == (0, offsets[:3])
    assert err == "rocketlake dump: 3 records shown, more match; --max N shows more\n"
    rc, rows, err = _dump(capsys, root, "commitlog", "--topic", "orders", "--max", "9")
    assert (rc, [r["commitlog_offset"] for r in rows], err) == (0, offsets[:9], "")  # all 9: no note
    rc, rows, err = _dump(capsys, root, "consumequeue", "--topic", "logs", "--max", "2")
    assert (rc, [r["queue_offset"] for r in rows]) == (0, [0, 1])
    assert err == "rocketlake dump: 2 units shown, more match; --max N shows more\n"
    rc, rows, err = _dump(capsys, root, "index", "--max", "1")
    assert rc == 0 and ["position" in r for r in rows] == [False, True]  # the file's header, 1 entry
    assert err == "rocketlake dump: 1 index entries shown, more match; --max N shows more\n"


def test_dump_tags_takes_a_subscription_expression(tagged, capsys):
    root, offsets = tagged
    rc, rows, _ = _dump(capsys, root, "commitlog", "--tags", "TagA || TagC")
    assert (rc, [r["commitlog_offset"] for r in rows]) == (0, [offsets[i] for i in (0, 2, 3, 5, 6, 8)])
    rc, rows, _ = _dump(capsys, root, "consumequeue", "--tags", "TagB")
    assert (rc, [(r["topic"], r["queue_offset"]) for r in rows]) == (0, [("orders", i) for i in (1, 4, 7)])
    rc, rows, _ = _dump(capsys, root, "commitlog", "--tags", "*", "--topic", "orders")
    assert (rc, len(rows)) == (0, 9)
    rc, rows, err = _dump(capsys, root, "index", "--tags", "TagA")
    assert (rc, rows) == (2, []) and "--tags do not apply to dump index" in err


def test_query_key_says_how_many_it_left_out(tagged, capsys):
    root, offsets = tagged
    assert main(["query", "--store", str(root), "--topic", "logs", "--key", "dup"]) == 0
    out, err = capsys.readouterr()
    # the default --max is 32: the last 32 of the 40 stored, as RocketMQ's queryMessage keeps them
    assert [json.loads(x)["commitlog_offset"] for x in out.splitlines()] == offsets[9 + 8:]
    assert err == "rocketlake query: 32 of 40 shown (the last stored); --max N shows more\n"
    assert main(["query", "--store", str(root), "--topic", "logs", "--key", "dup", "--max", "40"]) == 0
    out, err = capsys.readouterr()
    assert (len(out.splitlines()), err) == (40, "")


# --- --format text: transactions, delayed copies, ISO times --------------------------------------
T0 = 1_700_000_000_000  # 2023-11-14T22:13:20.000Z


def test_text_shows_the_transaction_type_and_a_delayed_copys_real_topic(tmp_path, capsys):
    root = tmp_path / "x"
    with MessageStore(root) as ms:
        ms.put_batch([Message("pay", b"p", 0, sys_flag=TRANSACTION_PREPARED, born_timestamp=T0,
                              store_timestamp=T0),
                      Message("pay", b"c", 0, sys_flag=TRANSACTION_COMMIT, born_timestamp=T0,
                              store_timestamp=T0),
                      Message("orders", b"d", 3, delay_level=3, born_timestamp=T0, store_timestamp=T0)])
    assert main(["dump", "commitlog", "--store", str(root), "--format", "text"]) == 0
    lines = [line.split(" commitlog_offset=")[0] for line in capsys.readouterr().out.splitlines()]
    iso = "store=2023-11-14T22:13:20.000Z born=2023-11-14T22:13:20.000Z"
    assert lines == [
        f"{iso} topic=pay queue=0 queue_offset=- tx=PREPARED",  # a half message has no queue offset
        f"{iso} topic=pay queue=0 queue_offset=0 tx=COMMIT",
        # delay level 3 of RocketMQ's default messageDelayLevel "1s 5s 10s ...": queue 3 - 1 = 2
        f"{iso} topic=SCHEDULE_TOPIC_XXXX queue=2 queue_offset=0 real_topic=orders delay=10s real_queue=3"]
    # the store's own messageDelayLevel decides what level 3 is
    assert main(["dump", "commitlog", "--store", str(root), "--format", "text", "--topic",
                 "SCHEDULE_TOPIC_XXXX", "--set", "messageDelayLevel=1s 2s 2m"]) == 0
    assert " real_topic=orders delay=2m real_queue=3 " in capsys.readouterr().out


def test_query_time_prints_iso_times(tmp_path, capsys):
    root = tmp_path / "q"
    with MessageStore(root) as ms:
        ms.put_batch([Message("t", b"a", 0, store_timestamp=T0),
                      Message("t", b"b", 0, store_timestamp=T0 + 60_000)])
    base = ["query", "--store", str(root), "--topic", "t", "--queue", "0", "--time", "2023-11-14T22:14:10Z"]
    assert main([*base, "--format", "text"]) == 0
    # 22:14:10 is nearer the second message (22:14:20) than the first (22:13:20)
    assert capsys.readouterr().out == ("topic=t queue_id=0 time=2023-11-14T22:14:10.000Z queue_offset=1 "
                                       "store_time=2023-11-14T22:14:20.000Z\n")
    assert main(base) == 0
    assert json.loads(capsys.readouterr().out) == {
        "topic": "t", "queue_id": 0, "time": "2023-11-14T22:14:10.000Z", "timestamp": T0 + 50_000,
        "queue_offset": 1, "store_time": "2023-11-14T22:14:20.000Z", "store_timestamp": T0 + 60_000}
