"""The pipeline's proof that the Spark rebuild wrote the store's files: ``same_files`` is true only
for two directories with the same relative paths, sizes and bytes, wherever a difference lies
(within the first read, past it, in the last partial read)."""
from __future__ import annotations

from pathlib import Path

import pytest

from rocketlake.jobs.cli import pipeline


def two_trees(tmp_path: Path, size: int) -> tuple[Path, Path]:
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        (root / "t" / "0").mkdir(parents=True)
        (root / "t" / "0" / "00000000000000000000").write_bytes(bytes(range(256)) * (size // 256))
        (root / "idx").write_bytes(b"\x00" * 100)
    return a, b


@pytest.mark.parametrize("at", [0, 4095, 4096, 10_000, 12_287])
def test_one_byte_anywhere_differs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, at: int) -> None:
    monkeypatch.setattr(pipeline, "COMPARE_BYTES", 4096)
    a, b = two_trees(tmp_path, 12_288)
    assert pipeline.same_files(a, b)
    f = b / "t" / "0" / "00000000000000000000"
    data = bytearray(f.read_bytes())
    data[at] ^= 1
    f.write_bytes(bytes(data))
    assert not pipeline.same_files(a, b)


def test_files_must_match_by_path_and_size(tmp_path: Path) -> None:
    a, b = two_trees(tmp_path, 1024)
    (b / "extra").write_bytes(b"")
    assert not pipeline.same_files(a, b)
    (b / "extra").unlink()
    (b / "idx").write_bytes(b"\x00" * 101)
    assert not pipeline.same_files(a, b)
    (b / "idx").write_bytes(b"\x00" * 100)
    assert pipeline.same_files(a, b)
