"""What the rebuild job rebuilds and in which modes: the one list its options, the job and the
Airflow DAGs use.

It imports nothing: the DAG files import it where the package is installed without its
dependencies (Airflow's own environment).
"""
from __future__ import annotations

from collections.abc import Iterable

#: the structures a rebuild writes from one CommitLog scan, in the job's order
STRUCTURES = ("consumequeue", "index")
#: rebuild mode -> the job's arguments for it (full: written aside, then swapped in)
MODE_ARGS: dict[str, tuple[str, ...]] = {"full": (), "incremental": ("--incremental",)}


def parse_structures(value: str) -> list[str]:
    """A ``--structures`` value (comma-separated names) as the names it gives, once each;
    ValueError naming the known ones when it gives none or an unknown one."""
    names = [v.strip() for v in value.split(",") if v.strip()]
    wrong = [n for n in names if n not in STRUCTURES]
    if wrong or not names:
        raise ValueError(f"expected {' or '.join(STRUCTURES)} or both, got {value!r}")
    return list(dict.fromkeys(names))


def structures_arg(structures: Iterable[str]) -> str:
    """``structures`` as a ``--structures`` value: comma-separated, in :data:`STRUCTURES` order."""
    wanted = set(structures)
    return ",".join(s for s in STRUCTURES if s in wanted)


def rebuild_args(structures: str, mode: str) -> list[str]:
    """The job's arguments: ``--structures`` (a :func:`structures_arg`, or a template rendering to
    one) and those of ``mode``; ValueError for an unknown mode."""
    if mode not in MODE_ARGS:
        raise ValueError(f"rebuild mode {mode!r}: expected one of {', '.join(MODE_ARGS)}")
    return ["--structures", structures, *MODE_ARGS[mode]]
