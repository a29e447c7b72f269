"""MessageStore: the facade that wires CommitLog, ConsumeQueues, index, flushing and recovery."""
from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import cached_property, partial
from itertools import chain
from pathlib import Path
from struct import error as struct_error
from typing import TYPE_CHECKING, Any

import numpy as np

from rocketlake.store import codec, ingest_journal, kernels, swap_journal
from rocketlake.store.batch_consume_queue import BatchConsumeQueue, load_batch_queues
from rocketlake.store.checkpoint import Checkpoint
from rocketlake.store.codec import Record
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.compaction_log import load_compaction_queues
from rocketlake.store.config import StoreConfig, load_config
from rocketlake.store.config_files import read_consumer_offsets, write_consumer_offsets
from rocketlake.store.consume_queue import ConsumeQueue, load_queues, refuse_writing
from rocketlake.store.dispatch import Dispatcher, from_record
from rocketlake.store.errors import (
    CorruptRecordError,
    MessageNotFoundError,
    MessageRejected,
    SettingError,
)
from rocketlake.store.file_sizes import config_from_files
from rocketlake.store.flush import FlushService
from rocketlake.store.gc_pause import gc_paused
from rocketlake.store.index import IndexService
from rocketlake.store.kernels import encode as ke
from rocketlake.store.kernels import records as kr
from rocketlake.store.lockfile import StoreLock
from rocketlake.store.mapped_file import MappedFile
from rocketlake.store.message import (
    GetResult,
    GetStatus,
    Message,
    PutResult,
    PutStatus,
    StoredMessage,
    TablePutResult,
)
from rocketlake.store.message_encoder import INT_FIELDS, MessageEncoder, check_int
from rocketlake.store.queue_reader import QueueReader
from rocketlake.store.record_walk import FileEnd, Gap
from rocketlake.store.recovery import KERNELS as RECOVERY_KERNELS
from rocketlake.store.recovery import RecoveryReport, recover
from rocketlake.store.retention import ExpiryReport, RetentionPolicy, delete_expired_files
from rocketlake.store.rocksdb_store import load_rocksdb_queues, rocksdb_consume_queue
from rocketlake.store.safe_files import open_file
from rocketlake.store.store_dir import check_store, create_store
from rocketlake.store.topic_config import check_topics_file, declare_topics, queue_counts

if TYPE_CHECKING:  # pyarrow and the table encoder load with the first table written, not the open
    import pyarrow as pa

    from rocketlake.store.table_encoder import EncodedTable, TableEncoder

MAX_TRANSFER_BYTES = 256 * 1024   # maxTransferBytesOnMessageInMemory
MAX_TRANSFER_COUNT = 32           # maxTransferCountOnMessageInMemory
MAX_FILTER_UNITS = 16000 // codec.CQ_UNIT_SIZE


class DamagedRecordsSkipped(UserWarning):
    """A read met a damaged CommitLog record: it skips it (said once per open store)."""


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class MessageStore:
    """A RocketMQ 4.9 store on local disk, opened for writing (one writer per store).

    Settings come from ``config`` (default: ``load_config()``, the shipped `conf/store.conf`),
    then ``overrides`` in RocketMQ's names (``flushDiskType="SYNC_FLUSH"``, ...). Read-only, the
    file sizes come from the files (``store.file_sizes``; an override they contradict is a
    SettingError); a writer checks them against the settings. Opening for writing recovers
    the store (normal, or abnormal when ``abort`` is present); ``close()`` flushes everything,
    writes the checkpoint and removes ``abort``. A writer keeps `config/topics.json` declaring
    every ConsumeQueue's topic (``store.topic_config``), so a broker serves the store.
    """

    def __init__(self, root: str | os.PathLike[str], config: StoreConfig | None = None, *,
                 create: bool = True, read_only: bool = False, **overrides: Any) -> None:
        self.root = Path(root)
        self.config: StoreConfig = load_config(overrides, base=config)
        self.read_only = read_only
        self._closed = False
        self._warned_damage = False
        if read_only or not create:
            check_store(self.root)
        if read_only:
            with gc_paused():  # objects per queue and file, no garbage: as ``load_queues``
                self._open_read_only(overrides)
            return
        refuse_writing(self.root)
        if self.config.commitlog_dirs(self.root) != [self.root / "commitlog"]:
            raise SettingError(
                f"{self.root}: storePathCommitLog / readOnlyCommitLogStorePaths name a CommitLog "
                f"in {', '.join(map(str, self.config.commitlog_dirs(self.root)))}, which rocketlake "
                f"reads but does not write (only <store>/commitlog); open the store read-only")
        create_store(self.root)
        self._lock_file = StoreLock(self.root)
        self._lock_file.acquire()
        if os.path.lexists(self.root / "abort"):  # a crash: recovery walks and re-dispatches
            kernels.preload_behind(RECOVERY_KERNELS)  # loaded while the files below are opened
        try:
            with gc_paused():
                check_topics_file(self.root)  # refused before anything here is changed
                swap_journal.recover(self.root)  # before the structures it may swap in are read
                self._load()
                self._open_for_writing()
        except BaseException:
            try:
                index: IndexService | None = getattr(self, "index", None)
                if index is not None:
                    index.close()  # its files being deleted are gone before the lock goes
            finally:
                self._lock_file.release()
            raise

    def _load(self) -> None:
        cfg = self.config
        #: a writer's open: the units loading the queues read, for recovery's check (then dropped)
        self._units_read: dict[tuple[str, int], np.ndarray] = {}
        self._put_lock = threading.RLock()
        self.checkpoint = Checkpoint(self.root / "checkpoint", writer=not self.read_only)
        self.commitlog = CommitLog(self.root, cfg)
        self.commitlog.files.load()
        # read-only, units below retained CommitLog data are not served
        #: the ConsumeQueue files, which writers dispatch into (none where `consumequeue/` is a
        #: 5.x RocksDB ConsumeQueue, read only)
        self.file_queues: dict[tuple[str, int], ConsumeQueue] = {}
        #: every queue of `consumequeue/` to read: the file queues (the same mapping) or the
        #: queues of a RocksDB ConsumeQueue (``queue_reader.QueueReader``)
        self.queues: Mapping[tuple[str, int], QueueReader] = self.file_queues
        if self.read_only and rocksdb_consume_queue(self.root):
            self.queues = load_rocksdb_queues(self.root)
        else:
            self.file_queues = load_queues(self.root, cfg.mappedFileSizeConsumeQueue,
                                           self.commitlog.min_offset if self.read_only else None,
                                           None if self.read_only else self._units_read)
            self.queues = self.file_queues
        #: a 5.x broker's BatchConsumeQueues, read only (a writer refuses a store that has them:
        #: ``consume_queue.refuse_writing``)
        self.batch_queues: dict[tuple[str, int], BatchConsumeQueue] = load_batch_queues(self.root)
        #: a 5.x broker's compaction topics' queues (``store.compaction_log``), served before
        #: their ConsumeQueues, as the broker serves them
        self.compaction_queues = load_compaction_queues(self.root, cfg) if self.read_only else {}
        self.index = IndexService(self.root, cfg.maxHashSlotNum, cfg.maxIndexNum, cfg.index_zone) \
            if cfg.messageIndexEnable else None
        if self.index is not None:
            self.index.load(writer=not self.read_only)
        self.encoder = MessageEncoder(cfg)
        self._dispatch = Dispatcher(self.root, cfg, self.file_queues, self.index)

    def _open_read_only(self, explicit: Collection[str], attempts: int = 5) -> None:
        """Map the store without changing any file, under the file sizes on disk (``explicit``:
        the settings the caller gave). A file listed but deleted before it was opened (a
        writer's retention running meanwhile) makes the open start over."""
        configured = self.config
        for attempt in range(attempts):
            try:
                self.config = config_from_files(self.root, configured, explicit)
                self._load()
                break
            except FileNotFoundError:
                self._close_maps()
                if attempt == attempts - 1:
                    raise
        files = self.commitlog.files.files
        self._find_end(files[max(0, len(files) - 3)].start if files else 0)
        hidden = ingest_journal.hide(self.root, self.file_queues)
        # units below retained CommitLog data are not served (the queues loaded corrected; again
        # where the ingest journal hid units, and the BatchConsumeQueues)
        every: list[QueueReader] = [*(self.queues.values() if hidden else ()),
                                                          *self.batch_queues.values()]
        for cq in every:
            cq.correct_min_offset(self.commitlog.min_offset)

    def _close_maps(self) -> None:
        for part in ("commitlog", "queues", "batch_queues", "compaction_queues", "index"):
            obj = self.__dict__.pop(part, None)
            for closable in (obj.values() if isinstance(obj, dict) else [obj] if obj else []):
                closable.close()

    def _find_end(self, start: int) -> None:
        """Read-only: the end of valid CommitLog data, scanning from ``start`` (a record
        boundary) through the mapped files, walking on past damage inside a file
        (``CommitLog.walk_past_damage``; the damage is warned about, ``_damaged``), at most
        the end before an unfinished ingest (``store.ingest_journal``); sets each file's
        ``wrote``: where its last run of valid data ends. Damage with no valid record after it
        in the last file is not warned about: it is also what a running writer's record looks
        like while it is being copied in."""
        files = self.commitlog.files.files
        if not files:
            return
        stop = files[-1].end
        unfinished = ingest_journal.readable_end(self.root)
        if unfinished is not None:  # an unfinished ingest's records are not served
            stop = min(stop, unfinished)
            start = min(start, stop)
        for mf in files:
            mf.wrote = mf.size if mf.end <= start else max(0, min(mf.size, start - mf.start))
        for item in self.commitlog.walk_past_damage(start=start, stop=stop):
            if isinstance(item, Gap) and (item.resumes_at is not None or item.offset < files[-1].start):
                self._damaged(item.offset, item.why or "zeros where a record should start")
            elif isinstance(item, FileEnd):
                item.file.wrote = max(0, min(item.file.size, item.pos))

    def _damaged(self, offset: int, why: str, unit: tuple[str, int, int] | None = None) -> None:
        """Say once per open store (DamagedRecordsSkipped) that reads skip damaged records;
        ``unit``: the (topic, queue id, queue offset) of the ConsumeQueue unit that pointed at
        ``offset``, which may be the damaged part instead of the CommitLog."""
        if not self._warned_damage:
            self._warned_damage = True
            what = why.split(": ", 1)[-1]
            where = (f"CommitLog damaged at offset {offset} ({what})" if unit is None else
                     f"no valid record at CommitLog offset {offset} ({what}), where the "
                     f"ConsumeQueue unit {unit[0]}/{unit[1]} @{unit[2]} points: the unit or the "
                     f"record is damaged")
            warnings.warn(DamagedRecordsSkipped(
                f"{self.root}: {where}; reads skip the damaged records (rocketlake verify --store "
                f"{self.root} checks the whole store, rocketlake salvage copies the intact records "
                f"into a new one)"), stacklevel=3)

    def _refresh_end(self) -> int:
        """Read-only: take in what a running writer appended since the end was last found —
        CommitLog files created since, records after the old end — and return the new end."""
        files = self.commitlog.files
        if not files.files:
            files.load()
            start = files.min_offset
        else:
            start = files.max_offset
            while (path := files.dir / codec.format_file_name(files.files[-1].end)).exists():
                try:
                    files.files.append(MappedFile(path, files.files[-1].end, files.file_size))
                except FileNotFoundError:
                    break
        self._find_end(start)
        return files.max_offset

    def _open_for_writing(self) -> None:
        cfg = self.config
        self._abort = self.root / "abort"
        abnormal = os.path.lexists(self._abort)
        # before recovery writes anything (a link there is refused first; a crash meanwhile
        # recovers as abnormal next time)
        os.close(open_file(self._abort, os.O_WRONLY | os.O_CREAT))
        #: the unfinished ingest this open rolled back (``store.ingest_journal``), if any
        self.discarded_ingest = ingest_journal.discard(self.root, self.commitlog, self.file_queues,
                                                       self.index)
        read, self._units_read = self._units_read, {}
        self.recovery: RecoveryReport = recover(
            self.commitlog, self.file_queues, self.index, self.checkpoint, abnormal,
            cfg.delay_levels_ms, self._dispatch,
            read if self.discarded_ingest is None else None)  # a rollback may have cut units
        # the queues recovered (or written before topics were declared): a broker serves them all
        declare_topics(self.root, queue_counts(self.file_queues))
        self._last_ts = self.checkpoint.physic
        self._recovered_end = self.commitlog.max_offset
        self._dispatch.last_timestamp = max(self._dispatch.last_timestamp, self.checkpoint.logics)
        self.flusher = FlushService(
            self._flush_commitlog, lambda: self.commitlog.max_offset, self._flush_logics,
            self._logics_pending, sync=cfg.sync_flush, interval_ms=cfg.flushIntervalCommitLog,
            least_pages=cfg.flushCommitLogLeastPages,
            thorough_ms=cfg.flushCommitLogThoroughInterval,
            logics_interval_ms=cfg.flushIntervalConsumeQueue,
            logics_least_pages=cfg.flushConsumeQueueLeastPages,
            logics_thorough_ms=cfg.flushConsumeQueueThoroughInterval,
            sync_timeout_ms=cfg.syncFlushTimeout)
        self.flusher.start(self.commitlog.max_offset)

    # --- writing ------------------------------------------------------------------------------------
    @cached_property
    def table_encoder(self) -> TableEncoder:
        """The columnar encoder of ``put_table`` and ``put_batch``, made at the first of them: an
        open (a restart after a crash above all) imports neither it nor pyarrow, and loads no
        write kernel; the first write loads those it runs from numba's cache."""
        from rocketlake.store.table_encoder import TableEncoder
        return TableEncoder(self.encoder)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self.root}: store is closed")
        if self.read_only:
            raise RuntimeError(f"{self.root}: store is open read-only")

    def put(self, msg: Message) -> PutResult:
        """Store one message; with SYNC_FLUSH, return only once it is durable."""
        self._check_open()
        p = self.encoder.prepare(msg)
        with self._put_lock:
            ts = now_ms()
            self._dispatch.reserve((p.topic,), (p.queue_id,), (p.to_queue,),
                                   self.commitlog.next_queue_offsets, (p.index_keys,),
                                   (ts if p.store_ts is None else p.store_ts,))
            offset, qoff, ts = self.commitlog.append(p, ts)
            self._dispatch.add_many((p.topic,), (p.queue_id,), (qoff,), (offset,), (p.length,),
                                    (ts + p.tags_code if p.delayed else p.tags_code,), (ts,),
                                    (p.to_queue,), (p.index_keys,))
            self._last_ts = ts
        return _put_result((self._flush_status(offset + p.length), offset, p.length, qoff, ts,
                            p.topic, p.queue_id, p.store_addr, p.store_port))

    def put_batch(self, msgs: Sequence[Message]) -> list[PutResult]:
        """Store many messages in order; all are validated before any is written (``put_table``
        of the messages as columns)."""
        self._check_open()
        if not msgs:
            return []
        from rocketlake.store.table_encoder import messages_to_table
        table = self.table_encoder.encode(messages_to_table(msgs, self.encoder))
        r = self.put_encoded(table)
        with self._put_lock:
            self._dispatch.settle()  # the batch's units and keys written on return, as ``put``'s queue
        topics, addrs = r.topics, r.store_addrs
        return [_put_result((r.status, o, n, q, t, topics[tid], qid, addrs[h], port))
                for o, n, q, t, tid, qid, h, port in zip(
                    r.commitlog_offset.tolist(), r.size.tolist(), r.queue_offset.tolist(),
                    r.store_timestamp.tolist(), r.topic.tolist(), r.queue_id.tolist(),
                    r.store_host.tolist(), r.store_port.tolist())]

    def put_table(self, table: pa.Table | pa.RecordBatch) -> TablePutResult:
        """Store a table of messages in order (``table_encoder.COLUMNS``: ``topic``, ``body``,
        ``queue_id``, ``tags``, ``keys`` as a string or list of strings, ``properties``, ...;
        a null timestamp or host is the store's), with ``put``'s validation: MessageRejected
        "row N: ..." for the first bad row, and then nothing is written. With SYNC_FLUSH,
        returns once all are durable. Their dispatch runs behind the call (``put_encoded``)."""
        self._check_open()
        try:
            encoded = self.table_encoder.encode(table)
        except MessageRejected as e:
            if e.index is None:
                raise
            raise MessageRejected(f"row {e.index}: {e}", index=e.index) from None
        return self.put_encoded(encoded)

    def put_encoded(self, table: EncodedTable) -> TablePutResult:
        """Write rows a ``TableEncoder`` validated under this store's settings (ValueError
        otherwise), once: every file they need (CommitLog, ConsumeQueue, index) is created
        first, then the records, then their dispatch (ConsumeQueue units and index keys). The
        dispatch runs behind the call, on the dispatcher's thread (as RocketMQ's reput thread):
        every read, flush and the next write waits for it first, and raises its error."""
        self._check_open()
        if table.settings != self.encoder.settings:
            raise ValueError(f"{self.root}: rows encoded under other settings (maxMessageSize, "
                             f"CommitLog file size, delay levels, store host) than this store's")
        rows = table.rows
        if not len(table):
            none = np.zeros(0, dtype=np.int64)
            return TablePutResult(PutStatus.PUT_OK, none, none, none, none, none, table.topics, none,
                                  none, none, table.hosts)
        with self._put_lock:
            store_ts = rows[:, ke.STORE_TS]
            store_ts[store_ts < 0] = now_ms()
            born_ts = rows[:, ke.BORN_TS]
            unset = born_ts < 0
            born_ts[unset] = store_ts[unset]
            queues, counts, _, _ = table.queue_groups
            self._dispatch.reserve_counts(dict(zip(queues, counts.tolist())),
                                          self.commitlog.next_queue_offsets,
                                          np.repeat(store_ts, table.key_counts))

            offsets = self.commitlog.append_table(table)
            placed = offsets.copy()  # the caller gets ``offsets``

            def dispatch() -> tuple[Any, ...]:
                tags_code, key_hashes = table.dispatch()
                return (rows[:, ke.TOPIC], table.topics, rows[:, ke.QUEUE_ID], rows[:, ke.QUEUE_OFFSET],
                        placed, rows[:, ke.LENGTH], store_ts, tags_code, table.to_queue, key_hashes,
                        table.key_counts)

            # ConsumeQueue units and index keys behind the write (as RocketMQ's reput), beside
            # the caller's next table's validation; reads, flushes and the next write wait for it
            self._dispatch.add_columns_behind(dispatch)
            self._last_ts = int(store_ts[-1])
        end = int(offsets[-1] + rows[-1, ke.LENGTH])
        status = self._flush_status(end)
        return TablePutResult(status, offsets, rows[:, ke.LENGTH].copy(), rows[:, ke.QUEUE_OFFSET].copy(),
                              store_ts.copy(), rows[:, ke.TOPIC].copy(), table.topics,
                              rows[:, ke.QUEUE_ID].copy(), rows[:, ke.STORE_HOST].copy(),
                              rows[:, ke.STORE_PORT].copy(), table.hosts)

    def put_records(self, raws: Sequence[bytes]) -> list[PutResult]:
        """Append records copied byte for byte from another CommitLog (compaction, migration).

        Each record is validated (magic, lengths, body CRC, topic); only its QUEUEOFFSET and
        PHYSICALOFFSET change, to its place here. All are checked before any is written.
        """
        self._check_open()
        recs = []
        for i, raw in enumerate(raws):
            try:
                raw = bytes(raw)
                phy = codec.PHYSICAL.unpack_from(raw, codec.OFF_PHYSICAL_OFFSET)[0]
                rec = codec.decode_record(raw, 0, phy)
                if isinstance(rec, int):
                    raise CorruptRecordError("a BLANK end-of-file record is not a message")
                if rec.size != len(raw):
                    raise ValueError(f"{len(raw)} bytes given for a record of {rec.size}")
                codec.check_topic(rec.topic)
                check_int("store_timestamp", rec.store_timestamp, INT_FIELDS["store_timestamp"])
                if rec.size > self.encoder.max_record:
                    raise ValueError(f"record of {rec.size} bytes does not fit a CommitLog file")
            except (ValueError, TypeError, struct_error) as e:
                raise MessageRejected(f"record {i}: {e}", index=i) from None
            recs.append((raw, rec, from_record(rec, self.config.delay_levels_ms)))
        placed = []
        with self._put_lock:
            reqs = [req for _, _, req in recs]
            self._dispatch.reserve([r.topic for r in reqs], [r.queue_id for r in reqs],
                                   [r.to_consume_queue for r in reqs], self.commitlog.next_queue_offsets,
                                   [r.index_keys for r in reqs], [r.store_timestamp for r in reqs])
            for raw, rec, req in recs:
                offset, qoff = self.commitlog.append_raw(raw, rec.topic, rec.queue_id, req.to_consume_queue)
                self._dispatch(req._replace(commitlog_offset=offset, queue_offset=qoff))
                self._last_ts = rec.store_timestamp
                placed.append((offset, qoff, rec))
        if not placed:
            return []
        status = self._flush_status(placed[-1][0] + placed[-1][2].size)
        return [_put_result((status, offset, rec.size, qoff, rec.store_timestamp, rec.topic,
                             rec.queue_id, rec.store_addr, rec.store_port))
                for offset, qoff, rec in placed]

    @contextmanager
    def all_or_nothing(self) -> Iterator[None]:
        """Keep every message put inside the block, or none of them (``rocketlake ingest``).

        Before the block the store is flushed and its end recorded in a journal
        (``store.ingest_journal``). Leaving the block normally flushes everything and removes the
        journal: the commit point. An exception inside the block rolls the store back to the
        recorded end, as the next writer open would after a kill (the store is closed and opened
        again under the same lock), and is raised again with a note saying nothing was stored.
        Puts from other threads meanwhile belong to the block. Killed inside the block, the next
        writer open rolls back; read-only opens meanwhile serve only what came before it."""
        self._check_open()
        self.flush()
        with self._put_lock:
            journal = ingest_journal.begin(self.root, self.commitlog.max_offset, self.file_queues)
        try:
            yield
            self.flush()
        except BaseException as e:
            self._roll_back()
            e.add_note(f"nothing stored: {self.root} is as it was before (rolled back)")
            raise
        ingest_journal.finish(journal)

    def _roll_back(self) -> None:
        """Close the store's files and open them again, keeping the lock: the writer open rolls
        back the unfinished write its journal records. Should that fail (or the dispatch still
        running behind a ``put_table``), the store is closed (the journal stays for the next open)."""
        self.flusher.stop()
        self.commitlog.close()
        try:
            self._dispatch.close()
            self._load()
            self._open_for_writing()
        except BaseException:
            self._closed = True
            self._close_maps()
            self._lock_file.release()
            raise

    def _flush_status(self, end: int) -> PutStatus:
        """With SYNC_FLUSH, wait (at most syncFlushTimeout) for the bytes below ``end`` to be
        durable: PUT_OK, or FLUSH_DISK_TIMEOUT when they are stored but not yet confirmed
        durable (RocketMQ's CommitLog.handleDiskFlush). PUT_OK with ASYNC_FLUSH."""
        if self.flusher.sync and not self.flusher.wait_durable(end):
            return PutStatus.FLUSH_DISK_TIMEOUT
        return PutStatus.PUT_OK

    # --- flushing -----------------------------------------------------------------------------------
    def _flush_commitlog(self) -> int:
        ts = self._last_ts  # read first: every record up to ``end`` is at least this old
        end = self.commitlog.max_offset
        self.commitlog.flush()
        self.checkpoint.physic = max(self.checkpoint.physic, ts)
        if self.checkpoint.confirm_offset and end > self._recovered_end:
            # a 5.x broker's confirmed offset: readers stop there, so it covers what we wrote
            self.checkpoint.confirm_offset = max(self.checkpoint.confirm_offset, end)
        return end

    def _flush_logics(self) -> None:
        with self._put_lock:
            ts = self._dispatch.last_timestamp
            self._dispatch.flush()
        self.checkpoint.logics = max(self.checkpoint.logics, ts)
        if self.index is not None:
            self.checkpoint.index = max(self.checkpoint.index, ts)
        self.checkpoint.save()

    def _logics_pending(self) -> int:
        """Bytes of ConsumeQueue units put but not yet flushed."""
        with self._put_lock:
            self._dispatch.apply()
            return sum(mf.wrote - mf.flushed for cq in self.file_queues.values() for mf in cq.files.files)

    def flush(self) -> None:
        """Make everything written so far durable and save the checkpoint."""
        self.flusher.flush()
        self._flush_logics()

    @contextmanager
    def flushes_held(self) -> Iterator[None]:
        """Hold off every CommitLog flush while the block runs (after a running one ends): to a
        producer, a disk that stalls. A SYNC_FLUSH put meanwhile waits syncFlushTimeout, then
        answers FLUSH_DISK_TIMEOUT with its message stored (RocketMQ's answer to a slow disk)."""
        with self.flusher.exclusive():
            yield

    # --- reading ------------------------------------------------------------------------------------
    def _visible(self) -> None:
        """Apply queued dispatch so reads see every message put so far."""
        if not self.read_only:
            with self._put_lock:
                self._dispatch.apply()

    def refresh(self) -> int:
        """The end of valid CommitLog data now. Read-only, this first takes in what a running
        writer or broker appended since the open or the last refresh: records after the old end
        and the CommitLog files created since (ConsumeQueues stay as opened)."""
        if self.read_only:
            return self._refresh_end()
        self._visible()
        return self.commitlog.max_offset

    def queue(self, topic: str, queue_id: int) -> QueueReader | None:
        """The queue (a ConsumeQueue, or a 5.x broker's BatchConsumeQueue, compaction queue or
        RocksDB queue), None when there is none. Waits for the dispatch of earlier puts."""
        self._visible()
        key = (topic, queue_id)
        for table in (self.compaction_queues, self.queues, self.batch_queues):
            cq = table.get(key)
            if cq is not None:
                return cq
        return None

    def min_offset(self, topic: str, queue_id: int) -> int:
        self._visible()
        cq = self.queue(topic, queue_id)
        return cq.min_offset if cq else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        self._visible()
        cq = self.queue(topic, queue_id)
        return cq.max_offset if cq else 0

    def queue_ranges(self) -> dict[tuple[str, int], tuple[int, int]]:
        """(topic, queue_id) -> (min offset, max offset) for every ConsumeQueue and
        BatchConsumeQueue."""
        self._visible()
        every: dict[tuple[str, int], QueueReader] = {
            **self.batch_queues, **self.queues, **self.compaction_queues}
        return {k: (cq.min_offset, cq.max_offset) for k, cq in sorted(every.items())}

    def get(self, topic: str, queue_id: int, offset: int, max_msgs: int = 32,
            tags: str | Iterable[str] | None = None) -> GetResult:
        """RocketMQ's getMessage: statuses, next-offset rules, tag filter by tagsCode + real tag.
        A BatchConsumeQueue unit is one record for several queue offsets: it is read from any of
        them, and the next offset is the one after its last. A 5.x compaction topic's queue
        serves from the first unit at or after ``offset``, below its minimum too
        (``CompactionLog.getMessage``)."""
        self._visible()
        cq = self.queue(topic, queue_id)
        if cq is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, 0, 0, 0)
        lo, hi = cq.min_offset, cq.max_offset
        if hi == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, 0, lo, hi)
        if offset < lo and (topic, queue_id) not in self.compaction_queues:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, lo, lo, hi)
        if offset == hi:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, lo, hi)
        if offset > hi:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, hi, lo, hi)
        wanted = tag_filter(tags)
        units = cq.units(offset, max(MAX_FILTER_UNITS, max_msgs))
        firsts, nums = cq.unit_spans(offset, len(units)) if isinstance(cq, BatchConsumeQueue) else (
            list(range(offset, offset + len(units))), [1] * len(units))  # a unit per queue offset
        msgs: list[StoredMessage] = []
        status, total, scanned = GetStatus.NO_MATCHED_MESSAGE, 0, 0
        # a compaction topic's units point into its compaction log, not the CommitLog
        log = cq.log if isinstance(cq, BatchConsumeQueue) and cq.log is not None else self.commitlog
        cl_min, cl_end = log.min_offset, log.max_offset
        for i, (off, size, tcode) in enumerate(units.tolist()):
            if msgs and (len(msgs) >= min(max_msgs, MAX_TRANSFER_COUNT)
                         or total + size > MAX_TRANSFER_BYTES):
                break
            # Only a record at or after the visible end can be a running writer's: the end is
            # a record boundary, so a unit starting before it and reaching past it is damaged.
            if self.read_only and log is self.commitlog and off >= cl_end and off >= cl_min:
                cl_end = self._refresh_end()
                if off >= cl_end:
                    break  # written by a running writer but not visible yet: retry from here
            scanned = i + 1
            if wanted is not None and tcode not in wanted[0]:
                continue
            rec = self._unit_record(log, topic, queue_id, firsts[i], off, size) if off >= cl_min else None
            if rec is None:  # removed by retention, or damaged: skipped, never served
                if not msgs:
                    status = GetStatus.MESSAGE_WAS_REMOVING
                continue
            if wanted is not None and rec.tags not in wanted[1]:
                continue
            msgs.append(StoredMessage(rec, firsts[i], tcode))
            total += size
            status = GetStatus.FOUND
        if scanned == 0:  # the first unit is not visible yet
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, offset, lo, offset)
        return GetResult(status, firsts[scanned - 1] + nums[scanned - 1], lo, hi, msgs)

    def store_times(self, wanted: Sequence[tuple[str, int, int]]) -> list[int | None]:
        """The store time (epoch ms) of the message at each (topic, queue id, queue offset); None
        where ``get(topic, queue_id, offset, 1)`` would not return the message at that offset
        (negative, below the minimum, past the end, removed, damaged, not the unit's record):
        RocketMQ's ``getMessageStoreTimeStamp``. A ConsumeQueue's unit is read and its record
        checked as ``get`` checks it (CRC included) without building a message; a compaction
        topic's or a BatchConsumeQueue's message through ``get``."""
        self._visible()
        log = self.commitlog
        out: list[int | None] = []
        for topic, queue_id, offset in wanted:
            key = (topic, queue_id)
            cq = None if key in self.compaction_queues else self.queues.get(key)
            if cq is None or offset < 0:
                out.append(self._got_store_time(topic, queue_id, offset) if offset >= 0 else None)
                continue
            units = cq.units(offset, 1) if cq.min_offset <= offset < cq.max_offset else None
            if units is None or not units.size:
                out.append(None)
                continue
            off, size, _ = units[0].item()
            if off < log.min_offset or (self.read_only and off >= log.max_offset
                                        and off >= self._refresh_end()):
                out.append(None)  # removed by retention / not visible yet
                continue
            try:
                buf, row = log.read_row(off, check_crc=True)
            except CorruptRecordError as e:
                self._damaged(off, str(e), (topic, queue_id, offset))
                out.append(None)
                continue
            at, n = row[kr.TOPIC_START], row[kr.TOPIC_LEN]
            mine = ((row[kr.QUEUE_ID], row[kr.QUEUE_OFFSET], row[kr.SIZE]) == (queue_id, offset, size)
                    and bytes(buf[at:at + n]).decode() == topic)
            out.append(row[kr.STORE_TS] if mine else None)
        return out

    def _got_store_time(self, topic: str, queue_id: int, offset: int) -> int | None:
        """``store_times`` of one message, through ``get``."""
        g = self.get(topic, queue_id, offset, 1)
        if g.status is GetStatus.FOUND and g.messages[0].queue_offset == offset:
            return g.messages[0].record.store_timestamp
        return None

    def _unit_record(self, log: CommitLog, topic: str, queue_id: int, queue_offset: int, offset: int,
                     size: int) -> Record | None:
        """The record a ConsumeQueue unit points at in ``log`` (the CommitLog, or a compaction log), or None
        when there is no valid record there or it is not this unit's (another queue's or another
        queue offset's record, or another size): RocketMQ's dispatch wrote the unit from the
        record's own QUEUEID and QUEUEOFFSET (CommitLog.checkMessageAndReturnSize), under the
        record's stored topic — for delayed messages SCHEDULE_TOPIC_XXXX and queue delayLevel - 1,
        as the unit's queue is."""
        try:
            # a compaction log's copies keep the property CRC of their first place: not checked
            rec = log.read(offset, check_crc=log is self.commitlog)
        except CorruptRecordError as e:
            self._damaged(offset, str(e), (topic, queue_id, queue_offset))
            return None
        if (rec.topic, rec.queue_id, rec.queue_offset, rec.size) != (topic, queue_id, queue_offset, size):
            return None
        return rec

    def read(self, commitlog_offset: int) -> Record:
        """The record at a CommitLog offset (CorruptRecordError if there is none)."""
        return self.commitlog.read(commitlog_offset, check_crc=True)

    def lookup(self, msg_id: str, topic: str | None = None) -> Record:
        """The message ``msg_id`` names (MessageNotFoundError when none):

        - an offset msgId of this store (RocketMQ's ``MessageDecoder.createMessageId``: STOREHOST,
          then the CommitLog offset): the record that starts at that offset, when its own
          PHYSICALOFFSET and STOREHOST are the msgId's;
        - else a UNIQ_KEY (the producer's msgId, ``mqadmin queryMsgByUniqueKey``), found through
          the index, which holds it as the key ``topic#uniqKey``: under ``topic``, or without
          one under every topic with a ConsumeQueue (every indexed message but a PREPARED half
          message of a topic nothing else was sent to; RocketMQ's transactional producers put
          half messages under RMQ_SYS_TRANS_HALF_TOPIC, which has one). Several records with that
          UNIQ_KEY (a delayed message and its delivery, a retry): the first stored.
        """
        rec = self._at_msg_id(msg_id)
        if rec is not None and (topic is None or rec.topic == topic):
            return rec
        if self.index is None:
            raise MessageNotFoundError(f"{msg_id}: no message at that offset msgId in {self.root}, "
                                       f"and messageIndexEnable=false: no UNIQ_KEY index to search")
        topics = [topic] if topic is not None else sorted({t for t, _ in self.queues})
        found = [r for t in topics for r in self.query(t, msg_id, 2 ** 31 - 1) if r.uniq_key == msg_id]
        if not found:
            raise MessageNotFoundError(f"{msg_id}: no message in {self.root} with that offset msgId "
                                       f"or UNIQ_KEY{f' in topic {topic!r}' if topic else ''}")
        return min(found, key=lambda r: r.commitlog_offset)

    def _at_msg_id(self, msg_id: str) -> Record | None:
        """The record ``msg_id`` names as an offset msgId of this store, None when it is not one."""
        try:
            _, offset = codec.decode_msg_id(msg_id)
        except ValueError:
            return None
        if self.read_only and offset >= self.commitlog.max_offset:
            self._refresh_end()
        try:
            rec = self.read(offset)
        except CorruptRecordError:
            return None
        return rec if rec.physical_offset == offset and rec.msg_id == msg_id.upper() else None

    def query(self, topic: str, key: str, max_num: int = 32, begin: int = 0,
              end: int = 2 ** 63 - 1) -> list[Record]:
        """Messages of ``topic`` whose KEYS or UNIQ_KEY equal ``key``, stored in [begin, end],
        in CommitLog order, at most ``max_num``.

        The index keeps whole seconds and 32-bit hashes, so candidates are read back and checked
        against the real key and store time (RocketMQ leaves both checks to the client).
        """
        if self.index is None:
            raise RuntimeError("messageIndexEnable=false: this store keeps no index")
        self._visible()
        with self._put_lock:
            offsets = self.index.query(f"{topic}#{key}", 2 ** 31 - 1, max(0, begin - 1000), end)
        out = []
        for off in sorted(set(offsets)):
            try:
                rec = self.commitlog.read(off, check_crc=True)
            except CorruptRecordError:
                continue
            if (rec.topic == topic and begin <= rec.store_timestamp <= end
                    and (key in rec.keys or rec.uniq_key == key)):
                out.append(rec)
        return out[-max_num:] if max_num < len(out) else out

    def offset_by_time(self, topic: str, queue_id: int, timestamp: int) -> int:
        """Queue offset of the message stored at ``timestamp``, else the nearer neighbour."""
        self._visible()
        cq = self.queues.get((topic, queue_id))
        if cq is None or cq.max_offset == 0:
            return 0
        lo, hi = cq.min_offset, cq.max_offset - 1
        left = self.offset_stored_from(topic, queue_id, timestamp)
        if left > hi:
            return hi
        if left == lo or self._queue_store_time(cq, left) == timestamp:
            return left
        before, after = self._queue_store_time(cq, left - 1), self._queue_store_time(cq, left)
        return left - 1 if timestamp - before <= after - timestamp else left

    def offset_stored_from(self, topic: str, queue_id: int, timestamp: int) -> int:
        """The first queue offset of the queue whose message was stored at or after
        ``timestamp`` (epoch ms), its max offset when none was, its min offset when every
        message was: a binary search that reads about log2(messages) records, for store times
        rise with the queue offset (RocketMQ stamps them under the CommitLog's put lock). 0 for
        a queue the store does not have."""
        self._visible()
        cq = self.queues.get((topic, queue_id))
        if cq is None:
            return 0
        left, right = cq.min_offset, cq.max_offset - 1
        while left <= right:
            mid = (left + right) // 2
            if self._queue_store_time(cq, mid) < timestamp:
                left = mid + 1
            else:
                right = mid - 1
        return left

    def _queue_store_time(self, cq: QueueReader, queue_offset: int) -> int:
        """Store time of the record the unit at ``queue_offset`` points at; where that record is
        damaged (said once, as reads say it), the store time of the nearest intact record before
        it in the queue, else after it: time searches skip damaged records as reads do.
        CorruptRecordError naming the store and queue when there is no unit at ``queue_offset``
        or no intact record in the queue."""
        if not cq.units(queue_offset, 1).size:
            raise CorruptRecordError(f"{self.root}: {cq.topic}/{cq.queue_id}: no unit at queue "
                                     f"offset {queue_offset}")
        for q in chain(range(queue_offset, cq.min_offset - 1, -1),
                       range(queue_offset + 1, cq.max_offset)):
            unit = cq.units(q, 1)
            if not unit.size:
                continue
            off = int(unit[0]["commitlog_offset"])
            try:
                return self.commitlog.read(off).store_timestamp
            except CorruptRecordError as e:
                if off >= self.commitlog.min_offset:
                    self._damaged(off, str(e), (cq.topic, cq.queue_id, q))
        raise CorruptRecordError(f"{self.root}: {cq.topic}/{cq.queue_id}: no intact record in the "
                                 f"queue to read a store time from")

    # --- consumer offsets ---------------------------------------------------------------------------
    def consumer_offsets(self) -> dict[tuple[str, str], dict[int, int]]:
        """`config/consumerOffset.json` as {(topic, group): {queue_id: offset}}."""
        return read_consumer_offsets(self.root)

    def commit_offsets(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        """Record a consumer group's committed offsets for ``topic``'s queues."""
        table = self.consumer_offsets()
        table.setdefault((topic, group), {}).update(offsets)
        write_consumer_offsets(self.root, table)

    # --- retention ----------------------------------------------------------------------------------
    def delete_expired_files(self, now: int | None = None, force: bool = False) -> ExpiryReport:
        """Retention (``store.retention``): at ``now`` (ms; default the clock), delete expired
        CommitLog files if it is a ``deleteWhen`` hour, the disk is fuller than
        ``diskMaxUsedSpaceRatio`` or ``force``; then the ConsumeQueue and index files below the new
        minimum. Reads below a queue's new minimum answer OFFSET_TOO_SMALL."""
        self._check_open()
        with self._put_lock, self.flusher.exclusive():
            self._dispatch.flush()
            return delete_expired_files(self.commitlog, self.file_queues, self.index,
                                        RetentionPolicy.from_config(self.config),
                                        now_ms() if now is None else now, force)

    # --- lifecycle ----------------------------------------------------------------------------------
    def close(self) -> None:
        """Flush everything, save the checkpoint, remove ``abort`` and release the lock.

        Should the final flush fail (a full disk cannot take the first checkpoint), the files are
        closed and the lock released all the same, ``abort`` stays (the next open recovers as after
        a crash) and the error is raised."""
        if self._closed:
            return
        self._closed = True
        flushed = self.read_only
        try:
            if not self.read_only:
                self.flusher.stop()
                self.flush()
                flushed = True
        finally:
            self.commitlog.close()
            self._dispatch.close()
            if not self.read_only:
                if flushed:
                    self._abort.unlink(missing_ok=True)
                self._lock_file.release()

    def __enter__(self) -> MessageStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_put_result = partial(tuple.__new__, PutResult)


def tag_filter(tags: str | Iterable[str] | None) -> tuple[set[int], set[str]] | None:
    """RocketMQ subscription expression ("A || B", "*") -> (tagsCodes, tags), None for all."""
    if tags is None:
        return None
    names = [t.strip() for t in (tags.split("||") if isinstance(tags, str) else tags)]
    names = [t for t in names if t]
    if not names or "*" in names:
        return None
    return {codec.java_hash(t) for t in names}, set(names)
