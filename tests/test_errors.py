"""One error hierarchy, whole config objects, and settings that act (syncFlushTimeout)."""
from __future__ import annotations

import ast
import errno
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from store_helpers import record_bytes

import rocketlake.store as store_pkg
from rocketlake.store import (
    ConfigFileError,
    CorruptRecordError,
    GetStatus,
    Message,
    MessageRejected,
    MessageStore,
    PutStatus,
    RocketlakeError,
    SettingError,
    StoreFormatError,
    StoreFullError,
    StoreLockedError,
    UnsafePathError,
    load_config,
)
from rocketlake.store.compaction import KeptRecord, segment_path, write_segment
from rocketlake.store.config import read_properties
from rocketlake.store.flush import FlushService
from rocketlake.store.single_process_rebuild import rebuild
from rocketlake.store.verify import verify

SMALL = dict(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=200, maxHashSlotNum=16,
             maxIndexNum=20)
STORE_DIR = Path(store_pkg.__file__).parent


# --- one hierarchy ----------------------------------------------------------------------------------
@pytest.mark.parametrize("cls, builtin", [
    (SettingError, ValueError), (MessageRejected, ValueError), (CorruptRecordError, ValueError),
    (StoreFormatError, ValueError), (UnsafePathError, StoreFormatError), (StoreFullError, OSError),
    (StoreLockedError, RuntimeError), (ConfigFileError, ValueError)])
def test_every_error_has_the_one_base_and_keeps_its_builtin_base(cls, builtin):
    assert issubclass(cls, RocketlakeError) and issubclass(cls, builtin)


def test_store_full_error_is_still_an_os_error_with_errno():
    e = StoreFullError(errno.ENOSPC, "no room for commitlog/00000000000000000000")
    assert isinstance(e, OSError) and e.errno == errno.ENOSPC


def test_every_exception_class_of_the_library_is_defined_in_errors_module():
    defined: dict[str, list[str]] = {}
    for path in sorted(STORE_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    isinstance(b, ast.Name) and b.id.endswith(("Error", "Exception", "Rejected"))
                    for b in node.bases):
                defined.setdefault(node.name, []).append(path.name)
    assert defined and all(files == ["errors.py"] for files in defined.values()), defined
    assert set(defined) <= set(store_pkg.__all__)


def test_rejected_message_of_a_batch_carries_its_index_and_nothing_is_written(tmp_path):
    with MessageStore(tmp_path / "s", **SMALL) as ms:
        with pytest.raises(MessageRejected) as e:
            bad = Message("T", "not bytes")  # type: ignore[arg-type]
            ms.put_batch([Message("T", b"a"), Message("T", b"b"), bad])
        assert e.value.index == 2 and "body must be bytes" in str(e.value)
        with pytest.raises(MessageRejected) as e:
            ms.put_records([b"\x00" * 8])
        assert e.value.index == 0 and str(e.value).startswith("record 0:")
        assert ms.max_offset("T", 0) == 0


def test_a_bad_setting_is_a_setting_error():
    with pytest.raises(SettingError, match="unknown store setting 'nope'"):
        load_config({"nope": 1})
    with pytest.raises(ValueError, match="syncFlushTimeout must be positive, got 0"):
        load_config({"syncFlushTimeout": 0})


# --- whole config objects ---------------------------------------------------------------------------
def test_a_properties_file_is_read_as_java_reads_it(tmp_path):
    conf = tmp_path / "broker.properties"
    conf.write_text("# hash comment\n"
                    "! bang comment\n"
                    "deleteWhen : 03\n"
                    "  brokerIP1=10.0.0.1\n"
                    "listenPort 10912\n"
                    "messageDelayLevel = 1s 5s \\\n"
                    "    10s 30s\n"
                    "key\\ with\\ spaces = a\\tb\n"
                    "path\\:name=c\\:\\\\temp\n"
                    "cafe=caf\\u00e9\n"
                    "trailing=x  \n"
                    "bare\n", encoding="utf-8")
    assert read_properties(conf) == {
        "deleteWhen": "03", "brokerIP1": "10.0.0.1", "listenPort": "10912",
        "messageDelayLevel": "1s 5s 10s 30s", "key with spaces": "a\tb", "path:name": "c:\\temp",
        "cafe": "caf\u00e9", "trailing": "x  ", "bare": ""}
    conf.write_text("bad=\\u00zz\n", encoding="utf-8")
    with pytest.raises(SettingError, match=f"{conf}: .*u00zz"):
        read_properties(conf)


def test_a_conf_file_with_colons_and_continuations_gives_the_same_settings(tmp_path):
    default = load_config()
    conf = tmp_path / "store.conf"
    conf.write_text("".join(f"{name}: {str(value).lower() if isinstance(value, bool) else value} \n"
                            for name, value in default.as_dict().items()
                            if name != "messageDelayLevel")
                    + "messageDelayLevel=" + " \\\n  ".join(default.messageDelayLevel.split()) + "\n",
                    encoding="utf-8")
    assert load_config(conf_file=conf) == default


def test_load_config_applies_overrides_to_a_base_config():
    base = load_config({"flushDiskType": "SYNC_FLUSH", **SMALL})
    cfg = load_config({"syncFlushTimeout": "750"}, base=base)
    assert cfg.syncFlushTimeout == 750 and cfg.flushDiskType == "SYNC_FLUSH"
    assert cfg.mappedFileSizeCommitLog == 4096 and base.syncFlushTimeout == 5000
    assert load_config(None, base=base) is base
    with pytest.raises(SettingError, match="unknown store setting 'x'"):
        load_config({"x": 1}, base=base)


def test_message_store_takes_a_whole_config_and_overrides_on_top(tmp_path):
    cfg = load_config({"messageIndexEnable": False, "listenPort": 10922, **SMALL})
    with MessageStore(tmp_path / "s", cfg, flushDiskType="SYNC_FLUSH") as ms:
        assert ms.config.listenPort == 10922 and ms.config.sync_flush and ms.index is None
        r = ms.put(Message("T", b"x"))
    assert r.store_port == 10922 and not (tmp_path / "s" / "index").exists()
    with MessageStore(tmp_path / "s", cfg, read_only=True) as ro:
        assert ro.config is cfg and ro.get("T", 0, 0).status is GetStatus.FOUND


def test_segment_verify_and_rebuild_take_the_whole_config(tmp_path):
    """Every setting reaches the segment store, not a chosen few (messageIndexEnable here)."""
    root = tmp_path / "s"
    cfg = load_config({"messageIndexEnable": False, **SMALL})
    with MessageStore(root, cfg) as ms:
        p = ms.put(Message("state", b"v", keys="k"))
        raw = record_bytes(ms, p.commitlog_offset)
    write_segment(root, "state", [KeptRecord(0, 0, raw)], p.commitlog_offset + p.size, cfg)
    seg = segment_path(root, "state")
    assert (seg / "commitlog").is_dir() and not (seg / "index").exists()
    assert verify(seg, cfg).ok
    stats = rebuild(root, tmp_path / "out", config=cfg)
    index_files = list((tmp_path / "out" / "index").iterdir())
    # IndexFile: 40-byte header + maxHashSlotNum 4-byte slots + maxIndexNum 20-byte entries
    assert stats.records == 1 and [f.stat().st_size for f in index_files] == [40 + 16 * 4 + 20 * 20]


# --- syncFlushTimeout acts --------------------------------------------------------------------------
@contextmanager
def _flushes_held(ms: MessageStore) -> Iterator[None]:
    """Hold off every flush of ``ms`` from another thread while the block runs."""
    held, done = threading.Event(), threading.Event()

    def hold() -> None:
        with ms.flushes_held():
            held.set()
            done.wait()
    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(5)
        yield
    finally:
        done.set()
        t.join()


@pytest.mark.parametrize("how", ["put", "put_batch", "put_records"])
def test_sync_put_that_cannot_flush_in_time_reports_flush_disk_timeout(tmp_path, how):
    """SYNC_FLUSH waits at most syncFlushTimeout for durability (CommitLog.handleDiskFlush; how
    long the FlushService tests below measure by their clock); the message is stored all the same
    and readable."""
    with MessageStore(tmp_path / "src", **SMALL) as src:
        raw = record_bytes(src, src.put(Message("T", b"copied")).commitlog_offset)
    with MessageStore(tmp_path / "s", flushDiskType="SYNC_FLUSH", syncFlushTimeout=1, **SMALL) as ms:
        def do_put() -> list:
            if how == "put":
                return [ms.put(Message("T", b"copied"))]
            if how == "put_batch":
                return ms.put_batch([Message("T", b"copied"), Message("T", b"copied")])
            return ms.put_records([raw])
        assert [r.status for r in do_put()] == [PutStatus.PUT_OK] * (2 if how == "put_batch" else 1)
        with _flushes_held(ms):
            results = do_put()
        assert all(r.status is PutStatus.FLUSH_DISK_TIMEOUT for r in results)
        got = ms.get("T", 0, results[0].queue_offset)
        assert got.status is GetStatus.FOUND and got.messages[0].record.body == b"copied"
        assert ms.put(Message("T", b"later")).status is PutStatus.PUT_OK


# --- FlushService rules, by a clock the test moves ---------------------------------------------------
class FakeClock:
    """Seconds that pass only when told: ``advance()``, and ``step`` more after every read."""

    def __init__(self) -> None:
        self.now = 0.0
        self.step = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            now, self.now = self.now, self.now + self.step
            return now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


class Disk:
    """What a FlushService flushes: ``written`` CommitLog bytes (a flush covers what was written
    when it began, and runs until ``release`` is set) and ``logics`` ConsumeQueue bytes pending;
    counts the flushes of each."""

    def __init__(self) -> None:
        self.written = self.logics = 0
        self.commitlog_flushes = self.logics_flushes = 0
        self.flushing, self.release = threading.Event(), threading.Event()
        self.release.set()

    def flush_commitlog(self) -> int:
        end = self.written
        self.flushing.set()
        assert self.release.wait(5)
        self.commitlog_flushes += 1
        return end

    def flush_logics(self) -> None:
        self.logics_flushes += 1
        self.logics = 0


def _service(disk: Disk, clock: FakeClock, **settings: Any) -> FlushService:
    """A FlushService over ``disk`` (ASYNC_FLUSH unless ``sync=True``); the intervals are binary
    fractions of a second so that the clock's sums are exact."""
    given: dict[str, Any] = dict(sync=False, interval_ms=250, least_pages=4, thorough_ms=1000,
                                 logics_interval_ms=250, logics_least_pages=2,
                                 logics_thorough_ms=60_000, sync_timeout_ms=250)
    return FlushService(disk.flush_commitlog, lambda: disk.written, disk.flush_logics,
                        lambda: disk.logics, clock=clock, **{**given, **settings})


def _leader_flushing() -> tuple[FakeClock, Disk, FlushService, threading.Thread]:
    """A SYNC_FLUSH service whose leading producer's flush of bytes 0-100 has started and is held
    (``disk.release`` cleared): the clock, the disk, the service and the leader's thread."""
    clock, disk = FakeClock(), Disk()
    fs = _service(disk, clock, sync=True)
    disk.written = 100
    disk.release.clear()
    leader = threading.Thread(target=fs.wait_durable, args=(100,))
    leader.start()
    return clock, disk, fs, leader


def test_a_producer_waits_for_another_flush_until_the_clock_passes_sync_flush_timeout():
    """GroupCommitRequest.waitForFlush: bytes a running flush does not cover wait for it at most
    syncFlushTimeout (250 ms) by the clock, then the wait reports False; SYNC_FLUSH's background
    round flushes what was left."""
    clock, disk, fs, leader = _leader_flushing()
    assert disk.flushing.wait(5)  # the leader's flush covers bytes 0-100 and runs on
    disk.written = 150
    clock.step = 0.25  # each read of the clock finds 250 ms more passed
    assert fs.wait_durable(150) is False
    clock.step = 0
    disk.release.set()
    leader.join()
    assert (fs.durable, disk.commitlog_flushes) == (100, 1)
    fs.tick()
    assert (fs.durable, disk.commitlog_flushes) == (150, 2)


def test_a_producer_within_sync_flush_timeout_is_covered_by_the_next_flush():
    """The clock stands still: however long the running flush takes, the waiting producer is
    made durable (by the next flush, which it leads) and the wait reports True."""
    _, disk, fs, leader = _leader_flushing()
    assert disk.flushing.wait(5)
    disk.written = 150
    waited: list[bool] = []
    follower = threading.Thread(target=lambda: waited.append(fs.wait_durable(150)))
    follower.start()
    disk.release.set()
    leader.join()
    follower.join()
    assert waited == [True] and (fs.durable, disk.commitlog_flushes) == (150, 2)


def test_the_background_thread_flushes_what_timed_out_producers_left():
    """SYNC_FLUSH: every flushIntervalCommitLog the thread flushes any pending byte, without
    another put or a close."""
    disk = Disk()
    fs = _service(disk, FakeClock(), sync=True, interval_ms=1)
    disk.written = 150
    fs.start(100)
    try:
        assert disk.flushing.wait(5)
    finally:
        fs.stop()
    assert fs.durable == 150


def test_commitlog_flushes_once_least_pages_are_pending_or_the_thorough_interval_passed():
    """ASYNC_FLUSH: flushCommitLogLeastPages (4 pages of 4096 bytes), or every pending byte once
    flushCommitLogThoroughInterval (1000 ms) passed since the last thorough round."""
    clock, disk = FakeClock(), Disk()
    fs = _service(disk, clock, least_pages=4, thorough_ms=1000)
    disk.written = 4 * 4096 - 1
    clock.advance(0.5)
    fs.tick()
    assert disk.commitlog_flushes == 0
    disk.written = 4 * 4096
    fs.tick()
    assert (fs.durable, disk.commitlog_flushes) == (4 * 4096, 1)
    disk.written += 1
    clock.advance(0.25)
    fs.tick()
    assert disk.commitlog_flushes == 1
    clock.advance(0.25)  # 1000 ms since the start
    fs.tick()
    assert (fs.durable, disk.commitlog_flushes) == (4 * 4096 + 1, 2)


# --- flushConsumeQueueLeastPages / flushConsumeQueueThoroughInterval act ----------------------------
def test_consume_queues_flush_once_least_pages_are_pending():
    """FlushConsumeQueueService: every flushIntervalConsumeQueue (250 ms), flush only when
    flushConsumeQueueLeastPages pages (2 x 4096 bytes = 410 units of 20 bytes) are pending."""
    clock, disk = FakeClock(), Disk()
    fs = _service(disk, clock, logics_interval_ms=250, logics_least_pages=2,
                  logics_thorough_ms=600_000)
    disk.logics = 400 * 20  # 8000 bytes: under 2 pages
    clock.advance(0.25)
    fs.tick()
    assert disk.logics_flushes == 0
    disk.logics = 410 * 20  # 8200 bytes: 2 pages
    clock.advance(0.125)  # the interval has not passed since the last round
    fs.tick()
    assert disk.logics_flushes == 0
    clock.advance(0.125)
    fs.tick()
    assert (disk.logics_flushes, disk.logics) == (1, 0)


def test_consume_queues_flush_whole_once_the_thorough_interval_passed():
    """Under flushConsumeQueueLeastPages, pending units are flushed once
    flushConsumeQueueThoroughInterval (1000 ms) passed since the last thorough flush."""
    clock, disk = FakeClock(), Disk()
    fs = _service(disk, clock, logics_interval_ms=250, logics_least_pages=2,
                  logics_thorough_ms=1000)
    disk.logics = 20
    for _ in range(3):
        clock.advance(0.25)
        fs.tick()
    assert disk.logics_flushes == 0
    clock.advance(0.25)  # 1000 ms
    fs.tick()
    assert disk.logics_flushes == 1
    disk.logics = 20
    clock.advance(0.25)
    fs.tick()
    assert disk.logics_flushes == 1
