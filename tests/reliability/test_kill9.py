"""Kill -9: a writer process is SIGKILLed at random moments, over several rounds on one store.

After every kill the store is reopened (abnormal recovery) and every acknowledged message must
read back intact through ``get``, ``read`` and ``query``, while the ConsumeQueues and the index
must agree with an independent decode of the CommitLog (``durability_check.check_store``).
With ASYNC_FLUSH nothing acknowledged may be lost either: a killed process leaves the page cache.
"""
from __future__ import annotations

import random
from pathlib import Path

import pytest
from durability_check import SETTINGS, check_store, message_for
from writer_kills import run_and_kill

from rocketlake.store import GetStatus, MessageStore


def verify(root: Path, acked: dict[str, tuple[int, int]], new: list[str]) -> None:
    """Reopen; read the ``new`` acknowledged messages back through the store's API, then check
    the files agree and still hold every message acknowledged so far."""
    with MessageStore(root, **SETTINGS) as ms:
        for key in new:
            off, qoff = acked[key]
            topic, qid, tags, body = message_for(key)
            rec = ms.read(off)
            assert (rec.keys, rec.body, rec.topic, rec.queue_id) == ([key], body, topic, qid)
            got = ms.get(topic, qid, qoff, 1)
            assert got.status == GetStatus.FOUND, (key, got.status)
            assert got.messages[0].record.commitlog_offset == off
            assert off in [r.commitlog_offset for r in ms.query(topic, key)], key
    by_key = check_store(root)  # closed cleanly: the files alone must agree
    for key, (off, qoff) in acked.items():
        assert (by_key[key].commitlog_offset, by_key[key].queue_offset) == (off, qoff), key


@pytest.mark.parametrize("mode", ["SYNC_FLUSH", "ASYNC_FLUSH"])
def test_sigkill_loses_nothing_acknowledged(tmp_path: Path, mode: str) -> None:
    rng = random.Random(f"kill9-{mode}")
    root = tmp_path / "store"
    acked: dict[str, tuple[int, int]] = {}
    rounds = 8 if mode == "SYNC_FLUSH" else 5
    kills_after_writes = 0
    new: list[str] = []
    rnd = 0
    # a loaded machine acknowledges fewer messages before each kill: more rounds (at most 8)
    # until over 100 were, so that the check is never of a handful
    while rnd < rounds or (len(acked) <= 100 and rnd < rounds + 8):
        threads = (1, 4, 16)[rnd % 3] if mode == "SYNC_FLUSH" else 2
        acks = run_and_kill(root, mode, rnd, threads, rng, wait_ready=rnd % 4 != 3)
        kills_after_writes += bool(acks)
        for key, off, qoff in acks:
            acked[key] = (off, qoff)
            new.append(key)
        # Every other round the next writer recovers the killed store itself; the check after the
        # following round then covers two crashes in a row.
        rnd += 1
        if rnd % 2 == 0:
            assert (root / "abort").exists()
            verify(root, acked, new)
            new = []
    if rnd % 2:  # the last kill's store, recovered by the check's open
        assert (root / "abort").exists()
        verify(root, acked, new)
    assert kills_after_writes >= rounds // 2
    assert len(acked) > 100
    print(f"{mode}: {rnd} kills, {len(acked)} acknowledged messages, all intact")
