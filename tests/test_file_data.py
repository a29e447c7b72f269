"""``file_data.read_one_file_dirs``: many one-file directories read in bulk, a share of them by a
helper process, with the answers ``read_one_file_dir`` gives each (expected values built here
from what each directory was given)."""
from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from rocketlake.store import file_data
from rocketlake.store.file_data import HELPED, read_one_file_dir, read_one_file_dirs

FILE, UNIT, DIGITS = 61440, 20, 20  # 15 pages, 3,072 units
MAX_BYTES = 20480  # 5 pages, 1,024 units
NAME = f"{FILE * 3:020d}"
ARGS = (FILE, UNIT, MAX_BYTES, DIGITS)


def _unit(k: int) -> bytes:
    return bytes([k % 251 + 1]) * UNIT


def _file(qdir: Path, data: bytes, name: str = NAME, size: int = FILE) -> None:
    with open(qdir / name, "wb") as f:
        f.write(data)
        f.truncate(size)


def _units(qdir: Path, n: int) -> tuple[str, bytes]:
    data = b"".join(_unit(k) for k in range(n))
    _file(qdir, data)
    return NAME, data


def _torn(qdir: Path) -> tuple[str, bytes]:  # a zeroed unit does not hide the one after it
    data = _unit(1) + bytes(UNIT) + _unit(2)
    _file(qdir, data)
    return NAME, data


def _hidden_beside(qdir: Path) -> tuple[str, bytes]:
    (qdir / ".tmp").write_bytes(b"x")
    return _units(qdir, 2)


def _two_files(qdir: Path) -> None:
    _units(qdir, 1)
    _file(qdir, _unit(9), name=f"{FILE * 4:020d}")


def _link(qdir: Path) -> None:
    target = qdir.parent / f"{qdir.name}-target"
    _file(target.parent, _unit(3), name=target.name)
    os.symlink(target, qdir / NAME)


CASES: list[Callable[[Path], tuple[str, bytes] | None]] = [
    lambda q: _units(q, 3),
    lambda q: _units(q, 0),  # a file with no unit yet
    _torn,
    lambda q: ("", b""),  # no file
    lambda q: (q / ".only-hidden").write_bytes(b"x") and ("", b""),
    _hidden_beside,
    lambda q: _two_files(q),
    lambda q: _file(q, _unit(1), size=FILE + UNIT),  # not the file size
    lambda q: _file(q, _unit(1), name="123"),  # not a store file's name
    lambda q: _file(q, _unit(1), name=f"{FILE + 1:020d}"),  # no multiple of the file size
    lambda q: _file(q, _unit(1), name="\u0660" * DIGITS),  # digits, but not ASCII ones
    lambda q: _link(q),
    lambda q: _file(q, _unit(4) * (MAX_BYTES // UNIT + 1)),  # more data than asked for
    lambda q: _units(q, MAX_BYTES // UNIT - 1),
]


def _dirs(root: Path, n: int) -> tuple[list[str], list[tuple[str, bytes] | None]]:
    """``n`` directories cycling through ``CASES``, and what each should read as."""
    paths, expected = [], []
    for i in range(n):
        qdir = root / f"t{i // 10}" / str(i % 10)
        qdir.mkdir(parents=True)
        expected.append(CASES[i % len(CASES)](qdir) or None)
        paths.append(os.fspath(qdir))
    return paths, expected


@pytest.fixture(autouse=True)
def _sparse_files(tmp_path: Path) -> None:
    """The expected values assume a file system that reports holes (``SEEK_HOLE``)."""
    probe = tmp_path / "probe"
    with open(probe, "wb") as f:
        f.write(b"x")
        f.truncate(FILE)
    with open(probe, "rb") as f:
        if os.lseek(f.fileno(), 0, os.SEEK_HOLE) >= FILE:
            pytest.skip("this file system reports no holes")
    probe.unlink()


def test_each_kind_of_directory_reads_as_the_checked_load_expects(tmp_path: Path) -> None:
    paths, expected = _dirs(tmp_path, len(CASES))
    assert [read_one_file_dir(p, *ARGS) for p in paths] == expected
    assert read_one_file_dir(os.fspath(tmp_path / "gone"), *ARGS) is None


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], list[tuple[str, bytes] | None]]:
    return _dirs(tmp_path_factory.mktemp("dirs"), HELPED + 3 * len(CASES))


def test_the_helper_process_answers_what_each_directory_holds(many) -> None:
    paths, expected = many
    helper = file_data._Helper(paths, ARGS)
    assert helper.results(60) == expected


def test_many_directories_are_read_in_order_with_the_helper_taking_a_share(many) -> None:
    paths, expected = many
    assert read_one_file_dirs(paths, *ARGS) == expected


def test_a_helper_that_cannot_run_leaves_its_share_to_this_process(many, monkeypatch) -> None:
    paths, expected = many
    monkeypatch.setattr(sys, "executable", "/bin/false")  # starts, exits 1, answers nothing
    assert file_data._Helper(paths, ARGS).results(60) is None
    assert read_one_file_dirs(paths, *ARGS) == expected
    monkeypatch.setattr(sys, "executable", os.fspath(Path(paths[0]) / "no-such-interpreter"))
    assert read_one_file_dirs(paths, *ARGS) == expected


def test_a_helper_that_answers_nothing_whole_leaves_its_share_to_this_process(many, monkeypatch) -> None:
    paths, expected = many
    monkeypatch.setattr(sys, "executable", "/bin/true")  # exits 0 without a word
    assert file_data._Helper(paths, ARGS).results(60) is None
    assert read_one_file_dirs(paths, *ARGS) == expected


def test_a_helper_that_hangs_is_stopped_and_its_share_read_here(many, monkeypatch, tmp_path) -> None:
    paths, expected = many
    hang = tmp_path / "hang"
    hang.write_text("#!/bin/sh\nexec sleep 60\n")
    hang.chmod(0o755)
    monkeypatch.setattr(sys, "executable", os.fspath(hang))
    helper = file_data._Helper(paths, ARGS)
    assert helper.results(0.2) is None
    assert helper.proc is not None and helper.proc.returncode is not None  # stopped and reaped
    monkeypatch.setattr(file_data, "HELPER_PATIENCE", 0.2)
    assert read_one_file_dirs(paths, *ARGS) == expected


def test_an_answer_cut_short_or_changed_anywhere_is_refused() -> None:
    found = [(NAME, _unit(1) * 2), None, ("", b""), ("0" * DIGITS, b"")]
    whole = b"".join(file_data._frame(f) for f in found) + file_data._trailer(len(found))
    assert file_data._unframe(whole, len(found)) == found
    for cut in range(len(whole)):
        assert file_data._unframe(whole[:cut], len(found)) is None, cut
    assert file_data._unframe(whole, len(found) + 1) is None
    for bad in (b"\2" + whole[1:],  # no such frame
                whole.replace(NAME.encode(), b"x" * DIGITS, 1),  # a name that is no number
                whole.replace(file_data.TRAILER, b"another answer".ljust(len(file_data.TRAILER)))):
        assert file_data._unframe(bad, len(found)) is None
