"""Every file a command writes into a store is refused when it is a symbolic link (the one rule,
``store.safe_files``), and replacing a config file keeps its old backup through any failure.

Each link test moves a store file out of the store (or points a dangling link out of it), runs
the command that writes that file, and checks the command refuses naming the path (exit 3: the
store is unusable as it is) and that nothing outside the store changed.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from rocketlake.jobs.cli import main
from rocketlake.store import LinkedFileError, Message, MessageStore, StoreFullError, codec
from rocketlake.store.config_files import write_config, write_consumer_offsets
from rocketlake.store.consume_queue import write_consume_queue_files
from rocketlake.store.safe_files import write_whole

SMALL = dict(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=200, maxHashSlotNum=16,
             maxIndexNum=20)
SETS = [arg for k, v in SMALL.items() for arg in ("--set", f"{k}={v}")]
REFUSED = "is a symbolic link; refusing to write through it"
OFFSETS = "config/consumerOffset.json"


def outside(tmp_path: Path, store: Path) -> dict[str, bytes | str | None]:
    """Every path under ``tmp_path`` outside ``store``: its bytes, a link's target, or None for
    a directory."""
    out: dict[str, bytes | str | None] = {}
    for dirpath, dirnames, filenames in os.walk(tmp_path):
        here = Path(dirpath)
        dirnames[:] = [d for d in dirnames if here / d != store]
        for name in dirnames + filenames:
            p = here / name
            out[str(p.relative_to(tmp_path))] = (os.readlink(p) if p.is_symlink() else
                                                  p.read_bytes() if p.is_file() else None)
    return out


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    """A closed store with messages in two queues, their index keys and a group's offsets (so a
    first and a backup consumerOffset.json), and an event file to ingest."""
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put_batch([Message("orders", b"a", keys="k1", queue_id=0),
                      Message("orders", b"b", keys="k2", queue_id=1)])
        ms.commit_offsets("g1", "orders", {0: 0, 1: 0})
        ms.commit_offsets("g1", "orders", {0: 1})
    (tmp_path / "events.jsonl").write_text('{"topic": "orders", "body": "c", "keys": "k3"}\n')
    return root


def _link_out(tmp_path: Path, path: Path) -> None:
    """Replace ``path`` by a link to a file outside the store holding its bytes (a dangling link
    out of the store when ``path`` does not exist)."""
    target = tmp_path / f"victim-{path.name}"
    if path.exists():
        path.rename(target)
    path.symlink_to(target)


def _writer(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(LinkedFileError) as e:
        with MessageStore(store, **SMALL) as ms:
            ms.put(Message("orders", b"x", queue_id=0))
    return str(e.value)


def _ingest(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    assert main(["ingest", "--store", str(store), *SETS, str(tmp_path / "events.jsonl")]) == 3
    return capsys.readouterr().err


def _reset(store: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["offsets", "reset", "--store", str(store), *SETS, "--group", "g1",
                 "--topic", "orders", "--to-offset", "0", "--execute"]) == 3
    return capsys.readouterr().err


def _last_index(store: Path) -> str:
    return f"index/{max(p.name for p in (store / 'index').iterdir())}"


@pytest.mark.parametrize("name, command", [
    ("checkpoint", _writer),
    ("lock", _writer),
    ("abort", _writer),  # a dangling link: the file would be created outside
    ("commitlog/" + codec.format_file_name(0), _writer),
    ("consumequeue/orders/0/" + codec.format_file_name(0), _writer),
    ("index", _ingest),  # the last index file, which ingest writes keys into
    (OFFSETS, _reset),
    (OFFSETS + ".bak", _reset),
    (OFFSETS + ".tmp", _reset),  # a dangling link: the file would be created outside
])
def test_a_store_file_that_is_a_link_is_refused_and_nothing_outside_changes(
        tmp_path: Path, store: Path, capsys: pytest.CaptureFixture[str], name: str, command) -> None:
    path = store / (_last_index(store) if name == "index" else name)
    _link_out(tmp_path, path)
    before = outside(tmp_path, store)
    message = command(store, tmp_path, capsys)
    assert f"{path}: {REFUSED}" in message
    assert outside(tmp_path, store) == before
    assert path.is_symlink()


@pytest.mark.parametrize("name", ["checkpoint", "config/topics.json"])
def test_a_directory_where_a_store_file_belongs_is_named(tmp_path: Path, store: Path, capsys, name) -> None:
    """A writer reads the checkpoint and topics.json before it replaces them: a directory there
    is an error naming it (it said 'Is a directory: 6', the descriptor), and nothing changes.
    (topics.json is read from its .bak, which the writer would keep as it replaces the file.)"""
    (store / f"{name}.bak").write_bytes((store / name).read_bytes())
    (tmp_path / "events.jsonl").write_text('{"topic": "payments", "body": "c"}\n')  # to declare
    (store / name).unlink()
    (store / name).mkdir()
    (store / name / "keep").write_text("someone's")
    before = outside(tmp_path, tmp_path / "none")
    message = _ingest(store, tmp_path, capsys)
    assert f"{store / name}: is a directory where a store file belongs" in message
    assert outside(tmp_path, tmp_path / "none") == before


def test_a_directory_at_a_config_backup_name_is_refused_before_anything_is_written(
        tmp_path: Path, store: Path, capsys) -> None:
    """offsets reset replaces consumerOffset.json and its .bak by renames: a directory at the
    .bak failed the rename with '[Errno 21] Is a directory: 'consumerOffset.json.bak.tmp' ->
    ...' (no directory named) and left both .tmp files in config/."""
    name = OFFSETS + ".bak"
    (store / name).unlink()
    (store / name).mkdir()
    (store / name / "keep").write_text("someone's")
    before = outside(tmp_path, tmp_path / "none")
    assert f"{store / name}: is a directory where a store file belongs" in _reset(store, tmp_path, capsys)
    assert outside(tmp_path, tmp_path / "none") == before


def test_a_config_directory_that_is_a_link_is_refused(tmp_path: Path, store: Path) -> None:
    (store / "config").rename(tmp_path / "victim-config")
    (store / "config").symlink_to(tmp_path / "victim-config")
    before = outside(tmp_path, store)
    with pytest.raises(LinkedFileError, match=f"{store / 'config'}: {REFUSED}"):
        write_consumer_offsets(store, {("orders", "g1"): {0: 0}})
    assert outside(tmp_path, store) == before


def test_a_leftover_tmp_file_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "config" / "topics.json"
    write_config(path, {"a": 1})
    (tmp_path / "config" / "topics.json.tmp").write_bytes(b"{ cut sh")  # an interrupted write
    write_config(path, {"a": 2})
    assert path.read_text() == '{\n\t"a":2\n}'
    assert path.with_name("topics.json.bak").read_text() == '{\n\t"a":1\n}'
    assert sorted(p.name for p in path.parent.iterdir()) == ["topics.json", "topics.json.bak"]


# --- a full disk ---------------------------------------------------------------------------------
def _fill(directory: Path) -> None:
    """Take every free byte of the file system ``directory`` is on."""
    fd = os.open(directory / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        for chunk in (65536, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\xff" * chunk)
            except OSError:
                pass
    finally:
        os.close(fd)


def test_offsets_reset_on_a_full_disk_keeps_the_old_backup(small_fs: Path, capsys) -> None:
    root = small_fs / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put_batch([Message("orders", b"a", queue_id=0), Message("orders", b"b", queue_id=1)])
        ms.commit_offsets("g1", "orders", {0: 0, 1: 0})
        ms.commit_offsets("g1", "orders", {0: 1, 1: 1})
    config = root / "config"
    main_bytes = (config / "consumerOffset.json").read_bytes()
    bak_bytes = (config / "consumerOffset.json.bak").read_bytes()
    assert b"{0:1,1:1" in main_bytes and b"{0:0,1:0" in bak_bytes  # fastjson's int keys
    _fill(small_fs)
    assert main(["offsets", "reset", "--store", str(root), *SETS, "--group", "g1",
                 "--topic", "orders", "--to-offset", "0", "--execute"]) == 3
    err = capsys.readouterr().err
    assert f"{config / 'consumerOffset.json'}" in err and "no space left on device" in err
    assert (config / "consumerOffset.json").read_bytes() == main_bytes
    assert (config / "consumerOffset.json.bak").read_bytes() == bak_bytes
    assert sorted(p.name for p in config.iterdir()) == ["consumerOffset.json",
                                                        "consumerOffset.json.bak", "topics.json"]


def test_replacing_a_config_file_on_a_full_disk_raises_store_full(small_fs: Path) -> None:
    path = small_fs / "config" / "topics.json"
    write_config(path, {"a": 1})
    write_config(path, {"a": 2})
    _fill(small_fs)
    with pytest.raises(StoreFullError, match=f"{path.parent}/topics.json"):
        write_config(path, {"a": "x" * 8192})
    assert path.read_text() == '{\n\t"a":2\n}'
    assert path.with_name("topics.json.bak").read_text() == '{\n\t"a":1\n}'
    assert sorted(p.name for p in path.parent.iterdir()) == ["topics.json", "topics.json.bak"]


def _one_page_free(directory: Path) -> None:
    """Fill the file system ``directory`` is on but for one 4096-byte page: a write of more then
    takes 4096 bytes and returns that count, without an error."""
    _fill(directory)
    filler = directory / "filler"
    os.truncate(filler, filler.stat().st_size - 4096 - filler.stat().st_size % 4096)


def test_a_whole_file_that_the_disk_cuts_short_is_an_error_not_a_short_file(small_fs: Path) -> None:
    """The rest of the 20,000 bytes must be written (and fail), not dropped."""
    _one_page_free(small_fs)
    path = small_fs / "rebuild.pending"
    with pytest.raises(StoreFullError, match=f"{path}: no space left on device writing a journal"):
        write_whole(path, b"x" * 20_000, "writing a journal")
    assert sorted(p.name for p in small_fs.iterdir()) == ["filler"]


def test_a_rebuilt_consumequeue_file_the_disk_cuts_short_is_an_error(small_fs: Path) -> None:
    """A new 12,000-byte ConsumeQueue file is written whole in one write (``WHOLE_WRITE``): with
    4096 bytes left that write is cut short, which must fail naming the file, not leave a
    4096-byte file a rebuild counts as written."""
    _one_page_free(small_fs)
    qdir = small_fs / "consumequeue" / "orders" / "0"
    qdir.mkdir(parents=True)
    units = np.zeros(10, dtype=codec.CQ_UNIT_DTYPE)
    with pytest.raises(StoreFullError, match=f"{qdir / ('0' * 20)}: no space left on device"):
        write_consume_queue_files(qdir, np.arange(10), units, 20 * 600, made=True)
