"""Paths built from names (topics, queue ids) never leave the store: the topic rule, the
ConsumeQueue and compaction segment paths, CommitLog records with a hostile topic, links out.

Every test puts a victim file and directory next to the store and checks, after the attack,
that nothing outside the store was created, modified or deleted.
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from store_helpers import outside, record_bytes, retopic

from rocketlake.store import Message, MessageRejected, MessageStore, codec
from rocketlake.store.compaction import KeptRecord, compaction_topics, segment_path, write_segment
from rocketlake.store.config_files import write_config
from rocketlake.store.consume_queue import ConsumeQueue, load_queues
from rocketlake.store.errors import UnsafePathError
from rocketlake.store.paths import queue_dir, resolve_inside
from rocketlake.store.single_process_rebuild import rebuild

SMALL = dict(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=200)
HOSTILE = ["../../victim", "..", ".", "a/b", "abc\n", "\nabc", "", "x" * 128, "中文", "a\x00b"]


@pytest.fixture()
def victims(tmp_path: Path) -> dict[str, bytes | str]:
    """A victim file and a victim directory (with a file) next to where the tests put stores."""
    (tmp_path / "victim").write_bytes(b"precious")
    (tmp_path / "victim_dir").mkdir()
    (tmp_path / "victim_dir" / "keep").write_bytes(b"also precious")
    return outside(tmp_path, tmp_path / "s")


# --- the topic rule ---------------------------------------------------------------------------
@pytest.mark.parametrize("topic", HOSTILE)
def test_topic_rule_is_a_full_match(topic: str) -> None:
    assert not codec.is_topic(topic)
    assert codec.TOPIC_PATTERN.match(topic) is None  # callers that use .match get the whole rule
    with pytest.raises(ValueError, match="topic"):
        codec.check_topic(topic)


def test_topic_rule_accepts_rocketmq_names_up_to_127_bytes() -> None:
    for t in ["orders", "%RETRY%group", "a|b", "A-b_9", "x" * 127]:
        assert codec.is_topic(t) and codec.check_topic(t) == t.encode()


def test_put_refuses_a_topic_with_a_trailing_newline(tmp_path: Path) -> None:
    with MessageStore(tmp_path / "s", **SMALL) as ms:
        with pytest.raises(MessageRejected, match="topic"):
            ms.put(Message("abc\n", b"x"))
    assert not (tmp_path / "s" / "consumequeue").exists() or \
        list((tmp_path / "s" / "consumequeue").iterdir()) == []


# --- ConsumeQueue paths -----------------------------------------------------------------------
@pytest.mark.parametrize("topic, queue_id", [*[(t, 0) for t in HOSTILE], ("orders", -1)])
def test_queue_dir_refuses_bad_names(tmp_path: Path, victims, topic: str, queue_id: int) -> None:
    store = tmp_path / "s"
    with pytest.raises(UnsafePathError, match=str(store / "consumequeue")):
        queue_dir(store, topic, queue_id)
    with pytest.raises(UnsafePathError):
        ConsumeQueue(store, topic, queue_id, 200)
    assert outside(tmp_path, store) == victims and not store.exists()


def test_queue_dir_is_inside_the_store(tmp_path: Path) -> None:
    assert queue_dir(tmp_path, "orders", 3) == tmp_path / "consumequeue" / "orders" / "3"
    assert queue_dir(tmp_path, "t", 0, ".cq.new") == tmp_path / ".cq.new" / "t" / "0"


def test_resolve_inside_follows_links(tmp_path: Path) -> None:
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "in").symlink_to(tmp_path / "s")
    (tmp_path / "s" / "out").symlink_to(tmp_path)
    assert resolve_inside(tmp_path / "s", tmp_path / "s" / "in" / "x") == tmp_path / "s" / "in" / "x"
    with pytest.raises(UnsafePathError, match="outside"):
        resolve_inside(tmp_path / "s", tmp_path / "s" / "out" / "x")


def test_topic_directory_linked_out_of_the_store_is_refused(tmp_path: Path, victims) -> None:
    store = tmp_path / "s"
    with MessageStore(store, **SMALL) as ms:
        ms.put(Message("orders", b"x"))
    (store / "consumequeue" / "evil").symlink_to(tmp_path / "victim_dir")
    (tmp_path / "victim_dir" / "0").mkdir()
    victims = outside(tmp_path, store)
    with pytest.raises(UnsafePathError, match="outside"):
        load_queues(store, SMALL["mappedFileSizeConsumeQueue"])
    with pytest.raises(UnsafePathError, match="outside"):
        MessageStore(store, **SMALL)
    assert outside(tmp_path, store) == victims


def test_queue_directory_linked_out_of_the_store_is_refused(tmp_path: Path, victims) -> None:
    """Loading resolves each topic directory once; a queue directory inside one that stays in the
    store is still resolved itself when it is a link, and refused when that leads out (one
    linked back inside is a queue like any other)."""
    store = tmp_path / "s"
    with MessageStore(store, **SMALL) as ms:
        ms.put(Message("orders", b"x"))
    topic = store / "consumequeue" / "orders"
    (topic / "1").symlink_to(topic / "0")  # inside: a queue
    assert sorted(load_queues(store, SMALL["mappedFileSizeConsumeQueue"])) == [("orders", 0), ("orders", 1)]
    (topic / "2").symlink_to(tmp_path / "victim_dir")
    victims = outside(tmp_path, store)
    with pytest.raises(UnsafePathError, match=f"{topic / '2'}: resolves to .*victim_dir, outside"):
        load_queues(store, SMALL["mappedFileSizeConsumeQueue"])
    with pytest.raises(UnsafePathError, match="outside"):
        MessageStore(store, read_only=True)
    assert outside(tmp_path, store) == victims


def test_library_rebuild_refuses_a_record_with_a_hostile_topic(tmp_path: Path, victims) -> None:
    store = tmp_path / "s"
    with MessageStore(store, **SMALL) as ms:
        ms.put_batch([Message("orders", b"a"), Message("HOSTILE___", b"b"), Message("orders", b"c")])
    assert retopic(store, "HOSTILE___", "../../../x") == 1
    victims = outside(tmp_path, store)
    with pytest.raises(UnsafePathError, match=r"'\.\./\.\./\.\./x'"):
        rebuild(store, store / "out", **SMALL)
    assert outside(tmp_path, store) == victims



def test_library_rebuild_refuses_a_record_with_a_negative_queue_id(tmp_path: Path, victims) -> None:
    """QUEUEID is a signed int the body CRC does not cover: -1 (0xFFFFFFFF) is refused as a path
    name, not taken apart wrongly from the queue's 64-bit key (``codec.queue_of_key``)."""
    store = tmp_path / "s"
    with MessageStore(store, **SMALL) as ms:
        at = ms.put_batch([Message("orders", b"a"), Message("orders", b"b", 1),
                           Message("orders", b"c")])[1].commitlog_offset
    (log,) = (store / "commitlog").iterdir()
    data = bytearray(log.read_bytes())
    data[at + 12:at + 16] = b"\xff\xff\xff\xff"  # QUEUEID (docs/FORMAT.md §2) = -1
    log.write_bytes(bytes(data))
    victims = outside(tmp_path, store)
    with pytest.raises(UnsafePathError, match=r"orders: queue id -1 is not an integer >= 0"):
        rebuild(store, store / "out", **SMALL)
    assert outside(tmp_path, store) == victims

# --- compaction segments ------------------------------------------------------------------------
def _one_record(root: Path, topic: str = "state") -> bytes:
    with MessageStore(root, **SMALL) as ms:
        return record_bytes(ms, ms.put(Message(topic, b"v1", keys="k")).commitlog_offset)


@pytest.mark.parametrize("topic", ["../../victim", "../../victim_dir", "abc\n"])
def test_segment_of_a_hostile_topic_is_refused(tmp_path: Path, victims, topic: str) -> None:
    store = tmp_path / "s"
    raw = _one_record(store)
    before = outside(tmp_path, store)
    with pytest.raises(UnsafePathError, match="topic"):
        write_segment(store, topic, [KeptRecord(0, 0, raw)], 100, **SMALL)
    with pytest.raises(UnsafePathError, match="topic"):
        compaction_topics(store, [topic])
    assert outside(tmp_path, store) == before == victims


def test_topics_json_with_a_hostile_name_is_refused(tmp_path: Path, victims) -> None:
    store = tmp_path / "s"
    _one_record(store)
    write_config(store / "config" / "topics.json", {"topicConfigTable": {
        "../../victim_dir": {"attributes": {"+cleanup.policy": "COMPACTION"}}}})
    with pytest.raises(UnsafePathError, match=str(store / "config" / "topics.json")):
        compaction_topics(store)


def test_segment_link_pointing_out_of_the_store_is_refused(tmp_path: Path, victims) -> None:
    store = tmp_path / "s"
    raw = _one_record(store)
    (store / "compaction").mkdir()
    (store / "compaction" / "state").symlink_to(tmp_path / "victim_dir")
    (store / "compaction" / "other").symlink_to(".state.7")  # inside, but not the topic's segment
    victims = outside(tmp_path, store)
    with pytest.raises(UnsafePathError, match="outside"):
        write_segment(store, "state", [KeptRecord(0, 0, raw)], 100, **SMALL)
    with pytest.raises(UnsafePathError, match="not a segment directory of topic other"):
        write_segment(store, "other", [KeptRecord(0, 0, raw)], 100, **SMALL)
    assert outside(tmp_path, store) == victims
    assert os.readlink(store / "compaction" / "state") == str(tmp_path / "victim_dir")


def test_orphan_segments_of_a_killed_run_are_removed_and_nothing_else(tmp_path: Path, victims) -> None:
    store = tmp_path / "s"
    raw = _one_record(store)
    base = store / "compaction"
    write_segment(store, "state", [KeptRecord(0, 0, raw)], 100, **SMALL)
    assert os.readlink(base / "state") == ".state.1"
    (base / ".state.2" / "commitlog").mkdir(parents=True)  # a run killed mid-write_segment
    (base / ".state.3").symlink_to(tmp_path / "victim_dir")  # not a directory compaction made
    (base / ".other.5").mkdir()  # another topic's
    (base / ".state.x").mkdir()  # not a segment name
    victims = outside(tmp_path, store)
    write_segment(store, "state", [KeptRecord(0, 0, raw)], 200, **SMALL)
    assert os.readlink(base / "state") == ".state.4"
    assert sorted(p.name for p in base.iterdir()) == [".other.5", ".state.3", ".state.4", ".state.x",
                                                      "state"]
    assert outside(tmp_path, store) == victims
    assert segment_path(store, "state").resolve() == (base / ".state.4").resolve()
