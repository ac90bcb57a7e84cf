"""The asyncio client (``grpc.aio``): any node, retries on UNAVAILABLE, and a WatchRuns that fails over.

``AioClient(addresses, security=...)`` is ``raftsched.rpc.client.client.Client``
for coroutines: a channel per node (opened on first use, inside the running
loop), each call sent to the node that answered last; UNAVAILABLE moves to the
next node with exponential backoff and jitter until ``deadline_s``; a call no
node ever answered raises ``ClusterUnreachable``. Mutating JobService calls
carry a ``request_id`` that every retry repeats (``with_request_id``), so a
retried call is applied once. The bearer token travels as call metadata; TLS
as the sync client's (``ChannelSecurity``), a token in the clear off loopback
refused (``check_token_transport``).

``AioRunFollower`` is ``raftsched.rpc.client.watch.RunFollower`` as an async
iterator: bookmarks asked for, the last position remembered, a broken stream
resumed on the next node after it, OUT_OF_RANGE answered by watching the
existing runs again, ``ClusterUnreachable`` once no node streams for
``give_up_s``; ``cancel()`` ends it.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any, AsyncIterator, Callable, Sequence

import grpc
import grpc.aio

from raftsched.protos.raftsched.v1 import scheduler_pb2 as pb
from raftsched.protos.raftsched.v1 import scheduler_pb2_grpc as pb_grpc
from raftsched.rpc.client.channel import CONNECT_TIMEOUT_MS, ChannelSecurity, check_token_transport
from raftsched.rpc.client.client import MAX_PAUSE_S, MIN_TRY_S, with_request_id
from raftsched.rpc.client.errors import ClusterUnreachable, describe, unreachable

_STUBS = {"job": pb_grpc.JobServiceStub, "lease": pb_grpc.LeaseServiceStub, "cluster": pb_grpc.ClusterServiceStub}
#: a stream that broke with one of these is taken up on the next node
_FAILOVER = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.UNKNOWN,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
}


class AioClient:
    """Calls any node of a cluster from coroutines (see the module)."""

    def __init__(
        self,
        addresses: Sequence[str],
        deadline_s: float = 15.0,
        call_timeout_s: float = 10.0,
        security: ChannelSecurity | None = None,
        connect_timeout_s: float = CONNECT_TIMEOUT_MS / 1000,
    ) -> None:
        if not addresses:
            raise ValueError("give at least one node address (host:port)")
        check_token_transport(addresses, security)
        self.addresses = list(addresses)
        self.deadline_s = deadline_s
        self.call_timeout_s = call_timeout_s
        self.security = security
        #: where the addresses came from, named when no node answers
        self.source = ""
        self._options = [
            ("grpc.max_receive_message_length", 64 << 20),
            ("grpc.min_reconnect_backoff_ms", int(connect_timeout_s * 1000)),
            ("grpc.initial_reconnect_backoff_ms", 250),
            ("grpc.max_reconnect_backoff_ms", 2000),
        ]
        self._channels: list[grpc.aio.Channel | None] = [None] * len(self.addresses)
        self._stubs: list[dict[str, Any]] = [{} for _ in self.addresses]
        self._current = random.randrange(len(self.addresses))
        self._metadata = (("authorization", f"Bearer {security.token}"),) if security and security.token else ()

    @property
    def current_address(self) -> str:
        return self.addresses[self._current]

    def rotate(self) -> str:
        """Send the next calls (and watches) to the next node; its address."""
        self._current = (self._current + 1) % len(self.addresses)
        return self.current_address

    def _stub(self, service: str, i: int) -> Any:
        if self._channels[i] is None:
            address, security = self.addresses[i], self.security
            if security is not None and security.tls:
                creds = grpc.ssl_channel_credentials(security.root_certificates, security.private_key, security.certificate_chain)
                self._channels[i] = grpc.aio.secure_channel(address, creds, options=self._options)
            else:
                self._channels[i] = grpc.aio.insecure_channel(address, options=self._options)
        stubs = self._stubs[i]
        if service not in stubs:
            stubs[service] = _STUBS[service](self._channels[i])
        return stubs[service]

    async def call(self, service: str, method: str, request: Any, timeout: float | None = None) -> Any:
        """One unary call of ``service`` (``"job"``, ``"lease"``, ``"cluster"``), retried across nodes."""
        if service == "job":
            request = with_request_id(method, request)
        deadline = time.monotonic() + self.deadline_s
        delay, answered = 0.05, False
        while True:
            stub = self._stub(service, self._current)
            try:
                left = max(MIN_TRY_S, deadline - time.monotonic())
                return await getattr(stub, method)(
                    request, timeout=min(timeout or self.call_timeout_s, left), metadata=self._metadata
                )
            except grpc.RpcError as exc:
                lost = unreachable(exc)
                answered = answered or not lost
                if exc.code() != grpc.StatusCode.UNAVAILABLE:
                    if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                        self.rotate()  # the node did not answer in time: the next call starts elsewhere
                    raise
                pause = min(delay * (0.5 + random.random()), MAX_PAUSE_S)
                self.rotate()
                if time.monotonic() + pause > deadline:
                    if not answered:
                        raise ClusterUnreachable(self.addresses, exc, self.source) from None
                    raise
                await asyncio.sleep(pause)
                delay = min(delay * 2, 1.0)

    def stream(self, service: str, method: str, request: Any, timeout: float | None = None) -> Any:
        """A server stream on the current node (a ``grpc.aio`` call: iterate it, ``cancel()`` ends it)."""
        return getattr(self._stub(service, self._current), method)(request, timeout=timeout, metadata=self._metadata)

    async def close(self) -> None:
        for i, channel in enumerate(self._channels):
            if channel is not None:
                await channel.close()
                self._channels[i] = None
                self._stubs[i] = {}


class AioRunFollower:
    """WatchRuns across node failures, resumed where it broke (see the module)."""

    def __init__(
        self,
        client: AioClient,
        job_id: str = "",
        queue: str = "",
        kinds: list[str] | None = None,
        include_existing: bool = False,
        notices: Callable[[str], None] = lambda _text: None,
        give_up_s: float = 30.0,
        first_give_up_s: float = 2.0,
    ) -> None:
        self.client = client
        self.job_id, self.queue, self.kinds = job_id, queue, list(kinds or [])
        self.include_existing = include_existing
        self.notices = notices
        self.give_up_s, self.first_give_up_s = give_up_s, first_give_up_s
        self.position: tuple[int, int] | None = None
        self.answered = False
        self._call: Any = None
        self._stopped = False

    def cancel(self) -> None:
        """End the iteration: the stream is cancelled and no other node is tried."""
        self._stopped = True
        if self._call is not None:
            self._call.cancel()

    async def __aiter__(self) -> AsyncIterator[pb.RunEvent]:
        existing = self.include_existing
        down_since: float | None = None
        down: set[str] = set()
        while not self._stopped:
            try:
                async for event in self._one_stream(existing):
                    down_since = None
                    yield event
                why = "the stream ended"
            except grpc.RpcError as exc:
                code = exc.code()
                if self._stopped:
                    return
                if code == grpc.StatusCode.OUT_OF_RANGE:
                    self.notices(
                        f"{self.client.current_address} no longer holds the changes after the last one seen: watching again"
                    )
                    self.position, existing = None, True
                    continue
                if code not in _FAILOVER:
                    raise
                why = describe(exc)
                if unreachable(exc):
                    now = time.monotonic()
                    if down_since is None:  # an outage begins: count the nodes tried in it
                        down_since, down = now, set()
                    down.add(self.client.current_address)
                    limit = self.give_up_s if self.answered else self.first_give_up_s
                    if now - down_since >= limit and len(down) == len(self.client.addresses):
                        raise ClusterUnreachable(self.client.addresses, exc, self.client.source) from None
            except asyncio.CancelledError:
                if self._stopped:  # our own cancel(): end quietly
                    return
                raise
            if self._stopped:
                return
            self.notices(f"{self.client.current_address} stopped streaming ({why}); resuming on another node")
            self.client.rotate()
            await asyncio.sleep(0.1 if down_since is None else 0.25)

    async def _one_stream(self, existing: bool) -> AsyncIterator[pb.RunEvent]:
        req = pb.WatchRunsRequest(
            job_id=self.job_id,
            queue=self.queue,
            include_existing=existing and self.position is None,
            kinds=self.kinds,
            bookmarks=True,
        )
        if self.position is not None:
            req.resume_after.index, req.resume_after.position = self.position
        self._call = self.client.stream("job", "WatchRuns", req)
        try:
            async for event in self._call:
                self.answered = True
                if event.index:
                    point = (event.index, event.position)
                    if self.position is not None and point <= self.position:
                        continue
                    self.position = point
                if event.kind != "bookmark":
                    yield event
        except asyncio.CancelledError:
            self._call.cancel()
            raise
