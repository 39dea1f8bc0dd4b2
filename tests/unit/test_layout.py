"""The house rules of the source tree, checked: the data path reads one way (api/ knows
nothing of the engine, reliability/ nothing of Spark, the Spark engine nothing of any bolt),
and files and functions stay small enough to read."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SQUALL = Path(__file__).resolve().parents[2] / "squall"
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60


def _modules() -> list[Path]:
    return sorted(p for p in SQUALL.rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path) -> set[str]:
    """Every module a file imports, at any depth (function-level imports included)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
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
