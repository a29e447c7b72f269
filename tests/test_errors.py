"""One error hierarchy, whole config objects, and settings that act (syncFlushTimeout)."""
from __future__ import annotations

import ast
import errno
import struct
import threading
import time
from pathlib import Path

import pytest

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
        raw = ms.commitlog.read(p.commitlog_offset)
        mf = ms.commitlog.files.find(p.commitlog_offset)
        raw = bytes(mf.mm[p.commitlog_offset - mf.start: p.commitlog_offset - mf.start + raw.size])
    write_segment(root, "state", [KeptRecord(0, 0, raw)], p.commitlog_offset + p.size, cfg)
    seg = segment_path(root, "state")
    assert (seg / "commitlog").is_dir() and not (seg / "index").exists()
    assert verify(seg, cfg).ok
    stats = rebuild(root, tmp_path / "out", config=cfg)
    index_files = list((tmp_path / "out" / "index").iterdir())
    # IndexFile: 40-byte header + maxHashSlotNum 4-byte slots + maxIndexNum 20-byte entries
    assert stats.records == 1 and [f.stat().st_size for f in index_files] == [40 + 16 * 4 + 20 * 20]


# --- syncFlushTimeout acts --------------------------------------------------------------------------
def _hold_flusher(ms: MessageStore, seconds: float) -> threading.Thread:
    """Hold off every flush of ``ms`` for ``seconds`` from another thread; returns once held."""
    held = threading.Event()

    def hold() -> None:
        with ms.flusher.exclusive():
            held.set()
            time.sleep(seconds)
    t = threading.Thread(target=hold)
    t.start()
    assert held.wait(5)
    return t


@pytest.mark.parametrize("how", ["put", "put_batch", "put_records"])
def test_sync_put_that_cannot_flush_in_time_reports_flush_disk_timeout(tmp_path, how):
    """SYNC_FLUSH waits at most syncFlushTimeout (200 ms) for durability (CommitLog.handleDiskFlush);
    the message is stored all the same and readable."""
    with MessageStore(tmp_path / "src", **SMALL) as src:
        src_put = src.put(Message("T", b"copied"))
        mf = src.commitlog.files.find(src_put.commitlog_offset)
        raw = bytes(mf.mm[:src_put.size])
    with MessageStore(tmp_path / "s", flushDiskType="SYNC_FLUSH", syncFlushTimeout=200, **SMALL) as ms:
        def do_put() -> list:
            if how == "put":
                return [ms.put(Message("T", b"copied"))]
            if how == "put_batch":
                return ms.put_batch([Message("T", b"copied"), Message("T", b"copied")])
            return ms.put_records([raw])
        assert [r.status for r in do_put()] == [PutStatus.PUT_OK] * (2 if how == "put_batch" else 1)
        holder = _hold_flusher(ms, 1.5)
        t0 = time.monotonic()
        results = do_put()
        waited = time.monotonic() - t0
        holder.join()
        assert all(r.status is PutStatus.FLUSH_DISK_TIMEOUT for r in results)
        assert 0.2 <= waited < 1.4
        got = ms.get("T", 0, results[0].queue_offset)
        assert got.status is GetStatus.FOUND and got.messages[0].record.body == b"copied"
        ms.flush()
        assert ms.flusher.durable >= results[-1].commitlog_offset + results[-1].size
        assert ms.put(Message("T", b"later")).status is PutStatus.PUT_OK


def test_timed_out_bytes_are_flushed_by_the_background_thread(tmp_path):
    """What a producer gave up waiting for becomes durable without another put or a close."""
    with MessageStore(tmp_path / "s", flushDiskType="SYNC_FLUSH", syncFlushTimeout=100,
                      flushIntervalCommitLog=50, **SMALL) as ms:
        holder = _hold_flusher(ms, 0.5)
        r = ms.put(Message("T", b"x"))
        holder.join()
        assert r.status is PutStatus.FLUSH_DISK_TIMEOUT
        deadline = time.monotonic() + 5
        while ms.flusher.durable < r.commitlog_offset + r.size and time.monotonic() < deadline:
            time.sleep(0.02)
        assert ms.flusher.durable >= r.commitlog_offset + r.size


# --- flushConsumeQueueLeastPages / flushConsumeQueueThoroughInterval act ----------------------------
def _checkpoint_logics(root: Path) -> int:
    """logicsMsgTimestamp as saved on disk (StoreCheckpoint: physic, logics, index longs)."""
    path = root / "checkpoint"
    return struct.unpack_from(">q", path.read_bytes(), 8)[0] if path.exists() else 0


def _wait_for(cond, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)
    return cond()


def test_consume_queues_flush_once_least_pages_are_pending(tmp_path):
    """FlushConsumeQueueService: every flushIntervalConsumeQueue, flush only when
    flushConsumeQueueLeastPages pages (2 x 4096 bytes = 410 units of 20 bytes) are pending."""
    root = tmp_path / "s"
    with MessageStore(root, flushIntervalCommitLog=10, flushIntervalConsumeQueue=20,
                      flushConsumeQueueLeastPages=2, flushConsumeQueueThoroughInterval=600_000,
                      mappedFileSizeCommitLog=1 << 20, mappedFileSizeConsumeQueue=20 * 1000) as ms:
        ms.put_batch([Message("T", b"x")] * 400)   # 8000 bytes of units: under 2 pages
        time.sleep(0.3)
        assert _checkpoint_logics(root) == 0
        last = ms.put_batch([Message("T", b"x")] * 10)[-1]   # 8200 bytes: 2 pages
        assert _wait_for(lambda: _checkpoint_logics(root) == last.store_timestamp, 5)


def test_consume_queues_flush_whole_once_the_thorough_interval_passed(tmp_path):
    root = tmp_path / "s"
    with MessageStore(root, flushIntervalCommitLog=10, flushIntervalConsumeQueue=20,
                      flushConsumeQueueLeastPages=2, flushConsumeQueueThoroughInterval=300,
                      **SMALL) as ms:
        r = ms.put(Message("T", b"x"))
        assert _wait_for(lambda: _checkpoint_logics(root) == r.store_timestamp, 5)
