"""A real S3-compatible server (moto_server) on loopback, for the contract and integration tiers.

Each ``MotoServer`` is a separate ``python -m moto.server`` process on a free
loopback port, started by a test and stopped by pid (``kill``). ``AWS_ENV``
holds the fake credentials boto3 needs, in this process (``aws_environment``)
and in every node and executor started from it. The fixtures that use these
(``aws_env``, ``s3``) are in ``tests/conftest.py``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import urllib.request
from typing import Any, Iterator

from raftsched.cluster.app.local_cluster import free_ports
from tests.helpers import wait_for

BUCKET = "raftsched-runs"
REGION = "us-east-1"
AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_EC2_METADATA_DISABLED": "true",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


class MotoServer:
    """One moto S3 server process on 127.0.0.1; its output goes to ``<root>/<name>.log``."""

    def __init__(self, root: str, name: str, env: dict[str, str] | None = None) -> None:
        (self.port,) = free_ports(1)
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = os.path.join(root, f"{name}.log")
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=True,
            )
        wait_for(self._up, 30, f"moto_server on port {self.port}", interval=0.2)

    def _up(self) -> bool:
        assert self.proc.poll() is None, f"moto_server exited; see {self.log_path}"
        try:
            with urllib.request.urlopen(f"{self.url}/moto-api/", timeout=1):
                return True
        except OSError:
            return False

    def client(self) -> Any:
        """A plain boto3 S3 client of this server (for a test's own look at the bucket)."""
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.url, region_name=REGION, aws_access_key_id="testing", aws_secret_access_key="testing"
        )

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


@contextlib.contextmanager
def aws_environment() -> Iterator[None]:
    """``AWS_ENV`` in ``os.environ`` for the duration, then the environment as it was."""
    saved = {k: os.environ.get(k) for k in AWS_ENV}
    os.environ.update(AWS_ENV)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
