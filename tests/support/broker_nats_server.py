"""A nats-server of the test's own, with user/password auth and JetStream: the NATS on this
machine has no auth, and a password test must be refused by a real server, not by a missing one.

The server picks a free port itself (-p -1) and writes it to a ports file; the test stops it by
its own pid.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.support.broker_services import need_service, wait_until

NATS_SERVER = os.environ.get("SQUALL_TEST_NATS_SERVER") or shutil.which("nats-server") or "/usr/sbin/nats-server"


def _check_binary() -> None:
    if not os.access(NATS_SERVER, os.X_OK):
        raise FileNotFoundError(f"{NATS_SERVER} is not an executable")


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
        return True
    except OSError:
        return False


@contextlib.contextmanager
def nats_server_with_auth(workdir: Path, user: str, password: str) -> Iterator[str]:
    """Run `nats-server -a 127.0.0.1 -p -1 --user USER --pass PASSWORD -js` (store in `workdir`)
    until the block ends; yields its URL, without credentials."""
    need_service("nats-server (binary)", NATS_SERVER, _check_binary)
    workdir.mkdir(parents=True, exist_ok=True)
    log = workdir / "nats-server.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen([NATS_SERVER, "-a", "127.0.0.1", "-p", "-1", "--user", user, "--pass", password,
                                 "-js", "-sd", str(workdir / "jetstream"), "--ports_file_dir", str(workdir)],
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        ports_file = workdir / f"{Path(NATS_SERVER).name}_{proc.pid}.ports"

        def up() -> bool:
            assert proc.poll() is None, f"nats-server exited with {proc.returncode}: {log.read_text()[-2000:]}"
            return ports_file.exists() and bool(ports_file.read_text().strip())

        wait_until(up, 20, lambda: f"nats-server to write {ports_file} ({glob.glob(str(workdir / '*'))})")
        url = json.loads(ports_file.read_text())["nats"][0]
        port = int(url.rsplit(":", 1)[1])
        wait_until(lambda: _accepts(port), 20, f"nats-server to accept on port {port}")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
