"""The `rocketlake` command line: one command table, shared options, times, exit codes."""
from __future__ import annotations

import argparse
import logging
import os
import pty
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from stderr_lines import LOG_LINE, said

from rocketlake import __version__
from rocketlake.jobs import check_consistency, cli
from rocketlake.jobs.exit_codes import ExitCode, exit_code, run
from rocketlake.store import MessageStore
from rocketlake.store.errors import StoreFormatError, StoreFullError
from rocketlake.store.lockfile import StoreLockedError
from rocketlake.store.paths import UnsafePathError
from rocketlake.store.store_dir import create_store

REPO = Path(__file__).resolve().parents[1]
SMALL = ["--set", "mappedFileSizeCommitLog=65536", "--set", "mappedFileSizeConsumeQueue=600"]


def _subparsers() -> dict[str, argparse.ArgumentParser]:
    action = next(a for a in cli.parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(action.choices)


def test_version(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"rocketlake {__version__}"


def test_every_job_is_a_command_and_every_option_has_help() -> None:
    commands = _subparsers()
    assert set(commands) == {"pipeline", "ingest", "dump", "get", "query", "verify", "check-consistency",
                             "report", "rebuild", "rebuild-consumequeue", "rebuild-index",
                             "publish-offsets", "compact", "optimize-lake", "lag", "topic-status",
                             "offsets", "archive", "store-status", "topic-stats", "topics",
                             "groups", "salvage", "tail", "timers"}
    for name, p in commands.items():
        for a in p._actions:
            assert a.help, f"{name} {a.option_strings or a.dest}: no help text"


def test_shared_options_agree_across_commands() -> None:
    for name, p in _subparsers().items():
        opts = {o: a for a in p._actions for o in a.option_strings}
        if name == "optimize-lake":  # the one command over a lake alone, no store
            continue
        assert opts["--set"].default == [] and opts["--set"].metavar == "NAME=VALUE", name
        assert opts["--store"].type is Path, name


@pytest.mark.parametrize("text", ["1700000000000", "2023-11-14T22:13:20Z", "2023-11-14T22:13:20",
                                  "2023-11-15T00:13:20+02:00", "2023-11-14T22:13:20.000"])
def test_times_are_iso_8601_or_epoch_ms(text: str) -> None:
    assert cli.parse_time(text) == 1_700_000_000_000  # 2023-11-14T22:13:20Z, hand-checked


def test_times_keep_milliseconds_and_refuse_the_rest() -> None:
    assert cli.parse_time("2023-11-14T22:13:20.123Z") == 1_700_000_000_123
    assert cli.to_datetime(1_700_000_000_123).isoformat() == "2023-11-14T22:13:20.123000+00:00"
    with pytest.raises(argparse.ArgumentTypeError, match="not a time: 'yesterday'"):
        cli.parse_time("yesterday")


@pytest.mark.parametrize("command", ["compact", "publish-offsets"])
def test_job_time_options_take_both_forms(command: str) -> None:
    option = "--now" if command == "compact" else "--snapshot-time"
    argv = [command, "--store", "s", "--lake", "l", option]
    assert (cli.parser().parse_args([*argv, "2023-11-14T22:13:20Z"]).__dict__
            == cli.parser().parse_args([*argv, "1700000000000"]).__dict__)


def test_query_by_iso_time_equals_query_by_ms(tmp_path: Path, capsys) -> None:
    store = tmp_path / "s"
    with MessageStore(store, mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=600) as ms:
        from rocketlake.store import Message
        ms.put_batch([Message("t", b"a", 0, store_timestamp=1_700_000_000_000),
                      Message("t", b"b", 0, store_timestamp=1_700_000_060_000)])
    base = ["query", "--store", str(store), *SMALL, "--topic", "t", "--queue", "0", "--time"]
    assert cli.main([*base, "2023-11-14T22:14:20Z"]) == 0
    iso = capsys.readouterr().out
    assert cli.main([*base, "1700000060000"]) == 0
    assert capsys.readouterr().out == iso and '"queue_offset": 1' in iso


@pytest.mark.parametrize("error, code", [
    (ValueError("--set expects NAME=VALUE"), ExitCode.USAGE),
    (FileNotFoundError("x: no such input file"), ExitCode.USAGE),
    (FileExistsError("x: not empty"), ExitCode.USAGE),
    (UnsafePathError("topic '../x'"), ExitCode.USAGE),
    (StoreFormatError("x: file is 3 bytes"), ExitCode.UNUSABLE),
    (StoreLockedError("x: locked"), ExitCode.UNUSABLE),
    (StoreFullError(28, "No space left on device"), ExitCode.UNUSABLE),
    (OSError(28, "No space left on device"), ExitCode.UNUSABLE),
    (KeyError("a bug"), None),
])
def test_one_table_maps_errors_to_exit_codes(error: BaseException, code: ExitCode | None) -> None:
    assert exit_code(error) == code


def test_bad_usage_is_2_for_every_kind(tmp_path: Path, capsys) -> None:
    store = tmp_path / "s"
    with MessageStore(store, mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=600):
        pass
    assert cli.main(["verify", "--store", str(store), "--set", "nonsense"]) == 2  # was 1
    assert "--set expects NAME=VALUE" in capsys.readouterr().err
    assert cli.main(["verify", "--store", str(tmp_path / "nowhere")]) == 2  # was 1
    with pytest.raises(SystemExit) as e:
        cli.main(["query", "--store", str(store), "--time", "yesterday"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        cli.main(["no-such-command"])
    assert e.value.code == 2



@pytest.mark.parametrize("command", [
    ["verify"], ["dump", "commitlog"], ["get", "--topic", "t", "--queue", "0", "--offset", "0"],
    ["query", "--topic", "t", "--queue", "0", "--time", "0"],
])
@pytest.mark.parametrize("name", ["config", "create", "read_only"])
def test_set_names_only_store_settings(tmp_path: Path, capsys, command: list[str], name: str) -> None:
    """`--set` takes RocketMQ settings; it never reaches MessageStore's own parameters (it did:
    `create=x` was taken as a flag, `config=x` crashed)."""
    store = tmp_path / "s"
    with MessageStore(store, mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=600):
        pass
    argv = [command[0], "--store", str(store), *SMALL, "--set", f"{name}=x", *command[1:]]
    assert cli.main(argv) == ExitCode.USAGE
    assert f"unknown store setting {name!r}" in capsys.readouterr().err

def test_store_commands_never_import_spark(tmp_path: Path) -> None:
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))}
    code = ("import sys; from rocketlake.jobs.cli import main; "
            f"rc = main(['verify', '--store', {str(tmp_path)!r}]); "
            "print(rc, any(m.startswith('pyspark') for m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert p.stdout.split() == ["2", "False"], p.stderr


def test_rebuild_into_a_non_empty_output_fails_before_spark_starts(tmp_path: Path) -> None:
    store, out = create_store(tmp_path / "store"), tmp_path / "out"
    (out / "index").mkdir(parents=True)
    (out / "index" / "20261123040000000").write_bytes(b"someone's index file")
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))}
    code = ("from pyspark import SparkContext; from rocketlake.jobs.cli import main; "
            f"rc = main(['rebuild', '--store', {str(store)!r}, '--output', {str(out)!r}]); "
            "print(rc, SparkContext._active_spark_context is None)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert p.stdout.split() == ["2", "True"], p.stderr      # no SparkContext was made
    assert f"{out / 'index'}: already exists and is not empty" in p.stderr
    assert (out / "index" / "20261123040000000").read_bytes() == b"someone's index file"


@pytest.mark.parametrize("inside", ["store", "store/commitlog/out", "link/out"])
def test_rebuild_into_an_output_inside_the_store_is_refused(tmp_path: Path, inside: str) -> None:
    """An --output in the store would put the rebuild's directories among the store's own (one in
    `commitlog/` stops every open), written without the store's lock; through a link too. The
    rebuild itself refuses it (its library callers), as the command line does (below)."""
    from rocketlake.jobs.rebuild import STRUCTURES, check_output
    store = create_store(tmp_path / "store")
    (tmp_path / "link").symlink_to(store / "commitlog")
    out = tmp_path / inside
    where = "the store" if inside == "store" else "inside the store"
    with pytest.raises(UnsafePathError, match=f"{out}: is {where} {store}"):
        check_output(store, out, STRUCTURES)
    assert sorted(p.name for p in store.rglob("*")) == ["commitlog"]


@pytest.mark.parametrize("argv", [
    ["report", "--out", "S/commitlog/report.html"],
    ["check-consistency", "--report", "S/consumequeue/r.json"],
    ["check-consistency", "--lake", "S/lake", "--report", "r.json"],
    ["publish-offsets", "--lake", "file://S/lake", "--store-name", "b"],
    ["compact", "--lake", "S"],
    ["archive", "--lake", "S/commitlog/lake", "--store-name", "b"],
    ["salvage", "--output", "S/new"],
    ["rebuild", "--output", "S/commitlog/out"],
])
def test_no_command_writes_its_output_into_the_store(tmp_path: Path, capsys, argv: list[str]) -> None:
    """A report, a lake, a rebuild's or salvage's output named in the store is refused before
    anything runs (a report in `commitlog/` made every later open of the store fail)."""
    store = _one_message_store(tmp_path)
    before = sorted((str(p), p.stat().st_size) for p in store.rglob("*"))
    args = [a.replace("S", str(store), 1) if a.startswith(("S", "file://S")) else a for a in argv]
    with pytest.raises(SystemExit) as e:
        cli.main([args[0], "--store", str(store), *SMALL, *args[1:]])
    assert e.value.code == 2
    where = "the store" if args[2] == str(store) else "inside the store"
    assert f"is {where} {store}; {argv[1]} must be written outside it" in capsys.readouterr().err
    assert sorted((str(p), p.stat().st_size) for p in store.rglob("*")) == before


def test_error_and_warning_lines_escape_control_characters(capsys) -> None:
    """A stored name in an error or a warning cannot drive the terminal (ESC, BEL, a newline that
    would fake a second line)."""
    def body() -> int:
        warnings.warn("group \x1b]0;owned\x07 skipped", stacklevel=1)
        raise StoreFormatError("topic \x1b[2Jx\nrocketlake: ok: fake")
    assert run("rocketlake", body) == ExitCode.UNUSABLE
    assert said(capsys.readouterr().err) == [
        "rocketlake: warning: group \\x1b]0;owned\\x07 skipped",
        "rocketlake: error: topic \\x1b[2Jx\\nrocketlake: ok: fake",
    ]


@pytest.mark.parametrize("argv, unknown", [
    (["dump", "commitlog", "--store", "s", "--max-b", "1"], "--max-b 1"),  # was taken as --max-body
    (["verify", "--store", "s", "--max-p", "3"], "--max-p 3"),  # was taken as --max-problems
    (["rebuild", "--store", "s", "--struct", "index"], "--struct index"),  # was --structures
])
def test_options_are_never_abbreviated(argv: list[str], unknown: str, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == 2
    assert f"unrecognized arguments: {unknown}" in capsys.readouterr().err


# --- log lines: -q, -v, terminal or not ---------------------------------------------------------
def _one_message_store(tmp_path: Path) -> Path:
    store = tmp_path / "s"
    with MessageStore(store, mappedFileSizeCommitLog=65536, mappedFileSizeConsumeQueue=600) as ms:
        from rocketlake.store import Message
        ms.put(Message("t", b"a", 0, store_timestamp=1_700_000_000_000))
    return store


def test_every_command_and_job_takes_q_and_v() -> None:
    for name, p in _subparsers().items():
        opts = {o: a for a in p._actions for o in a.option_strings}
        assert (opts["-q"], opts["-v"]) == (opts["--quiet"], opts["--verbose"]), name
        assert (opts["-q"].dest, opts["-q"].const, opts["-v"].const, opts["-q"].default) == (
            "log_level", logging.WARNING, logging.DEBUG, logging.INFO), name


@pytest.mark.parametrize("level, said_on_stderr", [
    ([], ["rocketlake get: no message in queue t/0 from queue offset 5: OFFSET_OVERFLOW_BADLY "
          "(the queue holds offsets [0, 1))"]),
    (["-q"], []),  # warnings and errors only: the info line goes
    (["-v"], ["rocketlake get: no message in queue t/0 from queue offset 5: OFFSET_OVERFLOW_BADLY "
              "(the queue holds offsets [0, 1))"]),
])
def test_q_leaves_out_info_lines_and_stdout_stays(tmp_path: Path, capsys, level: list[str],
                                                  said_on_stderr: list[str]) -> None:
    store = _one_message_store(tmp_path)
    argv = ["get", "--store", str(store), *SMALL, "--topic", "t", "--queue", "0", "--offset", "5", *level]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert out == ('{"status": "OFFSET_OVERFLOW_BADLY", "next_begin_offset": 1, "min_offset": 0, '
                   '"max_offset": 1, "count": 0}\n')
    assert said(err) == said_on_stderr
    assert all(LOG_LINE.match(line) for line in err.splitlines())  # not a terminal: plain lines


def test_v_adds_the_expected_errors_traceback_as_a_debug_line(tmp_path: Path, capsys) -> None:
    argv = ["verify", "--store", str(tmp_path / "nowhere")]
    assert cli.main(argv) == ExitCode.USAGE
    out, quiet = capsys.readouterr()
    assert (out, len(quiet.splitlines())) == ("", 1) and quiet.startswith("rocketlake verify: error: ")
    assert cli.main([*argv, "-v"]) == ExitCode.USAGE
    out, verbose = capsys.readouterr()
    first = verbose.splitlines()[0]
    assert out == "" and verbose.endswith(quiet)  # the verdict stays the last line
    assert LOG_LINE.match(first) and " DEBUG rocketlake.jobs.exit_codes rocketlake verify: the " \
        "error's traceback" in first
    assert "Traceback (most recent call last):" in verbose


def test_q_keeps_warnings(capsys) -> None:
    def body() -> int:
        warnings.warn("a warning", stacklevel=1)
        logging.getLogger("rocketlake.x").info("an info line")
        return 0
    assert run("rocketlake", body, logging.WARNING) == 0
    assert said(capsys.readouterr().err) == ["rocketlake: warning: a warning"]


def test_a_job_takes_q_too(tmp_path: Path, capsys) -> None:
    """``spark-submit jobs/check_consistency.py`` parses -q as ``rocketlake check-consistency``."""
    store = _one_message_store(tmp_path)
    argv = ["--store", str(store), *SMALL, "--report", str(tmp_path / "r.json")]
    assert check_consistency.main(argv) == 0
    assert said(capsys.readouterr().err) == [
        f"check-consistency: 1 records, 0 error(s); rebuild: nothing; report in {tmp_path / 'r.json'}"]
    assert check_consistency.main([*argv, "-q"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command", [["report", "--out"], ["check-consistency", "--report"]])
def test_a_report_path_that_is_a_directory_is_refused_naming_it(tmp_path: Path, capsys, command) -> None:
    """Not a traceback, and no temporary file left beside it."""
    store = _one_message_store(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("keep me")
    before = sorted(p.name for p in tmp_path.iterdir())
    assert cli.main([command[0], "--store", str(store), *SMALL, command[1], str(tmp_path / "out")]) == 2
    assert f"{tmp_path / 'out'}: is a directory" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("command", [["report", "--out"], ["check-consistency", "--report"]])
def test_a_report_the_disk_cannot_hold_is_an_error_and_no_half_file(tmp_path: Path, command) -> None:
    """Files may grow to 128 bytes only (RLIMIT_FSIZE: a write past it fails with EFBIG, as on a
    full disk): exit 3 naming the report, and no part of it where it would be read."""
    store = _one_message_store(tmp_path)
    out = tmp_path / "r" / "report"
    code = ("import resource, sys; from rocketlake.jobs.cli import main; "
            "resource.setrlimit(resource.RLIMIT_FSIZE, (128, 128)); sys.exit(main(sys.argv[1:]))")
    p = subprocess.run([sys.executable, "-c", code, command[0], "--store", str(store), *SMALL,
                        command[1], str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 3, p.stderr
    assert f"{out}: file too large writing the" in p.stderr
    assert list((tmp_path / "r").iterdir()) == []


def test_on_a_terminal_log_lines_go_through_rich(tmp_path: Path) -> None:
    store = _one_message_store(tmp_path)
    main_fd, term = pty.openpty()
    env = {**os.environ, "COLUMNS": "200", "TERM": "xterm", "NO_COLOR": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))}
    p = subprocess.run([sys.executable, "-m", "rocketlake.jobs.cli", "get", "--store", str(store), *SMALL,
                        "--topic", "t", "--queue", "0", "--offset", "5"],
                       stdout=subprocess.PIPE, stderr=term, env=env, timeout=120)
    os.close(term)
    shown = re.sub(r"\x1b\[[0-9;]*m", "", os.read(main_fd, 65536).decode())  # styles aside
    os.close(main_fd)
    assert p.returncode == 0 and p.stdout.startswith(b'{"status": "OFFSET_OVERFLOW_BADLY"')
    assert "INFO" in shown and "rocketlake get: no message in queue t/0" in shown
    assert not LOG_LINE.match(shown.lstrip())  # rich's columns, not a plain line
