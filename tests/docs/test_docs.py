"""The docs cannot rot: the site builds with `mkdocs build --strict`, and every Python example of
the README and of docs/ runs, a page's blocks in order in one namespace (as a reader pastes them).

A block's first line may say what it needs, `# needs: redis, spark` (rabbitmq, redis, nats,
postgres, kafka, spark): it runs when those are reachable and skips otherwise (fails when
CI=true); with kafka the test starts a broker and puts its address in KAFKA_BOOTSTRAP. A block
that cannot run in a test (a cluster's set-up, a fragment of a class) says why on its first line:
`# not run: <why>`; the test counts them, so they stay few."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.broker_services import need_nats, need_postgres, need_rabbitmq, need_redis

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$",
                   re.S | re.M)
DIRECTIVE = re.compile(r"^#\s*(needs|not run):\s*(.+)$")
NOT_RUN_MAX = 12  # across all pages: an example that cannot run is the exception


@dataclass
class Block:
    page: Path
    line: int
    source: str
    needs: tuple[str, ...] = ()
    not_run: str | None = None


def blocks(page: Path) -> list[Block]:
    """The page's ```python blocks, with what their first line says."""
    text = page.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        if m.group("lang") not in ("python", "py"):
            continue
        body = textwrap.dedent(m.group("body"))
        line = text.count("\n", 0, m.start()) + 2
        first = body.split("\n", 1)[0].strip()
        d = DIRECTIVE.match(first)
        if d and d.group(1) == "needs":
            found.append(Block(page, line, body, tuple(n.strip() for n in d.group(2).split(","))))
        elif d:
            found.append(Block(page, line, body, not_run=d.group(2).strip()))
        else:
            found.append(Block(page, line, body))
    return found


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


RUNNABLE = [p for p in PAGES if any(b.not_run is None for b in blocks(p))]


@pytest.mark.parametrize("page", RUNNABLE, ids=_rel)
def test_every_example_of_the_page_runs(page, request, tmp_path, monkeypatch):
    todo = [b for b in blocks(page) if b.not_run is None]
    needs = {n for b in todo for n in b.needs}
    unknown = needs - {"rabbitmq", "redis", "nats", "postgres", "kafka", "spark"}
    assert not unknown, f"{_rel(page)}: unknown needs {unknown}"
    for need, check in (("rabbitmq", need_rabbitmq), ("redis", need_redis), ("nats", need_nats),
                        ("postgres", need_postgres)):
        if need in needs:
            check()
    if "spark" in needs:
        request.getfixturevalue("spark_session")  # the run's one session: examples get it, not a new one
    if "kafka" in needs:
        from tests.support.kafka_broker import KafkaBroker

        (tmp_path / "kafka").mkdir()
        broker = KafkaBroker.start(tmp_path / "kafka")
        request.addfinalizer(broker.stop)
        monkeypatch.setenv("KAFKA_BOOTSTRAP", broker.bootstrap)
    monkeypatch.chdir(tmp_path)  # examples that write files write them here
    namespace: dict = {"__name__": "__docs__"}
    for b in todo:
        code = compile(b.source, f"{_rel(page)}:{b.line}", "exec")
        exec(code, namespace)  # noqa: S102 - the example is the test


def test_examples_that_do_not_run_say_why_and_are_few():
    not_run = [b for p in PAGES for b in blocks(p) if b.not_run is not None]
    assert all(len(b.not_run) > 10 for b in not_run), [(b.page.name, b.line) for b in not_run]
    assert len(not_run) <= NOT_RUN_MAX, [(_rel(b.page), b.line, b.not_run) for b in not_run]


def test_every_guide_has_an_example_that_runs():
    guides = sorted((ROOT / "docs" / "guides").glob("*.md"))
    assert guides, "docs/guides/ has no page"
    assert [g.name for g in guides if g not in RUNNABLE] == []


def test_the_site_builds_strict(tmp_path):
    mkdocs = Path(sys.executable).with_name("mkdocs")
    proc = subprocess.run([str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").exists()
