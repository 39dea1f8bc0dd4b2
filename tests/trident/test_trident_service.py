"""The driver service that tasks in other processes call (DRPC results, MemoryMapState on
Spark): a real second Python process talks to this one over the socket."""

from __future__ import annotations

import pickle
import subprocess
import sys

from squall.trident import MemoryMapState
from squall.trident.service import register, service_address

CLIENT = """
import pickle, sys
from squall.trident.service import call
from squall.trident.state.memory import MemoryStateFactory
addr, factory = pickle.loads(sys.stdin.buffer.read())
out = []
for topic in ("no.such.topic", "test.boom"):
    try:
        call(addr, topic, 1)
        out.append("no error")
    except Exception as e:
        out.append(f"{type(e).__name__}: {e}")
state = factory.make_state({}, 0, 1)          # made in another process: reads and writes the driver's dict
out.append(type(state.backing).__name__)
out.append(repr(state.multi_get([["seen"], ["absent"]])))
state.begin_commit(2)
state.multi_update([["seen"], ["new"]], [lambda old: (old or 0) + 10, lambda old: (old or 0) + 1])
state.commit(2)
print(pickle.dumps(out).hex())
"""


def _boom(x):
    raise KeyError(f"bad {x}")


def test_a_task_in_another_process_reads_and_writes_the_drivers_memory_state():
    register("test.boom", _boom)
    factory = MemoryMapState.factory("transactional")
    driver_side = factory.make_state({}, 0, 1)
    driver_side.begin_commit(1)
    driver_side.multi_put([["seen"]], [5])
    driver_side.commit(1)
    served = factory.served_from_driver()
    proc = subprocess.run([sys.executable, "-c", CLIENT], input=pickle.dumps((service_address(), served)),
                          capture_output=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr.decode()
    out = pickle.loads(bytes.fromhex(proc.stdout.decode().split()[-1]))
    assert out[0].startswith("RuntimeError: the driver answered 'no.such.topic' with LookupError")
    assert out[1] == "RuntimeError: the driver answered 'test.boom' with KeyError: 'bad 1'"
    assert out[2] == "RemoteMemoryMapState"
    assert out[3] == "[5, None]"
    # the other process's commit is in this process's dict
    assert factory.make_state({}, 0, 1).multi_get([["seen"], ["new"]]) == [15, 1]
    assert sorted((k[0], v) for k, v in factory.items()) == [("new", 1), ("seen", 15)]


def test_a_client_without_the_key_is_refused_and_the_service_goes_on():
    addr = service_address()
    code = ("from multiprocessing.connection import Client\n"
            f"try:\n    Client(('{addr.host}', {addr.port}), authkey=b'wrong')\n    print('accepted')\n"
            "except Exception as e:\n    print('refused', type(e).__name__)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120, check=False)
    assert proc.stdout.decode().startswith("refused"), proc.stdout.decode() + proc.stderr.decode()
    register("test.echo", lambda x: x)
    proc = subprocess.run([sys.executable, "-c",
                           "import pickle,sys\nfrom squall.trident.service import call\n"
                           "print(call(pickle.loads(sys.stdin.buffer.read()), 'test.echo', 'still here'))"],
                          input=pickle.dumps(addr), capture_output=True, timeout=120, check=False)
    assert proc.stdout.decode().strip() == "still here", proc.stderr.decode()
