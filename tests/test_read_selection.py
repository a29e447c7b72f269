"""What `dump`, `get` and `query` select must be able to match: an unknown topic or queue, or a
range that cannot match, is an error (exit 2) naming what the store has, never a silent empty
answer. The stores are built here: the topics, queues and counts are the ones written."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketlake.jobs.cli import main
from rocketlake.store import TRANSACTION_PREPARED, Message, MessageStore

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
