"""Single-process rebuild of ConsumeQueues and index files from a CommitLog (the library's own).

The Spark jobs in `jobs/` produce the same bytes in parallel; this is the reference they are
checked and benchmarked against.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocketlake.store.config import StoreConfig, load_config
from rocketlake.store.consume_queue import QueueFilesWriter
from rocketlake.store.dispatch import Dispatcher
from rocketlake.store.index import IndexService
from rocketlake.store.safe_files import bulk_output
from rocketlake.store.store_dir import check_store
from rocketlake.store.store_files import StoreFiles
from rocketlake.store.topic_config import declare_topics, queue_counts

#: threads writing the ConsumeQueue files (``QueueFilesWriter``): most of a rebuild of many small
#: queues is the kernel making their directories and files, which two cores share
WRITE_THREADS = 2


@dataclass
class RebuildStats:
    records: int
    commitlog_end: int
    stop_reason: str | None


def rebuild(store: Path, out: Path, consume_queue: bool = True, index: bool = True,
            config: StoreConfig | None = None, **overrides: Any) -> RebuildStats:
    """Scan ``store``'s CommitLog and write fresh `consumequeue/` and/or `index/` under ``out``
    (settings: ``config``, then ``overrides``); the topics of the ConsumeQueues written are
    declared in ``out``'s `config/topics.json` (``store.topic_config``), so a broker serves them.

    ``store`` must be a store (``store_dir.check_store``: NotAStoreError, nothing written);
    ``out`` must not already hold those directories (write aside, then swap). What it writes
    is durable when it returns, made so at once at the end (``safe_files.bulk_output``).
    """
    cfg = load_config(overrides, base=config)
    store, out = check_store(store), Path(out)
    for name, wanted in (("consumequeue", consume_queue), ("index", index)):
        if wanted and (out / name).exists() and any((out / name).iterdir()):
            raise FileExistsError(f"{out / name}: already exists; rebuild writes into an empty place")
    with StoreFiles(store, cfg) as files, bulk_output(out):
        walk = files.commitlog.walk(check_crc=True)
        idx = IndexService(out, cfg.maxHashSlotNum, cfg.maxIndexNum, cfg.index_zone) if index else None
        queues = QueueFilesWriter(out, cfg.mappedFileSizeConsumeQueue, threads=WRITE_THREADS)
        d = Dispatcher(out, cfg, {}, idx, queues)
        n = 0
        try:
            for batch in walk:
                d.add_batch(batch, batch.dispatch(cfg.delay_levels_ms), consume_queue)
                n += len(batch)
            d.flush()
        finally:
            d.close()
        declare_topics(out, queue_counts(queues.ends))
    return RebuildStats(n, walk.end, walk.error)
