"""The unconsumed-data guard keeps every file holding a message some group has not read."""
from __future__ import annotations

from rocketlake.store import Message, MessageStore
from rocketlake.store.config_files import read_consumer_offsets
from rocketlake.store.consume_queue import load_queues
from rocketlake.store.consumer_guard import Hold, guard, holds


def test_holds_point_at_the_first_unread_message(tmp_path):
    root = tmp_path / "s"
    with MessageStore(root, mappedFileSizeCommitLog=1000) as ms:
        rs = ms.put_batch([Message("t", b"x" * 100, i % 2) for i in range(20)])  # ~192 B each
        ms.commit_offsets("g1", "t", {0: 3, 1: 10})   # queue 1 fully read
        ms.commit_offsets("g2", "t", {0: 9})
    # read back from the closed store's files, as the compaction job does
    queues = load_queues(root, ms.config.mappedFileSizeConsumeQueue)
    try:
        found = holds(queues, read_consumer_offsets(root))
    finally:
        for cq in queues.values():
            cq.close()
    q0 = [r for r in rs if r.queue_id == 0]
    assert found == [Hold("g1", "t", 0, 3, q0[3].commitlog_offset),
                     Hold("g2", "t", 0, 9, q0[9].commitlog_offset)]


def test_guard_keeps_the_file_with_the_first_hold_and_everything_after():
    h = Hold("g", "t", 0, 7, 2500)
    delete, kept = guard(["00000000000000000000", "00000000000000001000", "00000000000000002000"],
                         1000, [h])
    assert delete == ["00000000000000000000", "00000000000000001000"]
    assert kept == {"00000000000000002000": h}
    assert guard(["00000000000000000000"], 1000, []) == (["00000000000000000000"], {})
    # a hold in the very first file keeps all candidates
    assert guard(["00000000000000000000", "00000000000000001000"], 1000, [Hold("g", "t", 0, 0, 10)])[0] == []
