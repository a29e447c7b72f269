"""Kill -9 while retention deletes CommitLog files: the store reopens and keeps every retained
acknowledged message.

A SYNC_FLUSH writer (``durability_writer.py ... retention``) on 64 KiB CommitLog files deletes
every file but the last every 50 ms while it writes, and is SIGKILLed at varied moments after
retention first deleted a file. Abnormal recovery then meets ConsumeQueue units and index
entries whose records retention removed; it must never read them, and every acknowledged message
at or above the reopened CommitLog minimum must read back through ``read``, ``get`` and ``query``.
"""
from __future__ import annotations

import random
from pathlib import Path

from durability_check import SETTINGS, message_for
from writer_kills import run_and_kill

from rocketlake.store import GetStatus, MessageStore


def test_kill_after_retention_reopens_with_every_retained_message(tmp_path: Path) -> None:
    rng = random.Random("kill-after-retention")
    root = tmp_path / "store"
    acked: dict[str, tuple[int, int]] = {}
    checked = 0
    for rnd, delay in enumerate((0.3, 0.6, 1.0, 1.5, 0.8, 2.0)):
        for key, off, qoff in run_and_kill(root, "SYNC_FLUSH", rnd, 2, rng, True, "retention",
                                           delay=(delay, delay + 0.2), ready_line="DELETED"):
            acked[key] = (off, qoff)
        assert (root / "abort").exists()
        with MessageStore(root, **SETTINGS) as ms:
            low = ms.commitlog.min_offset
            assert low > 0, "retention deleted nothing: the test exercises nothing"
            retained = {k: v for k, v in acked.items() if v[0] >= low}
            for key, (off, qoff) in retained.items():
                topic, qid, tags, body = message_for(key)
                rec = ms.read(off)
                assert (rec.keys, rec.body, rec.topic, rec.queue_id) == ([key], body, topic, qid)
                got = ms.get(topic, qid, qoff, 1)
                assert got.status == GetStatus.FOUND, (key, got.status)
                assert got.messages[0].record.commitlog_offset == off, key
                assert off in [r.commitlog_offset for r in ms.query(topic, key)], key
            checked += len(retained)
    assert checked > 100
