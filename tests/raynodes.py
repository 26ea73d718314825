"""A real Ray cluster on this machine for the tests: a head and more nodes, each a ``ray start --block``
process in a session of its own, so that one node (its raylet and its workers) can be killed alone.

The nodes listen on 127.0.0.2: Ray replaces 127.0.0.1 with the machine's network address, and keeps any
other loopback address, so the cluster's traffic stays on the loopback device. Ports are picked free,
the temporary folder is short (Ray's socket paths must fit in 107 bytes) and removed at the end, and
usage statistics are off (the tests never reach the network).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAY = Path(sys.executable).with_name("ray")
HOST = "127.0.0.2"
STARTED = "will now block forever"  # what `ray start --block` prints once its node is up
START_TIMEOUT_S = 120


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _session_pids(sid: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.getsid(int(entry.name)) == sid:
                    pids.append(int(entry.name))
            except (ProcessLookupError, PermissionError):
                continue
    return pids


class RayNode:
    """One node: ``ray start --block`` in a new session; its raylet and workers share that session."""

    def __init__(self, args: list[str], log: Path):
        if not RAY.is_file():
            raise RuntimeError(f"no `ray` command at {RAY}: pip install 'tcmqa[ray]' (the dev extra has it)")
        self.log = log
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        with log.open("w") as sink:
            self.process = subprocess.Popen(
                [str(RAY), "start", "--block", "--disable-usage-stats", "--node-ip-address", HOST, *args],
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while STARTED not in log.read_text():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise RuntimeError(f"the Ray node did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)

    def holds(self, pid: int) -> bool:
        """Whether process ``pid`` (a Ray worker) runs on this node."""
        try:
            return os.getsid(pid) == self.process.pid
        except ProcessLookupError:
            return False

    def kill(self) -> None:
        """SIGKILL every process of the node at once: a node lost, not stopped."""
        for pid in _session_pids(self.process.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        self.process.wait(timeout=30)

    def stop(self) -> None:
        """Stop the node (``ray start --block`` ends its processes on SIGTERM), killing what is left after 20 s."""
        if self.process.poll() is None:
            self.process.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=20)
        self.kill()


class RayCluster:
    """A head (``add_node()`` first) and more nodes (later ``add_node()``), one CPU each by default."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))
        self.port = _free_port()
        self.address = f"{HOST}:{self.port}"
        self.nodes: list[RayNode] = []

    def add_node(self, num_cpus: int = 1) -> RayNode:
        common = ["--num-cpus", str(num_cpus), "--object-store-memory", str(100 * 2**20)]
        common += ["--dashboard-agent-listen-port", str(_free_port())]
        if not self.nodes:
            role = ["--head", "--port", str(self.port), "--temp-dir", str(self.dir / "tmp")]
            role += ["--include-dashboard", "false", "--dashboard-port", str(_free_port())]
            role += ["--ray-client-server-port", str(_free_port())]
        else:
            role = ["--address", self.address]
        node = RayNode(role + common, self.dir / f"node-{len(self.nodes)}.log")
        self.nodes.append(node)
        return node

    def close(self) -> None:
        for node in reversed(self.nodes):
            node.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> RayCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
