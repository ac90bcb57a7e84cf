"""pysyncobj is patched by an explicit, idempotent call, never as a side effect of an import."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.unit

_PROBE = """
import socket
import pysyncobj.syncobj as s, pysyncobj.transport as t, pysyncobj.serializer as z
import raftsched.raft, raftsched.raft.adapter, raftsched.raft.pysyncobj_patches as p
def state():
    return (s.getEncryptor.__module__, t.TcpConnection.__module__, z.atomicReplace.__module__, p.installed())
print(state())
from raftsched.raft.adapter import RaftSettings, build_conf
build_conf(RaftSettings(self_address="127.0.0.1:7001", peer_addresses=()), None, None, None)
print(state())
p.install(); p.install()
print(state(), socket.inet_ntop(socket.AF_INET, bytes([127, 0, 0, 1])))
"""


def test_importing_patches_nothing_and_install_is_explicit_and_idempotent() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=60, check=True)
    before, built, again = out.stdout.splitlines()
    assert before == "('pysyncobj.encryptor', 'pysyncobj.tcp_connection', 'posix', False)"
    assert built == "('raftsched.raft.cipher', 'raftsched.raft.connection', 'raftsched.raft.pysyncobj_patches', True)"
    assert again == "('raftsched.raft.cipher', 'raftsched.raft.connection', 'raftsched.raft.pysyncobj_patches', True) 127.0.0.1"
