"""`squall run FILE --ui [PORT]`: the page and API are served by the process running the
topology, on 127.0.0.1; killing the topology from the UI ends the run cleanly."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from rich.console import Console

from squall.cli import _watch, main
from tests.support.ui_topology import get, post

ROOT = Path(__file__).resolve().parents[2]


def test_run_with_ui_serves_the_api_and_a_kill_from_the_ui_ends_the_run():
    proc = subprocess.Popen([sys.executable, "-m", "squall.cli", "run", "examples/wordcount.py", "--engine", "local",
                             "--seconds", "0", "--ui", "0"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in proc.stdout:  # the run prints the UI's address before it starts watching
            if line.startswith("squall UI: "):
                url = line.split(": ", 1)[1].strip()
                break
        assert url is not None and url.startswith("http://127.0.0.1:")
        status, doc = get(url + "api/v1/topology/summary")
        assert status == 200 and [t["name"] for t in doc["topologies"]] == ["wordcount"]
        status, page = get(url + "api/v1/topology/wordcount")
        assert status == 200 and {b["boltId"] for b in page["bolts"]} == {"split", "count"}
        assert post(url + "api/v1/topology/wordcount/kill")[0] == 200
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, out + err
        assert "killed from the UI" in out and "Traceback" not in err
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()


class _KilledWhileWatched:
    """A cluster whose topology is killed from the UI right after the watch loop saw it running
    (the names read): every read of it from then on raises KeyError, as LocalCluster's do for a
    name it no longer has."""

    def __init__(self) -> None:
        self.names = ["t"]
        self.killed: list[str] = []

    def topology_names(self) -> list[str]:
        names, self.names = self.names, []
        return names

    def _running(self, name: str) -> None:
        if not self.names:
            raise KeyError(name)

    def get_crash(self, name: str) -> None:
        self._running(name)

    def coordinator(self, name: str) -> SimpleNamespace:
        self._running(name)
        return SimpleNamespace(waves_done=0, pending_count=0, error_count=0, stats_dict=dict)

    def get_topology_stats(self, name: str) -> dict:
        self._running(name)
        return {}

    def kill_topology(self, name: str) -> None:
        self.killed.append(name)


def test_a_kill_from_the_ui_between_the_watch_loops_reads_ends_the_run_cleanly():
    cluster = _KilledWhileWatched()
    console = Console(record=True, force_terminal=False, width=200)
    code, crash, _ = _watch(SimpleNamespace(seconds=0), cluster, "t", None, console)
    assert (code, crash, cluster.killed) == (0, None, [])
    assert "killed from the UI" in console.export_text()


def test_a_port_in_use_is_a_clear_usage_error(capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        code = main(["run", str(ROOT / "examples" / "wordcount.py"), "--engine", "local", "--seconds", "1",
                     "--ui", str(port)])
    assert code == 2
    err = capsys.readouterr().err
    assert f"cannot listen on 127.0.0.1:{port}" in err and "pick another port" in err
