"""A 3-member etcd on loopback (when the ``etcd`` binary is installed): LeaseGrant for comparison.

Members run in their own sessions with data and logs under ``root``; they
are stopped by pid (SIGTERM, then SIGKILL after 5 s).
"""

from __future__ import annotations

import http.client
import os
import subprocess
import time
import uuid

from bench.harness.processes import stop_popen
from raftsched.cluster.app.local_cluster import free_ports


class EtcdCluster:
    def __init__(self, root: str, binary: str, members: int = 3) -> None:
        self.root, self.binary = root, binary
        ports = free_ports(2 * members)
        self.names = [f"e{i + 1}" for i in range(members)]
        self.client_ports = ports[0::2]
        self.peer_ports = ports[1::2]
        self.procs: list[subprocess.Popen] = []

    @property
    def endpoints(self) -> list[tuple[str, int]]:
        return [("127.0.0.1", p) for p in self.client_ports]

    def start(self) -> None:
        initial = ",".join(f"{n}=http://127.0.0.1:{p}" for n, p in zip(self.names, self.peer_ports))
        token = f"bench-{uuid.uuid4().hex[:8]}"
        for name, cp, pp in zip(self.names, self.client_ports, self.peer_ports):
            data = os.path.join(self.root, name)
            os.makedirs(data, exist_ok=True)
            cmd = [
                self.binary,
                "--name", name,
                "--data-dir", data,
                "--listen-client-urls", f"http://127.0.0.1:{cp}",
                "--advertise-client-urls", f"http://127.0.0.1:{cp}",
                "--listen-peer-urls", f"http://127.0.0.1:{pp}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{pp}",
                "--initial-cluster", initial,
                "--initial-cluster-state", "new",
                "--initial-cluster-token", token,
            ]  # fmt: skip
            with open(os.path.join(self.root, f"{name}.log"), "ab") as log:
                self.procs.append(
                    subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=self.root, start_new_session=True)
                )

    def _healthy(self, host: str, port: int) -> bool:
        try:
            conn = http.client.HTTPConnection(host, port, timeout=1)
            conn.request("GET", "/health")
            body = conn.getresponse().read()
            conn.close()
            return b'"true"' in body
        except OSError:
            return False

    def wait_healthy(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self._healthy(host, port) for host, port in self.endpoints):
                return
            if any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"an etcd member exited; see the logs in {self.root}")
            time.sleep(0.2)
        raise TimeoutError(f"etcd not healthy within {timeout} s; see the logs in {self.root}")

    def stop(self) -> None:
        stop_popen(self.procs, grace_s=5.0)
