"""`rocketlake pipeline` never deletes what it did not make: it refuses a store, lake or rebuild
directory that holds someone else's files (exit status 2, the path named, nothing changed), before
any Spark session starts; it replaces only the sample directories it marked as its own."""
from __future__ import annotations

from pathlib import Path

import pytest

from rocketlake.jobs.cli import main, pipeline
from rocketlake.store import Message, MessageStore
from rocketlake.store.verify import verify

SMALL = {"mappedFileSizeCommitLog": 4096, "mappedFileSizeConsumeQueue": 200}


def real_store(root: Path) -> None:
    """A store the library wrote: 40 records over several CommitLog files."""
    with MessageStore(root, **SMALL) as ms:
        ms.put_batch([Message("orders", f"order-{i}".encode() * 20, i % 2, keys=f"k{i}")
                      for i in range(40)])


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def sets() -> list[str]:
    return [a for k, v in SMALL.items() for a in ("--set", f"{k}={v}")]


@pytest.fixture()
def real(tmp_path: Path) -> tuple[Path, Path]:
    """A real store and a lake directory holding a file, neither made by the pipeline."""
    store, lake = tmp_path / "store", tmp_path / "lake"
    real_store(store)
    lake.mkdir()
    (lake / "notes.txt").write_text("someone's data")
    return store, lake


@pytest.mark.parametrize("extra", [[], ["--keep"]])
def test_refuses_a_real_store_without_skip_ingest(real, tmp_path, extra, capsys) -> None:
    store, lake = real
    before = tree(tmp_path)
    assert len([n for n in before if n.startswith("store/commitlog/")]) > 1
    assert pipeline.main(["--store", str(store), "--lake", str(lake), "--messages", "10",
                          *extra, *sets()]) == 2
    err = capsys.readouterr().err
    assert f"{store}:" in err and "--skip-ingest" in err
    assert tree(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lake", "store"]


def test_refuses_a_lake_it_did_not_make(real, tmp_path, capsys) -> None:
    store, lake = real
    fresh = tmp_path / "new-store"                 # the store is new: only the lake is someone's
    before = tree(tmp_path)
    assert pipeline.main(["--store", str(fresh), "--lake", str(lake), *sets()]) == 2
    assert f"{lake}:" in capsys.readouterr().err
    assert tree(tmp_path) == before and not fresh.exists()


def test_refuses_a_rebuild_directory_it_did_not_make(real, tmp_path, capsys) -> None:
    store, lake = real
    (tmp_path / "store-rebuild").mkdir()
    (tmp_path / "store-rebuild" / "keep.me").write_bytes(b"\x01\x02")
    before = tree(tmp_path)
    assert pipeline.main(["--store", str(store), "--lake", str(lake), "--skip-ingest", *sets()]) == 2
    assert f"{tmp_path / 'store-rebuild'}:" in capsys.readouterr().err
    assert tree(tmp_path) == before


def test_replaces_only_its_own_sample_directories(tmp_path) -> None:
    store, lake, work = tmp_path / "store", tmp_path / "lake", tmp_path / "store-rebuild"
    pipeline.ingest(store, 30, SMALL)             # what a previous `make run` left
    pipeline.mark(lake)
    (lake / "queue_offsets").mkdir()
    pipeline.mark(work)
    (work / "index").mkdir()
    empty = tmp_path / "empty"
    empty.mkdir()
    for path in (store, lake, work):
        pipeline.clear(path)
        assert not path.exists()
    pipeline.clear(empty)                          # empty and not ours: used, never deleted
    assert empty.is_dir()
    with pytest.raises(pipeline.NotOurs):
        pipeline.clear(tmp_path)                   # holds `empty`, no marker


def test_a_sample_store_is_marked_from_its_first_file(tmp_path) -> None:
    store = tmp_path / "store"
    pipeline.ingest(store, 30, SMALL)
    assert (store / pipeline.SAMPLE_MARK).is_file()
    report = verify(store, **SMALL)                # the marker does not disturb the store
    assert report.ok and report.records == 30


@pytest.mark.parametrize("extra", [[], ["--skip-ingest"]])
def test_refuses_a_report_html_beside_the_store_it_did_not_write(tmp_path, extra, capsys) -> None:
    """The pipeline writes its page to report.html beside the store: someone's file there (on a
    real store with --skip-ingest, or beside a new sample) is refused before anything runs."""
    store = tmp_path / "store"
    if extra:
        real_store(store)
    (tmp_path / "report.html").write_text("<html>the team's own page</html>")
    before = tree(tmp_path)
    assert pipeline.main(["--store", str(store), "--lake", str(tmp_path / "lake"), "--messages", "10",
                          *extra, *sets()]) == 2
    assert f"{tmp_path / 'report.html'}: not a report rocketlake wrote" in capsys.readouterr().err
    assert tree(tmp_path) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", *(["store"] if extra else [])]


def test_check_report_takes_a_page_rocketlake_wrote(tmp_path) -> None:
    """A page ``rocketlake report`` wrote is replaced (the pipeline's own from an earlier run)."""
    store, page = tmp_path / "store", tmp_path / "report.html"
    real_store(store)
    assert main(["report", "--store", str(store), *sets(), "--out", str(page)]) == 0
    pipeline.check_report(page)
    pipeline.check_report(tmp_path / "none.html")
