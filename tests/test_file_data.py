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
    assert helper.results() == expected


def test_many_directories_are_read_in_order_with_the_helper_taking_a_share(many) -> None:
    paths, expected = many
    assert read_one_file_dirs(paths, *ARGS) == expected


def test_a_helper_that_cannot_run_leaves_its_share_to_this_process(many, monkeypatch) -> None:
    paths, expected = many
    monkeypatch.setattr(sys, "executable", "/bin/false")  # starts, exits 1, answers nothing
    assert file_data._Helper(paths, ARGS).results() is None
    assert read_one_file_dirs(paths, *ARGS) == expected
    monkeypatch.setattr(sys, "executable", os.fspath(Path(paths[0]) / "no-such-interpreter"))
    assert read_one_file_dirs(paths, *ARGS) == expected
