"""Kill -9 during a rebuild's swap (store.swap_journal): from every point, the next writer open
leaves `consumequeue/` and `index/` whole - the rebuilt ones once the journal was written, the
original ones before - with no leftover directories, their mode kept, and `verify` clean.

A child process makes the rebuild's directories aside (filled with a single-process rebuild of
the same CommitLog, so the bytes are known), runs the swap's first N steps and SIGKILLs itself.
The original and the rebuilt directories carry a marker file each (`.original`, `.rebuilt`: names
no reader of a store takes for a store file) to tell which of the two is live.
"""
from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from durability_check import SETTINGS, message_for

from rocketlake.jobs import cli, job_support
from rocketlake.store import Message, MessageStore
from rocketlake.store.errors import StoreFormatError
from rocketlake.store.single_process_rebuild import rebuild
from rocketlake.store.swap_journal import JOURNAL_NAME, STRUCTURES, aside, plan

SET = [a for k, v in SETTINGS.items() for a in ("--set", f"{k}={v}")]
#: 1 journal + 2 renames per structure + 1 delete per structure + 1 journal removal
STEPS = 1 + 2 * 2 + 2 + 1

CHILD = """
import os, shutil, signal, sys
from pathlib import Path
from rocketlake.store.swap_journal import STRUCTURES, aside, plan

root, ref, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
new = {name: aside(root, name) for name in STRUCTURES}
aside(root, "parts")  # a rebuild's staging, as the Spark rebuild makes it
for name, d in new.items():
    for src in sorted((ref / name).rglob("*")):
        dst = d / src.relative_to(ref / name)
        dst.mkdir() if src.is_dir() else shutil.copyfile(src, dst)
    (d / ".rebuilt").write_bytes(b"")
for step in plan(root, new).steps()[:n]:
    step.run()
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[Path, Path]:
    """A closed store with ConsumeQueues and index files, and its single-process rebuild."""
    base = tmp_path_factory.mktemp("swap")
    store, ref = base / "store", base / "ref"
    with MessageStore(store, **SETTINGS) as ms:
        for i in range(600):
            topic, qid, tags, body = message_for(f"k{i}")
            ms.put(Message(topic, body[:40], queue_id=qid, tags=tags, keys=f"k{i}"))
    rebuild(store, ref, **SETTINGS)
    return store, ref


def tree(d: Path) -> dict[str, bytes | None]:
    """Every path under ``d`` (a directory: None, a file: its bytes)."""
    return {str(p.relative_to(d)): None if p.is_dir() else p.read_bytes() for p in d.rglob("*")}


def copy_store(store: Path, to: Path) -> Path:
    shutil.copytree(store, to)
    for name in STRUCTURES:
        os.chmod(to / name, 0o755)
        (to / name / ".original").write_bytes(b"")
    return to


def run_child(root: Path, ref: Path, n: int) -> None:
    p = subprocess.run([sys.executable, "-c", CHILD, str(root), str(ref), str(n)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == -signal.SIGKILL, p.stderr


def test_the_swap_has_the_steps_counted_here(made: tuple[Path, Path], tmp_path: Path) -> None:
    root = copy_store(made[0], tmp_path / "s")
    assert len(plan(root, {n: aside(root, n) for n in STRUCTURES}).steps()) == STEPS


@pytest.mark.parametrize("n", range(STEPS + 1))
def test_a_writer_open_completes_a_swap_killed_after_any_step(made: tuple[Path, Path],
                                                             tmp_path: Path, n: int, capsys) -> None:
    store, ref = made
    root = copy_store(store, tmp_path / "s")
    names = sorted(os.listdir(root))
    run_child(root, ref, n)
    journaled = 1 <= n < STEPS
    assert (root / JOURNAL_NAME).exists() == journaled
    if journaled:  # a reader does not guess which structures are where
        with pytest.raises(StoreFormatError, match="rebuild was interrupted"):
            MessageStore(root, read_only=True, **SETTINGS)

    with MessageStore(root, **SETTINGS):
        pass

    assert sorted(os.listdir(root)) == names  # no journal, no rebuild or old directories left
    marker, other = (".rebuilt", ".original") if n >= 1 else (".original", ".rebuilt")
    for name in STRUCTURES:
        got = tree(root / name)
        assert got.pop(marker) == b"" and other not in got
        assert got == tree(ref / name)
        assert stat.S_IMODE((root / name).stat().st_mode) == 0o755
    assert cli.main(["verify", "--store", str(root), *SET]) == 0
    capsys.readouterr()


def test_verify_refuses_an_unfinished_swap_naming_its_journal(made: tuple[Path, Path],
                                                             tmp_path: Path, capsys) -> None:
    store, ref = made
    root = copy_store(store, tmp_path / "s")
    run_child(root, ref, 2)  # killed with consumequeue/ moved aside and not yet replaced
    assert not (root / "consumequeue").exists()
    assert cli.main(["verify", "--store", str(root), *SET]) == 3
    err = capsys.readouterr().err
    assert str(root / JOURNAL_NAME) in err and "rebuild was interrupted" in err


def test_a_rebuild_completes_a_killed_swap_before_it_starts(made: tuple[Path, Path],
                                                           tmp_path: Path) -> None:
    store, ref = made
    root = copy_store(store, tmp_path / "s")
    run_child(root, ref, 4)  # consumequeue/ swapped in, index/ moved aside
    seen: list[list[str]] = []

    @job_support.locks_store
    def rebuild_job(spark: object, store: Path, cfg: object, output: Path | None = None) -> None:
        seen.append(sorted(os.listdir(store)))

    rebuild_job(None, root, None)
    assert seen == [sorted(os.listdir(store))]
    assert ".rebuilt" in os.listdir(root / "index")


def test_only_what_a_rebuild_makes_is_deleted(made: tuple[Path, Path], tmp_path: Path) -> None:
    root = copy_store(made[0], tmp_path / "s")
    theirs = [".index.rebuild-keep", ".consumequeue.old-1234567", ".parts.old-abcdefgh",
              "index.rebuild-abcdefgh", ".consumequeue.rebuild-abcdefgh.x"]
    for name in theirs:
        (root / name).mkdir()
    (root / ".index.rebuild-abcdefgh").write_bytes(b"a file")  # not a directory
    ours = aside(root, "index")
    with MessageStore(root, **SETTINGS):
        pass
    assert not ours.exists()
    assert all((root / name).is_dir() for name in theirs)
    assert (root / ".index.rebuild-abcdefgh").read_bytes() == b"a file"


def test_a_rebuilt_directory_gets_the_mode_of_the_one_it_replaces(tmp_path: Path) -> None:
    (tmp_path / "index").mkdir()
    os.chmod(tmp_path / "index", 0o750)
    assert stat.S_IMODE(aside(tmp_path, "index").stat().st_mode) == 0o750
    assert stat.S_IMODE(aside(tmp_path, "consumequeue").stat().st_mode) == 0o755  # none there
    assert stat.S_IMODE(aside(tmp_path, "parts").stat().st_mode) == 0o755


def test_a_structure_an_unjournaled_swap_left_moved_aside_is_put_back(made: tuple[Path, Path],
                                                                      tmp_path: Path) -> None:
    """The swap before the journal moved `index/` into `.index.old-<id>/index`, then renamed the
    new directory in; killed between the two, the store had no `index/`."""
    root = copy_store(made[0], tmp_path / "s")
    names, original = sorted(os.listdir(root)), tree(root / "index")
    (root / ".index.old-abcd_123").mkdir()
    os.rename(root / "index", root / ".index.old-abcd_123" / "index")
    (root / ".index.rebuild-efgh_456").mkdir()  # the new one, left where it was written
    with MessageStore(root, **SETTINGS):
        pass
    assert sorted(os.listdir(root)) == names
    assert tree(root / "index") == original
