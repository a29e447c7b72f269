"""A bulk output (``safe_files.bulk_output``: a rebuild's tree written aside, made durable once
at its end) keeps the rule for every file it creates: a link at a file's name is refused, an
existing file is never overwritten, nothing outside the output changes; and only files inside
the output skip their own fsync."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from rocketlake.store import LinkedFileError, codec
from rocketlake.store.mapped_file import MappedFile
from rocketlake.store.safe_files import bulk_output, create_file, deferred
from tests.test_safe_files import REFUSED, outside


def test_a_link_or_a_file_at_a_new_name_in_a_bulk_output_is_refused_and_nothing_outside_changes(
        tmp_path: Path) -> None:
    out = tmp_path / "out"
    qdir = out / "consumequeue" / "orders" / "0"
    qdir.mkdir(parents=True)
    victim = tmp_path / "victim"
    victim.write_bytes(b"outside")
    (qdir / codec.format_file_name(0)).symlink_to(victim)
    (qdir / codec.format_file_name(600)).symlink_to(tmp_path / "dangling")  # would create outside
    (qdir / codec.format_file_name(1200)).write_bytes(b"there before")
    before = outside(tmp_path, out)
    with bulk_output(out):
        for start in (0, 600):
            path = qdir / codec.format_file_name(start)
            with pytest.raises(LinkedFileError, match=f"{path}: {REFUSED}"):
                MappedFile(path, start, 600, create=True)
        with pytest.raises(FileExistsError, match=f"{qdir / codec.format_file_name(1200)}"):
            create_file(qdir / codec.format_file_name(1200), 600)
        made = qdir / codec.format_file_name(1800)
        os.close(create_file(made, 600))
    assert outside(tmp_path, out) == before
    assert victim.read_bytes() == b"outside" and not (tmp_path / "dangling").exists()
    assert (qdir / codec.format_file_name(1200)).read_bytes() == b"there before"
    assert made.read_bytes() == bytes(600)
    assert sorted(p.name for p in qdir.iterdir()) == [codec.format_file_name(s)
                                                      for s in (0, 600, 1200, 1800)]


def test_only_files_inside_a_bulk_output_skip_their_own_fsync(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    out, sibling = tmp_path / "out", tmp_path / "out-2"
    out.mkdir()
    monkeypatch.chdir(tmp_path)
    assert not deferred(out / "a")
    with bulk_output(out):
        assert deferred(out / "consumequeue" / "t" / "0" / codec.format_file_name(0))
        assert deferred("out/index/x")  # relative to the working directory
        assert not deferred(sibling / "a")  # a name that only starts like the output's
        assert not deferred(out)  # the output's own name is in its parent
        assert not deferred(tmp_path / "store" / "checkpoint")
        with bulk_output(out / "index"):  # nested: both are outputs
            assert deferred(out / "index" / "f") and deferred(out / "consumequeue" / "f")
        assert deferred(out / "index" / "f")
    assert not deferred(out / "consumequeue" / "t" / "0" / codec.format_file_name(0))
    with pytest.raises(RuntimeError, match="stopped"):
        with bulk_output(out):
            raise RuntimeError("stopped")
    assert not deferred(out / "a")  # a failed block leaves the per-file rule in force
