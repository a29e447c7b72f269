"""What a store is (``store.store_dir``): a directory holding `commitlog/`, or, for a writer,
a missing path or an empty directory. A directory holding only `config/` or a stray `lock` is
refused by every command (exit 2) and nothing is written into it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketlake.jobs.cli import main
from rocketlake.store import MessageStore, NotAStoreError

SETS = ["--set", "mappedFileSizeCommitLog=4096", "--set", "mappedFileSizeConsumeQueue=200"]


def _tree(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
            for p in sorted(root.rglob("*"))}


def _config_only(d: Path) -> str:
    (d / "config").mkdir()
    (d / "config" / "settings.json").write_text('{"project": true}')
    return "config/"


def _lock_only(d: Path) -> str:
    (d / "lock").write_bytes(b"mine")
    return "lock"


@pytest.mark.parametrize("make", [_config_only, _lock_only])
def test_a_directory_without_commitlog_is_not_a_store(tmp_path: Path, capsys, make) -> None:
    project = tmp_path / "project"
    project.mkdir()
    held = make(project)
    before = _tree(project)
    events = tmp_path / "events.jsonl"
    events.write_text('{"topic": "orders", "body": "a"}\n')
    why = f"{project}: not a RocketMQ store (no commitlog/ directory; it holds {held})"

    assert main(["verify", "--store", str(project)]) == 2
    out, err = capsys.readouterr()
    assert "OK" not in out and why in err
    assert main(["ingest", "--store", str(project), *SETS, str(events)]) == 2
    assert why in capsys.readouterr().err
    with pytest.raises(NotAStoreError, match=why.replace("(", r"\(").replace(")", r"\)")):
        MessageStore(project)
    assert _tree(project) == before


def test_a_writer_makes_a_store_in_an_empty_directory_that_stays_one(tmp_path: Path, capsys) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    MessageStore(fresh, mappedFileSizeCommitLog=4096).close()  # nothing put
    assert (fresh / "commitlog").is_dir()
    assert main(["verify", "--store", str(fresh), *SETS, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["records"] == 0
    MessageStore(fresh, read_only=True, mappedFileSizeCommitLog=4096).close()
