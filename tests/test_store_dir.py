"""What a store is (``store.store_dir``): a directory holding `commitlog/`, or, for a writer,
a missing path or an empty directory. A directory holding only `config/` or a stray `lock` is
refused by every command (exit 2) and nothing is written into it."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocketlake.jobs.cli import main
from rocketlake.store import MessageStore, NotAStoreError
from rocketlake.store.single_process_rebuild import rebuild

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
    out = tmp_path / "out"
    with pytest.raises(NotAStoreError, match=why.replace("(", r"\(").replace(")", r"\)")):
        rebuild(project, out)  # the library's rebuild: not an empty store of 0 records
    assert _tree(project) == before and not out.exists()


def test_a_writer_makes_a_store_in_an_empty_directory_that_stays_one(tmp_path: Path, capsys) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    MessageStore(fresh, mappedFileSizeCommitLog=4096).close()  # nothing put
    assert (fresh / "commitlog").is_dir()
    assert main(["verify", "--store", str(fresh), *SETS, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["records"] == 0
    MessageStore(fresh, read_only=True, mappedFileSizeCommitLog=4096).close()


#: every command that reads a store, with the options it needs besides --store
READERS = [["dump", "commitlog"], ["get", "--topic", "t", "--queue", "0", "--offset", "0"],
           ["query", "--key", "k", "--topic", "t"], ["verify"], ["check-consistency", "--report", "R"],
           ["report", "--out", "R"], ["rebuild"], ["rebuild-consumequeue"], ["rebuild-index"],
           ["publish-offsets", "--lake", "L"], ["compact", "--lake", "L", "--dry-run"], ["lag"],
           ["topic-status", "--topic", "t"],
           ["offsets", "reset", "--group", "g", "--topic", "t", "--to-offset", "0", "--dry-run"]]


@pytest.mark.parametrize("argv", READERS, ids=lambda a: " ".join(a[:2]))
def test_every_command_refuses_a_non_store_the_same_way(tmp_path: Path, capsys, argv: list[str]) -> None:
    project = tmp_path / "project"
    project.mkdir()
    _config_only(project)
    before = _tree(project)
    args = [{"R": str(tmp_path / "out"), "L": str(tmp_path / "lake")}.get(a, a) for a in argv]
    assert main([args[0], "--store", str(project), *args[1:]]) == 2
    err = capsys.readouterr().err
    assert f"error: {project}: not a RocketMQ store (no commitlog/ directory; it holds config/)" in err
    assert _tree(project) == before and not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [*READERS, ["store-status"], ["topic-stats"], ["topics"], ["groups"],
                                  ["tail", "--topic", "t"], ["salvage", "--output", "R"],
                                  ["ingest", "E"]], ids=lambda a: " ".join(a[:2]))
def test_a_file_given_as_the_store_is_named_as_a_file(tmp_path: Path, capsys, argv: list[str]) -> None:
    """`--store README.md` (a file): every command says it is a file, exit 2, nothing written."""
    readme = tmp_path / "README.md"
    readme.write_text("# not a store\n")
    events = tmp_path / "events.jsonl"
    events.write_text('{"topic": "t", "body": "x"}\n')
    args = [{"R": str(tmp_path / "out"), "L": str(tmp_path / "lake"), "E": str(events)}.get(a, a)
            for a in argv]
    assert main([args[0], "--store", str(readme), *args[1:]]) == 2
    assert f"error: {readme}: is a file, not a store directory" in capsys.readouterr().err
    assert readme.read_text() == "# not a store\n" and not (tmp_path / "out").exists()
