"""The house rules of the source tree, checked: the data path reads one way (api/ knows
nothing of the engine, reliability/ nothing of Spark, the Spark engine nothing of any bolt), no
two packages import each other even through imports inside functions, no module cycle runs at
import time, and files and functions stay small enough to read."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

SQUALL = Path(__file__).resolve().parents[2] / "squall"
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60


def _modules() -> list[Path]:
    return sorted(p for p in SQUALL.rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path, annotations: bool = True) -> set[str]:
    """Every module a file imports, at any depth (function-level imports included); without
    `annotations`, those under `if TYPE_CHECKING:` left out (they never run)."""
    tree = ast.parse(path.read_text(), str(path))
    hidden: set[int] = set()
    if not annotations:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                hidden.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    out: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in hidden:
            continue
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names} & _known()  # `from squall import version`
            out.update(subs or {node.module})
    return out


def _module_name(path: Path) -> str:
    parts = path.relative_to(SQUALL.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package(module: str) -> str:
    """The part of squall a module belongs to: its top-level package, or itself (a root module)."""
    parts = module.split(".")
    return ".".join(parts[:2])


@functools.cache
def _known() -> frozenset[str]:
    return frozenset(_module_name(p) for p in _modules())


def _graph(node_of, imports) -> dict[str, set[str]]:
    """node -> the nodes it imports, over squall's modules (`node_of` names a module's node)."""
    known = _known()
    graph: dict[str, set[str]] = {}
    for path in _modules():
        a = node_of(_module_name(path))
        for mod in imports(path):
            if mod in known:
                b = node_of(mod)
                if b != a:
                    graph.setdefault(a, set()).add(b)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _violations(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    bad = []
    for path in _modules():
        if not path.relative_to(SQUALL).as_posix().startswith(folder + "/"):
            continue
        for mod in _imports(path):
            if mod.startswith(forbidden):
                bad.append(f"{path.relative_to(SQUALL.parent)} imports {mod}")
    return bad


@pytest.mark.parametrize(("folder", "forbidden"), [
    ("api", ("squall.engine", "squall.trident", "squall.connectors", "squall.observe", "pyspark")),
    ("reliability", ("squall.engine", "squall.trident", "squall.connectors", "pyspark")),
    ("engine/spark", ("squall.trident", "squall.connectors", "squall.testing")),
    ("engine", ("squall.trident", "squall.connectors", "squall.testing")),
])
def test_the_data_path_reads_one_way(folder, forbidden):
    assert _violations(folder, forbidden) == []


def test_no_two_packages_import_each_other():
    """Counting every import, inside functions and for annotations too: the packages form layers
    (reliability, api, routing, columnar, state, windowing, engine, ... above each other)."""
    graph = _graph(_package, _imports)
    assert {"squall.api", "squall.reliability"} <= graph["squall.engine"]  # it sees the imports
    assert cycles(graph) == []


def test_no_module_cycle_runs_at_import_time():
    assert cycles(_graph(lambda m: m, lambda p: _imports(p, annotations=False))) == []


def test_the_cycle_check_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}}) == []


def test_the_layout_check_sees_an_import(tmp_path):
    bad = tmp_path / "m.py"
    bad.write_text("def f():\n    from squall.engine.cluster import LocalCluster\n")
    assert "squall.engine.cluster" in _imports(bad)


def test_no_file_over_the_limit():
    long = {str(p.relative_to(SQUALL.parent)): n for p in _modules()
            if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES}
    assert long == {}


def test_no_function_over_the_limit():
    long = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(SQUALL.parent)}:{node.lineno} {node.name}"] = n
    assert long == {}
