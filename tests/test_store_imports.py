"""The store library's modules import each other without a cycle (a cycle makes the order of
imports matter and hides which module owns a concept)."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import rocketlake.store

STORE = Path(rocketlake.store.__file__).parent


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The store modules ``path`` imports at any level (``TYPE_CHECKING`` imports included):
    ``from pkg import name`` imports the module ``pkg.name`` when there is one, else ``pkg``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                names.add(sub if sub in modules else node.module)
        elif isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
    return names & modules


def _graph() -> dict[str, set[str]]:
    paths = {}
    for path in STORE.rglob("*.py"):
        rel = path.relative_to(STORE).with_suffix("")
        parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
        paths[".".join(("rocketlake.store", *parts))] = path
    return {m: _imports(p, set(paths)) - {m} for m, p in paths.items()}


def test_store_modules_import_without_a_cycle():
    graph = _graph()
    assert {"rocketlake.store.commitlog", "rocketlake.store.table_encoder"} <= graph.keys()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycles.append(path[path.index(n):] + [n] if n in path else [m, n])
            elif n not in state:
                visit(n, path + [n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    assert cycles == []



def test_opening_and_recovering_a_store_for_writing_does_not_import_pyarrow(tmp_path):
    """A writer's open after a crash (recovery, the queues, the index) uses no Arrow table:
    pyarrow (0.15 s of imports; pandas, 0.1-0.8 s more, at its first conversion of Python
    values) and the table encoder load with the first ``put_table`` / ``put_batch``, which
    still writes what it wrote before."""
    import subprocess
    import sys

    from rocketlake.store import Message, MessageStore

    root = tmp_path / "s"
    with MessageStore(root) as s:
        s.put_batch([Message(topic="t", body=b"x", queue_id=0)])
    (root / "abort").touch()
    script = ("import sys\nfrom rocketlake.store import Message, MessageStore\n"
              f"s = MessageStore({str(root)!r})\n"
              "print(sorted(m for m in ('pyarrow', 'pandas', 'rocketlake.store.table_encoder')"
              " if m in sys.modules))\n"
              "print(s.put_batch([Message(topic='t', body=b'y', queue_id=0)])[0].queue_offset)\n"
              "s.close()\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["[]", "1"], out.stderr


def test_a_restart_loads_kernels_without_numbas_compiler_registries(tmp_path):
    """Kernels loaded from the cache are machine code: a writer's open after a crash (recovery,
    the write warm-up) runs them without numba's typing and lowering registries, which its
    context refresh imports (``numba.np.linalg``, ``numba.np.polynomial``, ...: about 0.1 s)."""
    import subprocess
    import sys

    from rocketlake.store import Message, MessageStore

    root = tmp_path / "s"
    with MessageStore(root) as s:
        s.put_batch([Message(topic="t", body=b"x", queue_id=0, keys="k")])
    (root / "abort").touch()
    script = ("import json, sys\nfrom numba.core.dispatcher import Dispatcher\n"
              "from rocketlake.store import MessageStore\n"
              f"s = MessageStore({str(root)!r})\n"
              "loaded = sum(sum(v.stats.cache_hits.values()) for n, m in list(sys.modules.items())"
              " if n.startswith('rocketlake.') for v in vars(m).values() if isinstance(v, Dispatcher))\n"
              "s.close()\n"
              "print(json.dumps([loaded, [m for m in ('numba.np.linalg',"
              " 'numba.np.polynomial.polynomial_core') if m in sys.modules]]))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    loaded, registries = json.loads(out.stdout)
    assert loaded > 0 and registries == [], out.stderr
