"""Maintenance runs told in words (jobs.cli.run_words), from summaries shaped as the jobs write them."""
from __future__ import annotations

import json

from rocketlake.jobs.cli.run_words import describe_run

START = 1_795_392_000_000  # 2026-11-23 00:00:00 UTC


def _run(job, summary, status="ok", started=START + 4 * 3_600_000, seconds=12.5):
    return {"job": job, "status": status, "started_ms": started,
            "finished_ms": started + int(seconds * 1000), "summary": json.dumps(summary)}


def test_a_compact_run_in_words():
    summary = {"plan": {"reason": "scheduled", "delete": ["00000000000000000000", "00000000001073741824"],
                        "kept": {"00000000002147483648": "the last file"}, "live_writer": False},
               "archived": {"00000000000000000000": 1000, "00000000001073741824": 234},
               "deleted": {"commitlog_min_offset": 2147483648,
                           "consume_queue_files": ["orders/0/00000000000000000000"], "index_files": []},
               "compacted": {"user-state": {"kept": 17, "source_end": 5, "translated_offsets": 0}}}
    assert describe_run(_run("compact", summary)) == (
        "compact at 2026-11-23T04:00:00.000Z: archived 2 files (1,234 messages), deleted 2 files "
        "(CommitLog now from offset 2,147,483,648; 1 ConsumeQueue file, 0 index files with them), "
        "compacted user-state: 17 keys kept (took 12.5 s)")


def test_a_compact_run_that_deleted_nothing_says_why():
    waiting = {"plan": {"reason": None, "delete": [], "kept": {"a": "expired"}}, "compacted": {}}
    assert describe_run(_run("compact", waiting)).endswith(
        ": deleted no CommitLog file (waiting for a deleteWhen hour or disk use) (took 12.5 s)")
    fresh = {"plan": {"reason": "scheduled", "delete": [], "kept": {"a": "not expired"}}, "compacted": {}}
    assert "deleted no CommitLog file (none expired)" in describe_run(_run("compact", fresh))
    dry = {"plan": {"reason": "scheduled", "delete": ["a"], "kept": {}}, "compact_topics": []}
    assert ": would delete 1 file, would compact no topic " in describe_run(_run("compact", dry))


def test_publish_offsets_and_unknown_jobs_in_words():
    pub = _run("publish-offsets", {"snapshot": "2026-11-23T04:00:00+00:00", "queues": 8,
                                   "consumer_rows": 1}, status="unchanged", seconds=3)
    # a run of an older release wrote "+00:00": the sentence shows every time in one format
    assert describe_run(pub) == ("publish-offsets at 2026-11-23T04:00:00.000Z [unchanged]: snapshot "
                                 "2026-11-23T04:00:00.000Z: 8 queues, 1 consumer row (took 3.0 s)")
    unknown = _run("rebalance", {"units": 12345, "queues": 3, "mode": "full", "files": ["a"]},
                   status="failed")
    assert describe_run(unknown) == ("rebalance at 2026-11-23T04:00:00.000Z [failed]: mode full, "
                                     "queues 3, units 12,345 (took 12.5 s)")
    assert describe_run({**unknown, "summary": "not json"}).startswith(
        "rebalance at 2026-11-23T04:00:00.000Z [failed]: summary not json")


def test_rebuild_and_verify_runs_in_words():
    rebuild = _run("rebuild-index", {"mode": "incremental", "target": "var/store/index",
                                     "wrote": {"noun": "keys", "per_topic": {"a": 2, "b": 1}}})
    assert describe_run(rebuild) == ("rebuild-index at 2026-11-23T04:00:00.000Z: incremental rebuild wrote "
                                     "3 keys for 2 topics under var/store/index (took 12.5 s)")
    check = _run("check-consistency", {"records": 400, "errors": 2, "rebuild": ["index"]},
                 status="ok")
    assert describe_run(check) == ("check-consistency at 2026-11-23T04:00:00.000Z: checked 400 records, "
                                   "2 errors, to rebuild: index (took 12.5 s)")
    sound = _run("check-consistency", {"records": 1, "errors": 0, "rebuild": []})
    assert ": checked 1 record, 0 errors, nothing to rebuild " in describe_run(sound)


def test_a_one_scan_rebuild_run_in_words():
    """``jobs/rebuild.py`` records one run per structure under the job name ``rebuild``."""
    units = _run("rebuild", {"mode": "full", "target": "var/store/consumequeue",
                             "wrote": {"noun": "units", "per_topic": {"orders": 10, "audit": 1}}})
    assert describe_run(units) == ("rebuild at 2026-11-23T04:00:00.000Z: full rebuild wrote 11 units "
                                   "for 2 topics under var/store/consumequeue (took 12.5 s)")
    keys = _run("rebuild", {"mode": "output", "target": "var/rebuilt/index",
                            "wrote": {"noun": "index keys", "per_topic": {"orders": 1}}})
    assert describe_run(keys) == ("rebuild at 2026-11-23T04:00:00.000Z: output rebuild wrote 1 index key "
                                  "for 1 topic under var/rebuilt/index (took 12.5 s)")


def test_an_archive_run_in_words():
    summary = {"store": "main", "checkpoint": "file:///lake/_checkpoints/archive/main", "batches": 3,
               "rows": 1234, "offset": {"store": "/data/store", "commitlogOffset": 65536}}
    assert describe_run(_run("archive", summary)).startswith(
        "archive at 2026-11-23T04:00:00.000Z: archived 1,234 records in 3 batches, up to CommitLog "
        "offset 65,536 (took")
