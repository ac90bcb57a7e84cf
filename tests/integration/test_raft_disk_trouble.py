"""A replica whose disk refuses writes stays up and catches up, with real RaftNodes (pysyncobj, LMDB journals,
sockets on loopback): its state machine's store refuses an entry, or its Raft log refuses a commit (an injected
I/O error), on the leader and on a follower. The entry is held, never skipped nor applied twice, the tick thread
does not spin, a leader steps down at once and another is elected, the others go on committing, and once the
disk takes writes again the replica applies everything in order, as the others did."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import pytest

from raftsched.cluster.app.local_cluster import free_ports
from raftsched.raft import disk_trouble
from raftsched.raft.adapter import ProposalError, RaftNode, RaftSettings
from raftsched.raft.snapshotter import BytesCopy
from tests.integration.test_raft_port import leader_of
from tests.unit.test_journal_disk_trouble import EIO, FailingEnv

pytestmark = pytest.mark.integration

PROBLEM = "disk full: /somewhere/state.mdb (0.0 MiB free): free space on its disk or grow it; the node resumes by itself"


class Refused(Exception):
    """What a store raises for an entry it cannot take now (``raftsched.cluster.fsm.store.StoreFailure``'s shape)."""

    def __init__(self, kept: bool) -> None:
        super().__init__(PROBLEM)
        self.storage_problem = PROBLEM
        self.kept = kept


class Ledger:
    """A state machine that records every entry it stores, in order; its store refuses commits while ``refuse``."""

    def __init__(self) -> None:
        self.stored: list[tuple[int, bytes]] = []
        self._pending: list[tuple[int, bytes]] = []
        self.refuse = False
        self.kept = True
        self.tries = 0
        self.rollbacks = 0

    @property
    def committed_index(self) -> int:
        return self.stored[-1][0] if self.stored else 0

    def apply(self, data: bytes, index: int, pos: int) -> Any:
        if index <= self.committed_index:
            return None
        self._pending.append((index, data))
        return index

    def commit(self) -> None:
        self.tries += 1
        if self.refuse:
            if not self.kept:
                self._pending = []  # the store lost the batch
            raise Refused(self.kept)
        self.stored.extend(self._pending)
        self._pending = []

    def rollback(self) -> None:
        self.rollbacks += 1
        self._pending = []

    def commands(self) -> list[bytes]:
        return [data for _, data in self.stored if data.startswith(b"cmd-")]

    def open_copy(self) -> BytesCopy:
        return BytesCopy(b"")

    def install(self, source: BinaryIO, size: int) -> None:
        source.read(size)

    def restore(self, data: bytes) -> None:
        pass

    def has_room(self) -> bool:
        return True

    def full_message(self) -> str:
        return ""


def _nodes(tmp_path: Path, count: int) -> tuple[list[RaftNode], list[Ledger], list[list[str | None]]]:
    addrs = [f"127.0.0.1:{p}" for p in free_ports(count)]
    nodes, ledgers, heard = [], [], []
    for i, a in enumerate(addrs):
        settings = RaftSettings(
            self_address=a, peer_addresses=tuple(x for x in addrs if x != a), journal_file=str(tmp_path / f"n{i}" / "raft.lmdb")
        )
        ledger = Ledger()
        node = RaftNode(settings, ledger, threading.RLock())
        said: list[str | None] = []
        node.on_storage(said.append)
        nodes.append(node)
        ledgers.append(ledger)
        heard.append(said)
    return nodes, ledgers, heard


@pytest.fixture()
def three(tmp_path: Path) -> Iterator[tuple[list[RaftNode], list[Ledger], list[list[str | None]]]]:
    made = _nodes(tmp_path, 3)
    try:
        leader_of(made[0])
        yield made
    finally:
        for node in made[0]:
            node.stop()


def _propose(nodes: list[RaftNode], data: bytes, deadline_s: float = 20.0) -> None:
    """Propose ``data`` on whichever node leads until it commits (a client retrying with the same command)."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        leaders = [n for n in nodes if n.is_leader()]
        if leaders:
            try:
                leaders[0].propose(data, timeout=3)
                return
            except ProposalError:
                pass
        time.sleep(0.1)
    raise AssertionError(f"{data!r} did not commit in {deadline_s} s")


def _wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {what}")


def _all_agree(ledgers: list[Ledger], expected: list[bytes]) -> None:
    """Every replica stored the same entries, each once and in order, and they hold every expected command (a
    proposal retried after a timeout may have committed twice, as a client's retry may: each entry once)."""

    def agree() -> bool:
        first = ledgers[0].stored
        return set(expected) <= set(ledgers[0].commands()) and all(ledger.stored == first for ledger in ledgers)

    _wait(agree, 30, "every replica stored every command, in order")
    indexes = [index for index, _ in ledgers[0].stored]
    assert indexes == sorted(set(indexes)), "an entry stored twice or out of order"


def test_a_single_node_holds_the_entry_its_store_refuses_and_answers_once_it_is_stored(tmp_path: Path) -> None:
    nodes, (ledger,), (heard,) = _nodes(tmp_path, 1)
    node = nodes[0]
    try:
        leader_of(nodes)
        node.propose(b"cmd-1", timeout=5)
        ledger.refuse = True
        answers: list[Any] = []
        proposer = threading.Thread(target=lambda: answers.append(node.propose(b"cmd-2", timeout=15)))
        proposer.start()
        _wait(lambda: node.storage_problem() == PROBLEM, 5, "the node names its disk")
        _wait(lambda: heard[-1] is not None, 2, "the layer above is told")  # right after, on the same thread
        assert heard[-1] == PROBLEM and not answers
        tries = ledger.tries
        time.sleep(2.5)
        assert ledger.tries - tries <= 4, "a held entry is tried about once a second, not every tick"
        with pytest.raises(ProposalError) as refused:
            node.propose(b"cmd-3", timeout=5)
        assert refused.value.reason in ("DISK_TROUBLE", "MISSING_LEADER") and not node.is_leader()
        ledger.refuse = False
        proposer.join(15)
        assert answers and answers[0] == ledger.stored[-1][0], "the proposer hears back, with what its entry applied to"
        _wait(lambda: node.storage_problem() is None and heard[-1] is None, 5, "the problem is cleared")
        _propose(nodes, b"cmd-3")
        assert ledger.commands() == [b"cmd-1", b"cmd-2", b"cmd-3"]  # each once: nothing skipped, nothing twice
    finally:
        node.stop()


@pytest.mark.parametrize("kept", [True, False], ids=["commit-retried", "applied-again"])
def test_a_leader_whose_store_refuses_steps_down_and_catches_up_later(three, kept: bool) -> None:  # type: ignore[no-untyped-def]
    nodes, ledgers, heard = three
    _propose(nodes, b"cmd-0")
    old = leader_of(nodes)
    i = nodes.index(old)
    ledgers[i].kept = kept
    ledgers[i].refuse = True
    began = time.monotonic()
    _propose(nodes, b"cmd-1")  # the old leader cannot store it: it steps down, another leads
    _wait(lambda: not old.is_leader(), 2, "the unfit leader steps down")
    new = leader_of(nodes)
    assert new is not old and time.monotonic() - began < 5
    _wait(lambda: heard[i][-1] is not None, 2, "the layer above is told")
    assert heard[i][-1] == PROBLEM
    for k in range(2, 6):
        _propose(nodes, b"cmd-%d" % k)
    assert ledgers[i].commands() == [b"cmd-0"], "nothing is applied past the held entry"
    assert (ledgers[i].rollbacks == 0) if kept else (ledgers[i].rollbacks >= 1)
    ledgers[i].refuse = False
    _all_agree(ledgers, [b"cmd-%d" % k for k in range(6)])
    _wait(lambda: old.storage_problem() is None, 5, "the problem is cleared")


class SwitchedEnv(FailingEnv):
    """A ``FailingEnv`` whose failures left are shared with the test (and with the environments opened again)."""

    def __init__(self, env: Any, left: dict[str, int]) -> None:
        self._env, self.error, self.commits, self._left = env, EIO, 0, left

    @property  # type: ignore[override]
    def failures(self) -> int:
        return self._left["n"]

    @failures.setter
    def failures(self, value: int) -> None:
        self._left["n"] = value


def _fail_journal(node: RaftNode, monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Make ``node``'s Raft log refuse every commit (an I/O error) until ``left["n"]`` is set to 0."""
    journal = node._journal
    assert journal is not None
    left = {"n": 10**9}
    real_open = journal._open_env
    monkeypatch.setattr(journal, "_open_env", lambda: SwitchedEnv(real_open(), left))
    journal._env = SwitchedEnv(journal._env, left)
    return left


@pytest.mark.parametrize("who", ["leader", "follower"])
def test_a_node_whose_log_refuses_commits_says_nothing_it_did_not_write_and_catches_up(three, who: str, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    nodes, ledgers, heard = three
    monkeypatch.setattr(disk_trouble, "describe", lambda path, exc: f"disk failing: {path}: {exc}")
    _propose(nodes, b"cmd-0")
    leader = leader_of(nodes)
    victim = leader if who == "leader" else next(n for n in nodes if n is not leader)
    i = nodes.index(victim)
    left = _fail_journal(victim, monkeypatch)
    began = time.monotonic()
    _propose(nodes, b"cmd-1")
    _wait(lambda: victim.storage_problem() is not None, 5, "the node names its disk")
    # the layer above hears it right after (the hook runs once the problem is recorded, on the same thread)
    _wait(lambda: heard[i][-1] is not None, 2, "the layer above is told")
    assert (victim.storage_problem() or "").startswith("disk failing: ") and "Input/output error" in (heard[i][-1] or "")
    if who == "leader":
        _wait(lambda: not victim.is_leader(), 2, "the leader steps down")
        assert leader_of(nodes) is not victim and time.monotonic() - began < 6
    for k in range(2, 6):
        _propose(nodes, b"cmd-%d" % k)
    assert not victim.is_leader()
    leader = leader_of(nodes)
    matched = leader.membership.match_index(victim.settings.self_address)
    _propose(nodes, b"cmd-6")
    time.sleep(0.5)
    assert leader.membership.match_index(victim.settings.self_address) == matched, "it acknowledged what it did not write"
    left["n"] = 0
    _all_agree(ledgers, [b"cmd-%d" % k for k in range(7)])
    _wait(lambda: victim.storage_problem() is None and heard[i][-1] is None, 5, "the problem is cleared")
    _wait(lambda: leader.membership.match_index(victim.settings.self_address) > matched, 5, "it acknowledges again")
