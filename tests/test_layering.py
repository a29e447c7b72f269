"""The layers import downwards only: the `rocketlake` program (jobs/cli/) sits on the jobs, the
jobs on the library and transforms; nothing below imports what sits above it, also not through a
module name in a string (``importlib.import_module("rocketlake.jobs.cli")``)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: folder -> its package name, as pyproject.toml's package-dir maps them
PACKAGES = {"jobs": "rocketlake.jobs", "store": "rocketlake.store", "transforms": "rocketlake.transforms"}


def module_name(path: Path) -> str:
    """``jobs/cli/report.py`` -> ``rocketlake.jobs.cli.report`` (a package's ``__init__`` is the package)."""
    rel = path.relative_to(ROOT).with_suffix("")
    parts = [*PACKAGES[rel.parts[0]].split("."), *rel.parts[1:]]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_names(source: str, package: str) -> set[str]:
    """Every module a module of ``package`` with ``source`` imports or names in a string:
    ``import a.b`` -> ``a.b``; ``from a import b`` -> ``a`` and ``a.b`` (``b`` may be a module);
    relative imports resolved against ``package``; a string constant that starts with
    ``rocketlake.`` -> its dotted part before any ``:``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            base = ".".join(parts[:len(parts) - node.level + 1]) if node.level else ""
            module = ".".join(filter(None, [base, node.module or ""]))
            names |= {module} | {f"{module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value.startswith("rocketlake."):
            names.add(node.value.split(":")[0].split()[0])
    return names


def imports_of(folder: str, exclude: str | None = None) -> dict[str, set[str]]:
    """Module file -> what it imports, for every module under ``folder`` (minus ``exclude``)."""
    files = sorted((ROOT / folder).rglob("*.py"))
    return {str(f.relative_to(ROOT)): imported_names(
                f.read_text(encoding="utf-8"),
                module_name(f) if f.name == "__init__.py" else module_name(f).rpartition(".")[0])
            for f in files if exclude is None or not f.is_relative_to(ROOT / exclude)}


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_jobs_never_import_the_command_line() -> None:
    found = {f: sorted(n for n in names if within(n, "rocketlake.jobs.cli"))
             for f, names in imports_of("jobs", exclude="jobs/cli").items()}
    assert {f: n for f, n in found.items() if n} == {}
    assert "jobs/rebuild.py" in found and "jobs/cli/__init__.py" not in found  # it looked


@pytest.mark.parametrize("folder", ["store", "transforms"])
def test_the_library_and_transforms_import_nothing_from_the_jobs(folder: str) -> None:
    found = {f: sorted(n for n in names if within(n, "rocketlake.jobs"))
             for f, names in imports_of(folder).items()}
    assert {f: n for f, n in found.items() if n} == {}
    assert found, f"no modules under {folder}/"


def test_the_import_finder_sees_every_form() -> None:
    """What the checks above rely on, on a module of ``rocketlake.jobs.cli`` written for the purpose."""
    source = ("import rocketlake.jobs.cli\nfrom rocketlake.jobs import cli\nfrom . import report\n"
              "from .times import to_datetime\nfrom .. import lake\nT = 'rocketlake.jobs.cli.report:run'\n")
    assert imported_names(source, "rocketlake.jobs.cli") == {
        "rocketlake.jobs.cli", "rocketlake.jobs", "rocketlake.jobs.cli.report", "rocketlake.jobs.cli.times",
        "rocketlake.jobs.cli.times.to_datetime", "rocketlake.jobs.lake"}
