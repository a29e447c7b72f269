"""A 5.x broker's compaction topics, read (docs/FORMAT.md §9.6).

A topic whose topics.json attributes say ``cleanup.policy=COMPACTION`` is served by a 5.x broker
(``enableCompaction``, on by default) from its compaction store, not from its ConsumeQueue: every
record of the topic is copied, as dispatched, into `compaction/compactionLog/<topic>/<queueId>/`
(CommitLog records, each at its own offset there), indexed by
`compaction/compactionCq/<topic>/<queueId>/` (BatchConsumeQueue units pointing into that log).
Every ``compactionScheduleInternal`` the broker rewrites both, keeping the newest record of each
key: the queue then has gaps, and records the CommitLog has long dropped stay served. rocketlake
reads the queues and logs as they are, read only. (rocketlake's own compaction job keeps its
segments as `compaction/<topic>` links, beside these: ``store.compaction``.)
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from rocketlake.store.batch_consume_queue import BatchConsumeQueue
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.config import StoreConfig, load_config
from rocketlake.store.errors import StoreFormatError
from rocketlake.store.topic_config import read_topic_configs

COMPACTION_POLICY = "COMPACTION"
#: the broker's compaction store (``CompactionStore``: compactionPath = <root>/compaction)
LOG_DIR = "compaction/compactionLog"
QUEUE_DIR = "compaction/compactionCq"


def is_compaction_topic(topic_config: Mapping[str, Any]) -> bool:
    """Whether a TopicConfig's attributes say ``cleanup.policy`` = COMPACTION ("+" prefixed, as
    mqadmin takes it, or not)."""
    attrs = topic_config.get("attributes") or {}
    return str(attrs.get("cleanup.policy") or attrs.get("+cleanup.policy")).upper() == COMPACTION_POLICY


def load_compaction_queues(root: Path, cfg: StoreConfig) -> dict[tuple[str, int], BatchConsumeQueue]:
    """The queues of every compaction topic the broker keeps a compaction log of, each with its
    log (``BatchConsumeQueue.log``) opened. StoreFormatError for a log whose files differ in size."""
    root = Path(root)
    out: dict[tuple[str, int], BatchConsumeQueue] = {}
    if not (root / QUEUE_DIR).is_dir():  # no compaction store: topics.json is not even read
        return out
    try:
        for topic, tc in sorted(read_topic_configs(root).items()):
            tdir = root / QUEUE_DIR / topic
            if not (is_compaction_topic(tc or {}) and tdir.is_dir()):
                continue
            for qdir in sorted(tdir.iterdir()):
                if not qdir.name.isdigit():
                    raise StoreFormatError(f"{qdir}: queue directory name is not a queue id")
                q = int(qdir.name)
                log_dir = root / LOG_DIR / topic / str(q)
                sizes = {f.stat().st_size for f in log_dir.iterdir()} if log_dir.is_dir() else set()
                if len(sizes) != 1:
                    raise StoreFormatError(f"{log_dir}: compaction log files of {len(sizes)} sizes "
                                           f"(one expected)")
                if sizes == {0}:
                    raise StoreFormatError(f"{log_dir}: compaction log files are 0 bytes: a broker "
                                           f"creates each at its full size, so they are damaged")
                bq = out[(topic, q)] = BatchConsumeQueue(root, topic, q, QUEUE_DIR)
                bq.log = CommitLog(root, load_config({"storePathCommitLog": str(log_dir),
                                                      "readOnlyCommitLogStorePaths": "",
                                                      "mappedFileSizeCommitLog": sizes.pop()}, base=cfg))
                bq.log.files.load()
    except BaseException:
        for bq in out.values():
            bq.close()
        raise
    return out
