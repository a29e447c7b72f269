"""The docs' examples work: every `rocketlake` command in a ```sh block of README.md and
docs/*.md, every job script a `spark-submit` line names, every relative link and every repository
path the docs name.

The store commands run (the `rocketlake` program's ``main``, in this process) against the
sample store `make run` makes, built in a temporary directory as ``var/store``; a documented
store path (``/data/store``) stands for it. A command must end with exit code 0, or the code its
comment documents ("exit 1"). The Spark commands are only parsed by the `rocketlake` parser (the
command and its options exist, their values parse), so the test stays fast.
"""
from __future__ import annotations

import importlib
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from rocketlake.jobs.cli import main, parser, sample
from rocketlake.jobs.cli.pipeline import ingest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

#: commands that run against the sample store (`offsets ... --execute` and `tail --follow`, which
#: waits for new messages, are only parsed)
RUN = {"dump", "get", "query", "verify", "lag", "topic-status", "offsets", "ingest",
       "store-status", "topic-stats", "topics", "groups", "salvage", "tail", "timers"}
#: commands that start Spark (or write a lake): parsed only
PARSE_ONLY = {"pipeline", "rebuild", "rebuild-consumequeue", "rebuild-index", "publish-offsets",
              "compact", "optimize-lake", "check-consistency", "report", "archive"}
#: where the sample store is, from the directory the examples run in
SAMPLE_STORE = "var/store"
#: store paths the docs use for a user's store; the sample store stands for them
STORE_PATHS = ("/data/store",)
#: the events file the ingest examples read (made from the sample events)
EVENTS_FILE = "events.jsonl"


@dataclass(frozen=True)
class Example:
    doc: str
    lineno: int    #: of the command's first line in the doc
    line: str      #: the command, continuation lines joined, comment removed
    comment: str   #: its trailing comment

    def __str__(self) -> str:
        return f"{self.doc}:{self.lineno}"

    def expected_code(self) -> int:
        """The exit code the comment documents ("exit 1", "exits 2"), else 0."""
        m = re.search(r"\bexits? (\d)\b", self.comment)
        return int(m.group(1)) if m else 0


def _sh_examples(doc: Path) -> list[Example]:
    """The commands of the doc's ```sh blocks, one per (backslash-continued) line."""
    text, out = doc.read_text(), []
    for block in re.finditer(r"^```sh\n(.*?)^```", text, re.M | re.S):
        pending, start = "", 0
        for lineno, line in enumerate(block.group(1).splitlines(), text.count("\n", 0, block.start(1)) + 1):
            start = start if pending else lineno
            if line.endswith("\\"):
                pending += line[:-1]
                continue
            line, pending = pending + line, ""
            m = re.search(r"(^|\s)#", line)  # a comment; `a#b` is a word, as in sh
            code, comment = (line[:m.start()], line[m.start():]) if m else (line, "")
            if code.strip():
                out.append(Example(doc.relative_to(ROOT).as_posix(), start, code.strip(), comment))
    return out


EXAMPLES = [ex for doc in DOCS for ex in _sh_examples(doc)]


def _rocketlake_argv(ex: Example) -> list[str] | None:
    """The arguments of ``ex`` when it runs the `rocketlake` program (after any ``NAME=value``
    environment settings), else None."""
    words = shlex.split(ex.line)
    start = next((i for i, w in enumerate(words) if not re.fullmatch(r"\w+=.*", w)), len(words))
    return words[start + 1:] if words[start:] and Path(words[start]).name == "rocketlake" else None


def _command(argv: list[str]) -> str:
    return next((w for w in argv if not w.startswith("-")), "")


ROCKETLAKE = [ex for ex in EXAMPLES if _rocketlake_argv(ex) is not None]
SUBMITS = [ex for ex in EXAMPLES if re.search(r"\bspark-submit\b", ex.line)]


def test_the_docs_have_examples() -> None:
    """The extraction finds the examples (a changed fence would silently test nothing)."""
    commands = {_command(_rocketlake_argv(ex) or []) for ex in ROCKETLAKE}
    assert {"lag", "topic-status", "verify", "ingest", "offsets", "rebuild-consumequeue"} <= commands
    assert any(ex.doc == "README.md" and "/data/store" in ex.line for ex in ROCKETLAKE)
    assert len(SUBMITS) >= 4


@pytest.fixture(scope="module")
def sample_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the sample store as ``var/store`` and the events file."""
    root = tmp_path_factory.mktemp("docs")
    ingest(root / SAMPLE_STORE, 500, {})
    (root / EVENTS_FILE).write_text("".join(json.dumps(ev) + "\n" for ev in sample.events(20, seed=3)))
    return root


@pytest.mark.parametrize("ex", ROCKETLAKE, ids=str)
def test_rocketlake_example(ex: Example, sample_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = _rocketlake_argv(ex)
    assert argv is not None
    command = _command(argv)
    assert command in RUN | PARSE_ONLY, f"{ex}: `{command}` is new to this test: add it to RUN or PARSE_ONLY"
    if command not in RUN or "--execute" in argv or "--follow" in argv:
        parser().parse_args(argv)  # exits 2 naming the option on a bad command or option
        return
    words = shlex.shlex(ex.line, posix=True, punctuation_chars=True)
    line = shlex.split(ex.line)
    settings = line[:len(line) - len(argv) - 1]  # the NAME=value words before `rocketlake`
    plain = not any(re.fullmatch(r"[|&;<>()]+", w) for w in words)
    assert plain, f"{ex}: an example that runs is one plain command (no pipe, redirection)"
    for name, _, value in (w.partition("=") for w in settings):  # NAME=value: its environment
        monkeypatch.setenv(name, SAMPLE_STORE if value in STORE_PATHS else value)
    monkeypatch.chdir(sample_dir)
    argv = [SAMPLE_STORE if a in STORE_PATHS else a for a in argv]
    try:
        code = main(argv)
    except SystemExit as e:  # the parser's usage errors
        code = e.code if isinstance(e.code, int) else 2
    assert code == ex.expected_code(), f"{ex}: exit {code}"


@pytest.mark.parametrize("ex", SUBMITS, ids=str)
def test_spark_submit_example(ex: Example) -> None:
    """A `spark-submit jobs/<job>.py ...` line names a job script that exists, with options
    that job parses (the options of `rocketlake <job>`)."""
    words = shlex.split(ex.line)
    scripts = [i for i, w in enumerate(words) if re.fullmatch(r"jobs/\w+\.py", w)]
    assert scripts, f"{ex}: no jobs/<job>.py script"
    script = words[scripts[0]]
    assert (ROOT / script).is_file(), f"{ex}: {script} does not exist"
    parser().parse_args([Path(script).stem.replace("_", "-"), *words[scripts[0] + 1:]])


def test_make_targets_exist() -> None:
    """Every `make <target>` the docs give is a target of the Makefile."""
    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))
    named = {w for ex in EXAMPLES for w in re.findall(r"^make (\w+)", ex.line)}
    assert {"run", "test"} <= named
    assert named <= targets, named - targets


def _links(doc: Path) -> list[str]:
    text = re.sub(r"^```.*?^```", "", doc.read_text(), flags=re.M | re.S)
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.relative_to(ROOT).as_posix())
def test_relative_links_resolve(doc: Path) -> None:
    bad = [link for link in _links(doc)
           if not re.match(r"[a-z]+:", link) and not link.startswith("#")
           and not (doc.parent / link.split("#")[0]).exists()]
    assert not bad, f"{doc.name}: links to missing files: {bad}"


#: a repository path in backquotes: `jobs/cli/report.py`, `store/kernels/`, `tests/golden/`
REPO_PATH = re.compile(r"`((?:store|jobs|transforms|tests|benchmarks|conf|airflow_dags|docs)/[\w./-]*)`")
#: directories a build makes (git-ignored), named by the docs
BUILT = {"tests/java/peer/target/"}
#: a dotted module (or a module's attribute) in backquotes: `rocketlake.store.errors`
MODULE = re.compile(r"`(rocketlake(?:\.\w+)+)`")


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.relative_to(ROOT).as_posix())
def test_named_paths_and_modules_exist(doc: Path) -> None:
    """The files and modules the docs name exist (modules moved, e.g. into jobs/cli/, stay found)."""
    text = doc.read_text()
    missing = [p for p in REPO_PATH.findall(text) if not (ROOT / p).exists() and p not in BUILT]
    for name in MODULE.findall(text):
        module, _, attr = name.rpartition(".")
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:
            if not hasattr(importlib.import_module(module), attr):
                missing.append(name)
    assert not missing, f"{doc.name} names what does not exist: {missing}"
