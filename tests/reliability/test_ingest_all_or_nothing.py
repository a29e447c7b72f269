"""`rocketlake ingest` stores all rows or none: a full disk part way through and a kill -9 part way
through both leave the store's CommitLog, ConsumeQueue and index files byte for byte as they were
before the ingest; read-only opens never serve an unfinished ingest's records; a retry stores
every row once."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from store_helpers import kill_when_ready

from rocketlake.jobs.cli import ingest, main
from rocketlake.store import MessageStore
from rocketlake.store.ingest_journal import JOURNAL_NAME, PartialIngestDiscarded
from rocketlake.store.verify import verify

REPO = Path(__file__).resolve().parents[2]
SETTINGS = {"mappedFileSizeCommitLog": 256 << 10, "mappedFileSizeConsumeQueue": 20 * 1000,
            "maxHashSlotNum": 64, "maxIndexNum": 1000}
SET = [arg for k, v in SETTINGS.items() for arg in ("--set", f"{k}={v}")]
BEFORE = 50  # messages in the store before the ingest under test


def _store_bytes(root: Path) -> dict[str, str]:
    """sha256 of every CommitLog, ConsumeQueue and index file, by path under the store."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for part in ("commitlog", "consumequeue", "index")
            for p in sorted((root / part).rglob("*")) if p.is_file()}


def _messages(ms: MessageStore) -> list[tuple[str, int, int, bytes, tuple[str, ...]]]:
    """Every message each queue serves: (topic, queue, queue offset, body, keys)."""
    out = []
    for (topic, q), (lo, hi) in ms.queue_ranges().items():
        at = lo
        while at < hi:
            g = ms.get(topic, q, at, 32)
            out += [(topic, q, m.queue_offset, m.record.body, tuple(m.record.keys)) for m in g.messages]
            if g.next_begin_offset == at:
                break
            at = g.next_begin_offset
    return out


def _seed(root: Path, tmp_path: Path) -> None:
    """The store before the ingest under test: BEFORE keyed messages in topic "orders"."""
    src = tmp_path / "seed.jsonl"
    src.write_text("".join(json.dumps({"topic": "orders", "body": f"old-{i}", "keys": f"old{i}"}) + "\n"
                           for i in range(BEFORE)))
    assert main(["ingest", "--store", str(root), "--create", *SET, str(src)]) == 0


def _parquet(path: Path, rows: int, body_size: int) -> Path:
    """Rows in topic "orders" (an existing queue) and "fresh" (a queue the ingest creates), keyed."""
    pq.write_table(pa.table({
        "topic": ["orders" if i % 2 else "fresh" for i in range(rows)],
        "body": [f"{i:06d}".encode() * (body_size // 6) for i in range(rows)],
        "keys": [f"new{i}" for i in range(rows)]}), path)
    return path


def test_a_full_disk_part_way_through_stores_nothing(small_fs: Path, tmp_path: Path, capsys,
                                                     monkeypatch) -> None:
    root = small_fs / "store"
    _seed(root, tmp_path)
    capsys.readouterr()
    before = _store_bytes(root)
    with MessageStore(root, read_only=True) as ms:
        served = _messages(ms)
    assert len(served) == BEFORE
    # 4,000 rows of 1 KB: more than the 4 MiB file system holds; written 200 rows at a time, so
    # several chunks are stored before one needs a file the disk has no room for.
    src = _parquet(tmp_path / "big.parquet", 4000, 1020)
    monkeypatch.setattr(ingest, "PARQUET_ROWS", 200)
    assert main(["ingest", "--store", str(root), *SET, str(src)]) == 3
    err = capsys.readouterr().err
    assert "no space left on device" in err and "nothing stored" in err and str(root) in err, err
    assert _store_bytes(root) == before
    assert not (root / JOURNAL_NAME).exists()
    with MessageStore(root, read_only=True) as ms:
        assert _messages(ms) == served
        assert ms.query("orders", "old7") and not ms.query("fresh", "new0")
    with MessageStore(root, **SETTINGS) as ms:  # a writer opens on the still-full disk
        assert _messages(ms) == served


# Runs `rocketlake ingest` with 100 rows per put; after the third put it says PARTIAL and waits
# to be killed.
INGEST_THEN_WAIT = r"""
import sys, time
from rocketlake.jobs.cli import ingest
from rocketlake.jobs.cli import main
from rocketlake.store import MessageStore
ingest.PARQUET_ROWS = 100
put_encoded, calls = MessageStore.put_encoded, []
def counted(self, table):
    r = put_encoded(self, table)
    calls.append(len(r))
    if len(calls) == 3:
        print("PARTIAL", flush=True)
        time.sleep(600)
    return r
MessageStore.put_encoded = counted
sys.exit(main(sys.argv[1:]))
"""


def test_kill9_part_way_through_is_rolled_back_and_a_retry_stores_every_row_once(
        tmp_path: Path, capsys) -> None:
    root = tmp_path / "store"
    _seed(root, tmp_path)
    capsys.readouterr()
    before = _store_bytes(root)
    with MessageStore(root, read_only=True) as ms:
        served, end, queues = _messages(ms), ms.commitlog.max_offset, set(ms.queue_ranges())
    assert ("fresh", 0) not in queues
    src = _parquet(tmp_path / "rows.parquet", 1000, 100)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    kill_when_ready([INGEST_THEN_WAIT, "ingest", "--store", str(root), *SET, str(src)], "PARTIAL",
                    env)
    assert (root / JOURNAL_NAME).exists()
    pending = [p for p in verify(root, **SETTINGS).problems if p.kind == "ingest-pending"]
    assert [(p.severity, p.file, p.offset) for p in pending] == [("warning", JOURNAL_NAME, end)]
    assert "its 300 records" in pending[0].what
    with MessageStore(root, read_only=True) as ms:  # the 300 rows written are not served
        assert _messages(ms) == served
        assert set(ms.queue_ranges()) == queues and ms.commitlog.max_offset == end
        assert not ms.query("orders", "new1")
    with pytest.warns(PartialIngestDiscarded, match=r"partial ingest of 300 records"):
        ms = MessageStore(root, **SETTINGS)
    with ms:
        assert _messages(ms) == served
        assert ms.discarded_ingest is not None and ms.discarded_ingest.start == end
        assert ms.commitlog.max_offset == end
    assert _store_bytes(root) == before
    assert not (root / JOURNAL_NAME).exists()

    assert main(["ingest", "--store", str(root), *SET, str(src)]) == 0
    assert json.loads(capsys.readouterr().out)["messages"] == 1000
    with MessageStore(root, read_only=True) as ms:
        after = _messages(ms)
    new = [m for m in after if m not in served]
    assert len(after) == BEFORE + 1000 and len(new) == 1000
    assert sorted(int(body[:6]) for _, _, _, body, _ in new) == list(range(1000))
