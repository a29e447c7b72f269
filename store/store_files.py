"""A read-only handle on a store's files: its CommitLog, ConsumeQueues and index files, mapped as
they are on disk, without recovery and without the writer's lock.

For the readers outside ``MessageStore`` (fsck, the rebuilds, the Spark jobs' driver and
executor code): one place that knows how the three parts are opened and closed.

    with StoreFiles(root, cfg) as files:
        files.commitlog.read(offset)
        for (topic, queue_id), cq in files.queues.items(): ...
        files.index.query(key, ...)

Each part is opened on first use (so a caller that needs only the CommitLog maps nothing else,
and a part that cannot be opened, StoreFormatError, does not hide the others); ``close()`` closes
whatever was opened.

With ``sizes_from_files`` (for pure readers such as ``verify``), a part's file sizes in ``cfg`` are
replaced by those on disk (``store.file_sizes``) when that part is opened, so a broker's store
opens under any configured sizes. Without it (the default: callers that go on to write into the
store, like the incremental rebuilds and compaction) the files must have the configured sizes.
"""
from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType

from rocketlake.store.commitlog import CommitLog
from rocketlake.store.config import StoreConfig
from rocketlake.store.consume_queue import ConsumeQueue, load_queues
from rocketlake.store.file_sizes import with_commitlog_size, with_consume_queue_size, with_index_geometry
from rocketlake.store.index import IndexService
from rocketlake.store.swap_journal import refuse_unfinished


class StoreFiles:
    """The files of the store at ``root`` under the settings of ``cfg`` (with
    ``sizes_from_files``, the file sizes on disk), opened lazily, read as they are (no recovery,
    no lock, nothing written). ``explicit`` names the settings the user gave: files that
    contradict one are a SettingError."""

    def __init__(self, root: str | Path, cfg: StoreConfig, *, sizes_from_files: bool = False,
                 explicit: Collection[str] = ()) -> None:
        self.root, self.cfg, self.explicit = Path(root), cfg, explicit
        self.sizes_from_files = sizes_from_files
        self._sized: set[Callable[[Path, StoreConfig, Collection[str]], StoreConfig]] = set()
        self._commitlog: CommitLog | None = None
        self._queues: dict[tuple[str, int], ConsumeQueue] | None = None
        self._index: IndexService | None = None

    @property
    def commitlog(self) -> CommitLog:
        """The CommitLog, every file mapped (StoreFormatError for foreign names, wrong sizes or
        gaps)."""
        if self._commitlog is None:
            self._take_sizes(with_commitlog_size)
            log = CommitLog(self.root, self.cfg)
            try:
                log.files.load()
            except BaseException:
                log.close()
                raise
            self._commitlog = log
        return self._commitlog

    @property
    def queues(self) -> dict[tuple[str, int], ConsumeQueue]:
        """Every ConsumeQueue, loaded, by (topic, queue id) (StoreFormatError for a directory or
        file that cannot be one)."""
        if self._queues is None:
            self._take_sizes(with_consume_queue_size)
            self._queues = load_queues(self.root, self.cfg.mappedFileSizeConsumeQueue)
        return self._queues

    @property
    def index(self) -> IndexService:
        """The index files, loaded (whether or not ``messageIndexEnable`` is set: the caller
        decides whether it wants them)."""
        if self._index is None:
            self._take_sizes(with_index_geometry)
            idx = IndexService(self.root, self.cfg.maxHashSlotNum, self.cfg.maxIndexNum,
                               self.cfg.index_zone)
            try:
                idx.load()
            except BaseException:
                idx.close()
                raise
            self._index = idx
        return self._index

    @contextmanager
    def queue(self, topic: str, queue_id: int) -> Iterator[ConsumeQueue]:
        """One ConsumeQueue, loaded, closed on leaving the block (for callers that visit queues
        one at a time and need not map them all)."""
        refuse_unfinished(self.root)
        self._take_sizes(with_consume_queue_size)
        cq = ConsumeQueue(self.root, topic, queue_id, self.cfg.mappedFileSizeConsumeQueue)
        try:
            cq.load()
            yield cq
        finally:
            cq.close()

    def _take_sizes(self, sizer: Callable[[Path, StoreConfig, Collection[str]], StoreConfig]) -> None:
        """Take one part's file sizes from its files into ``cfg``, once (``sizes_from_files``)."""
        if self.sizes_from_files and sizer not in self._sized:
            self.cfg = sizer(self.root, self.cfg, self.explicit)
            self._sized.add(sizer)

    def close(self) -> None:
        """Unmap everything opened; the handle can be used again (parts reopen on use)."""
        log, queues, idx = self._commitlog, self._queues, self._index
        self._commitlog = self._queues = self._index = None
        if log is not None:
            log.close()
        for cq in (queues or {}).values():
            cq.close()
        if idx is not None:
            idx.close()

    def __enter__(self) -> StoreFiles:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

