"""``--store``'s default, one rule for every command that takes one (the `rocketlake` program's
and the Spark jobs' spark-submit entries): the flag, else ``ROCKETLAKE_STORE``, else ``store`` in
the TOML config file (``ROCKETLAKE_CONFIG``, else ``~/.config/rocketlake/config.toml``); none of
them is an error naming all three."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from rocketlake.jobs import cli
from rocketlake.jobs.job_commands import job_main

#: `topic-status --topic orders` of the golden store (tests/golden/rocketmq-4.9.8/read.jsonl:
#: max offsets 31, 29, 29, 31)
ORDERS = ["topic   queue_id  min_offset  max_offset  last_update_time",
          "orders         0           0          31  2026-11-22T11:06:22.061Z",
          "orders         1           0          29  2026-11-22T11:06:22.060Z",
          "orders         2           0          29  2026-11-22T11:06:22.058Z",
          "orders         3           0          31  2026-11-22T11:06:23.162Z"]


@pytest.fixture(autouse=True)
def no_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No ROCKETLAKE_STORE, no ROCKETLAKE_CONFIG, an empty home: no default store."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for name in ("ROCKETLAKE_STORE", "ROCKETLAKE_CONFIG", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    return home


def _status(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    try:
        code = cli.main(["topic-status", "--topic", "orders", *argv])
    except SystemExit as e:
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_without_any_the_error_names_the_three_ways(capsys, no_defaults: Path) -> None:
    code, out, err = _status(capsys)
    assert code == 2 and out == []
    assert (f"no store given: pass --store DIR, set ROCKETLAKE_STORE=DIR, or write store = \"DIR\" "
            f"in {no_defaults / '.config' / 'rocketlake' / 'config.toml'}") in err


def test_the_environment_names_the_store_and_the_flag_wins(capsys, monkeypatch, golden_store: Path,
                                                           tmp_path: Path) -> None:
    monkeypatch.setenv("ROCKETLAKE_STORE", str(golden_store))
    assert _status(capsys) == (0, ORDERS, "")
    monkeypatch.setenv("ROCKETLAKE_STORE", str(tmp_path / "nosuch"))
    assert _status(capsys, "--store", str(golden_store)) == (0, ORDERS, "")


def test_the_config_file_names_the_store(capsys, monkeypatch, no_defaults: Path,
                                         golden_store: Path, tmp_path: Path) -> None:
    config = no_defaults / ".config" / "rocketlake" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'# the store of this host\nstore = "{golden_store}"\n')
    assert _status(capsys) == (0, ORDERS, "")
    monkeypatch.setenv("ROCKETLAKE_STORE", str(tmp_path / "nosuch"))  # the environment wins
    code, _, err = _status(capsys)
    assert code == 2 and f"{tmp_path / 'nosuch'}" in err


def test_rocketlake_config_names_the_file_and_a_relative_store_is_from_its_directory(
        capsys, monkeypatch, golden_store: Path) -> None:
    config = golden_store.parent / "elsewhere.toml"
    config.write_text(f'store = "{golden_store.name}"\n')
    monkeypatch.setenv("ROCKETLAKE_CONFIG", str(config))
    assert _status(capsys) == (0, ORDERS, "")


@pytest.mark.parametrize("text, error", [
    (None, "no such config file ($ROCKETLAKE_CONFIG names it)"),
    ("store = /var/store\n", "not a TOML file"),
    ("store = 7\n", "store must be a path (a non-empty string), got 7"),
])
def test_a_bad_config_file_is_an_error_naming_it(capsys, monkeypatch, tmp_path: Path,
                                                 text: str | None, error: str) -> None:
    config = tmp_path / "config.toml"
    if text is not None:
        config.write_text(text)
    monkeypatch.setenv("ROCKETLAKE_CONFIG", str(config))
    code, _, err = _status(capsys)
    assert code == 2 and f"{config}: {error}" in err, err


def test_a_spark_jobs_entry_takes_the_same_default(monkeypatch, golden_store: Path) -> None:
    """``spark-submit jobs/check_consistency.py`` parses through job_main: no --store, the
    environment's."""
    monkeypatch.setenv("ROCKETLAKE_STORE", str(golden_store))
    seen: list[argparse.Namespace] = []
    assert job_main("check-consistency", lambda a: seen.append(a) or 0, ["--report", "r.json"]) == 0
    assert seen[0].store == golden_store

