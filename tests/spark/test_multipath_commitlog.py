"""A CommitLog over several directories (a broker's ``storePathCommitLog`` with ``,``, and
``readOnlyCommitLogStorePaths``) read by the Spark side: the ``rocketmq`` source (batch, its
ConsumeQueue path, the stream) row for row against the library's read, and the rebuild, byte for
byte against the rebuild of the same records in one directory."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.sql.datasource import CaseInsensitiveDict
from pyspark.sql.streaming.datasource import ReadAllAvailable

from rocketlake.jobs import job_support
from rocketlake.jobs.rebuild import rebuild
from rocketlake.store import Message, MessageStore, codec, dispatch
from rocketlake.store.config import load_config
from rocketlake.transforms import RocketMQDataSource

from .helpers import SMALL, library_messages, tree_bytes

COLUMNS = "commitlog_offset,topic,queue_id,queue_offset,body"


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> tuple[Path, Path, str]:
    """(a store in one directory, the same files spread as a broker with
    ``storePathCommitLog=<root>/commitlog,<root>/commitlog2`` places them: file i in the i % 2-th
    directory, that setting's value). The library's messages (every dispatch case) and 600 KiB
    of ``filler``, so ``audit-log`` is under the source's ConsumeQueue-path share."""
    base = tmp_path_factory.mktemp("multipath")
    single = base / "single"
    with MessageStore(single, **SMALL) as ms:
        ms.put_batch(library_messages())
        ms.put_batch([Message(topic="filler", body=b"f" * 1000, queue_id=i % 2) for i in range(600)])
    multi = base / "multi"
    shutil.copytree(single, multi)
    (multi / "commitlog2").mkdir()
    files = sorted((multi / "commitlog").iterdir())
    assert len(files) >= 10
    for f in files[1::2]:
        f.rename(multi / "commitlog2" / f.name)
    return single, multi, f"{multi / 'commitlog'},{multi / 'commitlog2'}"


def library_rows(root: Path, **settings: str) -> list[tuple]:
    """Every record by the library's own walk of the store."""
    with MessageStore(root, read_only=True, **settings) as ms:
        return [(r.commitlog_offset, r.topic, r.queue_id, r.queue_offset, r.body)
                for r in ms.commitlog.walk_records(check_crc=True)]


def source_rows(frame) -> list[tuple]:
    return sorted((r.commitlog_offset, r.topic, r.queue_id, r.queue_offset, bytes(r.body))
                  for r in frame.collect())


def test_the_source_reads_every_directory_as_the_library_does(spark, stores) -> None:
    single, multi, paths = stores
    expected = library_rows(multi, storePathCommitLog=paths)
    assert expected == library_rows(single) and len(expected) == 1020
    read = spark.read.format("rocketmq").option("columns", COLUMNS)
    assert source_rows(read.option("storePathCommitLog", paths).load(str(multi))) == expected
    # the second directory as a read-only path reads the same (the broker setting's name)
    assert source_rows(read.option("readOnlyCommitLogStorePaths", str(multi / "commitlog2"))
                       .load(str(multi))) == expected


def test_the_consume_queue_path_finds_records_in_every_directory(stores) -> None:
    """A consumable read of a small topic goes through its ConsumeQueues and reads each record
    in whichever directory holds its file (driver and task in process: no query needed)."""
    _, multi, paths = stores
    opts = CaseInsensitiveDict({"path": str(multi), "storePathCommitLog": paths, "columns": COLUMNS,
                                "consumable": "true", "topics": "audit-log"})
    source = RocketMQDataSource(opts)
    reader = source.reader(source.schema())
    parts = reader.partitions()
    assert parts and all(isinstance(p.value, tuple) for p in parts)  # the ConsumeQueue path only
    got = sorted(row for p in parts for b in reader.read(p) for row in zip(
        *(b.column(c).to_pylist() for c in COLUMNS.split(",")), strict=True))
    served = [r for r in library_rows(multi, storePathCommitLog=paths) if r[1] == "audit-log"]
    with MessageStore(multi, read_only=True, storePathCommitLog=paths) as ms:
        served = [r for r in served if dispatch.goes_to_consume_queue(
            ms.read(r[0]).sys_flag & codec.TRANSACTION_MASK)]
    assert got == served and len(served) > 100


def test_the_stream_reads_every_directory(stores) -> None:
    _, multi, paths = stores
    opts = CaseInsensitiveDict({"path": str(multi), "storePathCommitLog": paths, "columns": COLUMNS})
    source = RocketMQDataSource(opts)
    stream = source.streamReader(source.schema())
    start = {"store": str(multi.resolve()), "commitlogOffset": 0}
    end = stream.latestOffset(start, ReadAllAvailable())
    got = sorted(row for p in stream.partitions(start, end) for b in stream.read(p) for row in zip(
        *(b.column(c).to_pylist() for c in COLUMNS.split(",")), strict=True))
    assert got == library_rows(multi, storePathCommitLog=paths)


def test_the_rebuild_writes_what_it_writes_from_one_directory(spark, stores, tmp_path: Path) -> None:
    single, multi, paths = stores
    one, two = tmp_path / "one", tmp_path / "two"
    rebuild(spark, single, load_config(SMALL), output=one, split_bytes=20000)
    done = rebuild(spark, multi, load_config({**SMALL, "storePathCommitLog": paths}), output=two,
                   split_bytes=20000)
    assert done.end is not None and done.end.records == 1020
    for name in ("consumequeue", "index"):
        assert tree_bytes(two / name) == tree_bytes(one / name)
        assert tree_bytes(two / name) == tree_bytes(single / name)  # the writer's own files


def test_jobs_hand_the_source_the_commitlog_settings() -> None:
    cfg = load_config({**SMALL, "storePathCommitLog": "a,b", "readOnlyCommitLogStorePaths": "c"})
    assert job_support.source_options(cfg) == {
        "mappedFileSizeCommitLog": "65536", "messageDelayLevel": cfg.messageDelayLevel,
        "storePathCommitLog": "a,b", "readOnlyCommitLogStorePaths": "c"}
    assert "storePathCommitLog" not in job_support.source_options(load_config(SMALL))
