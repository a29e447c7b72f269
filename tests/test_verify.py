"""`rocketlake verify` finds each kind of corruption, names file and offset, and changes nothing."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from goldens import GOLDEN_498
from rocketlake.jobs.cli import main
from rocketlake.store import Message, MessageStore
from rocketlake.store.verify import verify

SMALL = dict(mappedFileSizeCommitLog=8192, mappedFileSizeConsumeQueue=200, maxHashSlotNum=32,
             maxIndexNum=50)


def _tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put_batch([Message(f"t{i % 2}", f"body-{i}".encode() * 3, i % 3, tags="A", keys=f"k{i}")
                      for i in range(200)])
        ms.commit_offsets("g", "t0", {0: 5})
    return root


def _flip(path: Path, at: int) -> None:
    raw = bytearray(path.read_bytes())
    raw[at] ^= 0x40
    path.write_bytes(bytes(raw))


def test_clean_stores_pass(store, golden_store, golden_settings):
    assert verify(store, **SMALL).ok
    r = verify(golden_store, **golden_settings)
    assert r.ok and (r.records, r.units, r.index_keys) == (400, 374, 1161)


def test_body_bit_flip_is_found_with_file_and_offset(store):
    first = store / "commitlog/00000000000000000000"
    from rocketlake.store import codec
    rec = codec.decode_record(first.read_bytes(), 0)
    second = rec.size  # the second record starts here; flip a byte of its body
    _flip(first, second + 90)
    before = _tree_digest(store)
    r = verify(store, **SMALL)
    assert not r.ok
    crc = [p for p in r.problems if "CRC" in p.what]
    assert crc and crc[0].file == "commitlog/00000000000000000000" and crc[0].offset == second
    assert _tree_digest(store) == before  # verify is read-only


def test_garbage_after_end_of_data(store):
    last = sorted((store / "commitlog").iterdir())[-1]
    raw = bytearray(last.read_bytes())
    end = len(raw.rstrip(b"\0"))
    raw[end + 100:end + 104] = b"\x01\x02\x03\x04"
    last.write_bytes(bytes(raw))
    r = verify(store, **SMALL)
    assert any(p.offset == end + 100 and "after the end of valid data" in p.what for p in r.problems)


def test_consumequeue_unit_and_missing_queue(store):
    cq = store / "consumequeue/t0/0/00000000000000000000"
    _flip(cq, 20 * 3 + 19)  # tagsCode of unit 3
    r = verify(store, **SMALL)
    assert any(p.file == "consumequeue/t0/0/00000000000000000000" and p.offset == 60 for p in r.problems)
    for f in (store / "consumequeue/t1/2").iterdir():
        f.unlink()
    (store / "consumequeue/t1/2").rmdir()
    r = verify(store, **SMALL)
    assert any(p.file == "consumequeue/t1/2" and "queue missing" in p.what for p in r.problems)


def test_index_entry_corruption_is_found(store):
    idx = sorted((store / "index").iterdir())[0]
    entries_at = 40 + 32 * 4
    raw = bytearray(idx.read_bytes())
    raw[entries_at + 20 + 4: entries_at + 20 + 12] = (10 ** 12).to_bytes(8, "big")  # entry 1's phyOffset
    idx.write_bytes(bytes(raw))
    r = verify(store, **SMALL)
    assert any(p.file == "index" and "not found through the index" in p.what for p in r.problems)


def test_checkpoint_and_config_problems(store):
    (store / "checkpoint").write_bytes(b"\0" * 100)
    (store / "config/consumerOffset.json").write_text("{nope")
    (store / "config/consumerOffset.json.bak").unlink(missing_ok=True)
    r = verify(store, **SMALL)
    whats = {(p.file, p.severity) for p in r.problems}
    assert ("checkpoint", "error") in whats
    assert ("config/consumerOffset.json", "error") in whats


def test_cli_exit_codes_and_json(store, capsys):
    assert main(["verify", "--store", str(store), *sum((["--set", f"{k}={v}"] for k, v in SMALL.items()), [])]) == 0
    capsys.readouterr()
    _flip(store / "commitlog/00000000000000000000", 100)
    args = ["verify", "--store", str(store), "--json", *sum((["--set", f"{k}={v}"] for k, v in SMALL.items()), [])]
    assert main(args) == 3
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and report["problems"][0]["file"] == "commitlog/00000000000000000000"
    assert main(["verify", "--store", str(store.parent / "nowhere")]) == 3
