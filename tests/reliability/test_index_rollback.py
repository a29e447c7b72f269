"""Abnormal recovery rolls the index back to the recovery start point (IndexService.truncate).

The rolled-back index must hold exactly the bytes an index built from only the records before
that point holds (built here by ``store.rebuild`` from a CommitLog cut at the point), whether the
forgotten entries are intact (kill -9) or torn to zeros (lost pages after a power loss).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from durability_check import SETTINGS, commitlog_records, message_for

from rocketlake.store import Message, MessageStore
from rocketlake.store.commitlog import CommitLog
from rocketlake.store.config import load_config
from rocketlake.store.index import IndexService
from rocketlake.store.single_process_rebuild import rebuild

SLOTS, ENTRIES = SETTINGS["maxHashSlotNum"], SETTINGS["maxIndexNum"]
ENTRIES_AT = 40 + 4 * SLOTS


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("rollback") / "store"
    with MessageStore(root, **SETTINGS) as ms:
        for i in range(5000):  # 2.5 index files
            key = f"x{i % 3100}"  # repeated keys: chains through older entries
            topic, qid, tags, body = message_for(key)
            ms.put(Message(topic, body[:40], queue_id=qid, tags=tags, keys=key))
    return root


def index_bytes(root: Path) -> list[bytes]:
    return [p.read_bytes() for p in sorted((root / "index").iterdir())]


@pytest.mark.parametrize("torn", [False, True])
@pytest.mark.parametrize("nth", [1, 1500, 2600, 4999])
def test_rollback_equals_an_index_of_the_records_before(store: Path, tmp_path: Path, nth: int,
                                                        torn: bool) -> None:
    records, _ = commitlog_records(store, SETTINGS["mappedFileSizeCommitLog"])
    offset = records[nth].commitlog_offset
    # Reference: the index rebuilt from a copy whose CommitLog ends at ``offset``.
    cut = tmp_path / "cut"
    shutil.copytree(store / "commitlog", cut / "commitlog")
    cl = SETTINGS["mappedFileSizeCommitLog"]
    for p in sorted((cut / "commitlog").iterdir()):
        start = int(p.name)
        if start >= offset:
            p.write_bytes(bytes(cl))
        elif start + cl > offset:
            data = bytearray(p.read_bytes())
            data[offset - start:] = bytes(cl - (offset - start))
            p.write_bytes(bytes(data))
    ref = tmp_path / "ref"
    rebuild(cut, ref, consume_queue=False, index=True, **SETTINGS)

    work = tmp_path / "work"
    shutil.copytree(store / "index", work / "index")
    if torn:  # every entry at or past the offset reads as zeros
        for p in sorted((work / "index").iterdir()):
            data = bytearray(p.read_bytes())
            for i in range(1, ENTRIES):
                at = ENTRIES_AT + 20 * i
                if int.from_bytes(data[at + 4:at + 12], "big") >= offset:
                    data[at:at + 20] = bytes(20)
            p.write_bytes(bytes(data))
    idx = IndexService(work, SLOTS, ENTRIES)
    idx.load()
    log = CommitLog(store, load_config(SETTINGS))
    log.files.load()
    dropped = idx.truncate(offset, lambda at: log.read(at).store_timestamp)
    log.close()
    idx.close()
    assert index_bytes(work) == index_bytes(ref)
    assert dropped == _entries_at_or_past(store, offset)


def _entries_at_or_past(root: Path, offset: int) -> int:
    """Entries of the index files under ``root`` for CommitLog offsets at or past ``offset``,
    read from their bytes (SPEC.md: header indexCount at 36, entries of 20 bytes from
    ``ENTRIES_AT``, the first unused, the CommitLog offset at 4 in each)."""
    n = 0
    for data in index_bytes(root):
        count = int.from_bytes(data[36:40], "big")
        n += sum(int.from_bytes(data[at + 4:at + 12], "big") >= offset
                 for at in range(ENTRIES_AT + 20, ENTRIES_AT + 20 * count, 20))
    return n


def test_a_file_a_crash_left_half_deleted_goes_at_the_next_writer_open(store: Path, tmp_path: Path) -> None:
    """An index file being deleted is renamed ``.<name>.deleting`` at once and unlinked on a
    thread; should the process die in between, the next writer deletes it (a reader leaves it,
    and nothing else hidden is touched: another name, a link)."""
    work = tmp_path / "store"
    shutil.copytree(store, work)
    kept = sorted((work / "index").iterdir())
    left = work / "index" / f".{kept[0].name}.deleting"
    shutil.copyfile(kept[0], left)
    others = [work / "index" / ".someone-elses", work / "index" / ".notes.deleting",
              work / "index" / f".{kept[-1].name}.deleting"]  # the last: a link, no file of ours
    others[0].write_bytes(b"not ours")
    others[1].write_bytes(b"not ours")
    others[2].symlink_to(others[0])
    before = index_bytes(work)
    with MessageStore(work, read_only=True, **SETTINGS):
        pass
    assert index_bytes(work) == before
    with MessageStore(work, **SETTINGS):
        pass
    assert not left.exists()
    assert sorted((work / "index").iterdir()) == sorted([*kept, *others])
    assert [p.read_bytes() for p in others] == [b"not ours"] * 3
    assert [p.read_bytes() for p in kept] == [store_file.read_bytes()
                                              for store_file in sorted((store / "index").iterdir())]


def test_a_deletion_leaves_a_link_where_it_would_hide_the_file(store: Path, tmp_path: Path) -> None:
    """The hidden name a deleted file takes meanwhile is already a link (someone's, pointing out
    of the store): the file is deleted at once, and the link and what it points at stay."""
    work = tmp_path / "work"
    shutil.copytree(store / "index", work / "index")
    files = sorted((work / "index").iterdir())
    assert len(files) == 3
    outside = tmp_path / "outside"
    outside.write_bytes(b"not ours")
    link = work / "index" / f".{files[-1].name}.deleting"
    link.symlink_to(outside)
    idx = IndexService(work, SLOTS, ENTRIES)
    idx.load(writer=True)
    records, _ = commitlog_records(store, SETTINGS["mappedFileSizeCommitLog"])
    log = CommitLog(store, load_config(SETTINGS))
    log.files.load()
    idx.truncate(records[1].commitlog_offset, lambda at: log.read(at).store_timestamp)
    log.close()
    idx.close()
    assert sorted((work / "index").iterdir()) == sorted([files[0], link])
    assert link.is_symlink() and outside.read_bytes() == b"not ours"
