"""Client channels to a node: plaintext or TLS (optionally with a client certificate), and a bearer token.

``ChannelSecurity.from_files(ca_file=..., token=...)`` reads the PEM files once;
``open_channel`` then opens a channel that verifies the node's certificate
against that CA (and its name against the address dialled), presents the
client certificate when given (for ``[tls] client_auth``), and adds
``authorization: Bearer <token>`` to every call when a token is set. Without
a CA the channel is plaintext, and a token would travel in the clear: a
channel with a token opens without TLS only to a loopback address (or a
``unix:`` socket) unless ``ChannelSecurity.insecure`` says a network you
trust carries it (``--insecure``); otherwise ``open_channel`` raises
``PlaintextToken``, which says what to set. A node that does not answer a connection
attempt within ``CONNECT_TIMEOUT_MS`` is UNAVAILABLE, so clients move on to
the next node rather than time out on a dead machine.
"""

from __future__ import annotations

import ipaddress
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple, Sequence

import grpc

from raftsched.cluster.domain.errors import ConfigError


@dataclass(frozen=True)
class ChannelSecurity:
    #: TLS to the nodes (else plaintext)
    tls: bool = False
    #: PEM of the CA the nodes' certificates are checked against (None with ``tls``: the system's CAs)
    root_certificates: bytes | None = None
    #: PEM of this client's key and certificate, for nodes that require client certificates
    private_key: bytes | None = None
    certificate_chain: bytes | None = None
    #: sent as ``authorization: Bearer <token>`` with every call; "" = none
    token: str = ""
    #: send the token without TLS to an address that is not loopback (``--insecure``: a network you trust)
    insecure: bool = False

    @classmethod
    def from_files(
        cls,
        ca_file: str = "",
        cert_file: str = "",
        key_file: str = "",
        token: str = "",
        tls: bool = False,
        insecure: bool = False,
    ) -> "ChannelSecurity":
        """Read the PEM files now (TLS when ``ca_file`` or ``tls`` is given); ``ValueError`` naming a
        file that cannot be read, or a certificate without its key."""
        if bool(cert_file) != bool(key_file):
            raise ValueError("a client certificate needs both a certificate file and a key file")
        tls = tls or bool(ca_file)
        if cert_file and not tls:
            raise ValueError("a client certificate is used only over TLS: give the CA file too")
        key, chain = _read(key_file, "key file"), _read(cert_file, "certificate file")
        return cls(tls, _read(ca_file, "CA file"), key, chain, token.strip(), insecure)


class PlaintextToken(ConfigError):
    """A bearer token would go in the clear to an address that is not loopback."""


def is_local_target(address: str) -> bool:
    """Whether a gRPC target stays on this machine: a loopback address, ``localhost``, or a ``unix:`` socket."""
    if address.startswith("unix:"):
        return True
    target = address.removeprefix("dns:///").removeprefix("ipv4:").removeprefix("ipv6:")
    host = target.rsplit(":", 1)[0].strip("[]") if ":" in target else target
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_token_transport(addresses: Sequence[str], security: ChannelSecurity | None) -> None:
    """Raise ``PlaintextToken`` if ``security`` would send its token without TLS to one of ``addresses`` that
    is not loopback (and ``insecure`` does not allow it)."""
    if security is None or not security.token or security.tls or security.insecure:
        return
    remote = [a for a in addresses if not is_local_target(a)]
    if remote:
        raise PlaintextToken(
            f"refusing to send the bearer token without TLS to {', '.join(remote)}, which is not loopback: anyone "
            "on the way could read it and act as you. Give the cluster's CA to use TLS (--ca-file, or "
            "RAFTSCHED_CA_FILE, or ca_file in the client config), or pass --insecure if a network you trust "
            "carries it"
        )


def _read(path: str, what: str) -> bytes | None:
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ValueError(f"cannot read the {what} {path}: {exc.strerror}") from exc


#: how long one attempt to connect to a node (TCP and TLS handshakes) may take. gRPC's own minimum (20 s,
#: set by this channel argument despite its name) is longer than a call's timeout: against a dead machine
#: whose address drops packets (as a dead VM's does) every call would end in DEADLINE_EXCEEDED, which no
#: client retries on another node, instead of UNAVAILABLE after this long, which every client does
CONNECT_TIMEOUT_MS = 5000
_CONNECT_TIMEOUT_ARG = "grpc.min_reconnect_backoff_ms"


def open_channel(address: str, security: ChannelSecurity | None = None, options: Sequence[tuple[str, Any]] = ()) -> grpc.Channel:
    """A channel to ``address`` with ``security`` (None: plaintext, no token); a connection attempt gives up
    after ``CONNECT_TIMEOUT_MS`` unless ``options`` say otherwise. ``PlaintextToken``: see the module."""
    check_token_transport([address], security)
    args = list(options)
    if all(key != _CONNECT_TIMEOUT_ARG for key, _ in args):
        args.append((_CONNECT_TIMEOUT_ARG, CONNECT_TIMEOUT_MS))
    if security is None or not security.tls:
        channel = grpc.insecure_channel(address, options=args)
    else:
        creds = grpc.ssl_channel_credentials(security.root_certificates, security.private_key, security.certificate_chain)
        channel = grpc.secure_channel(address, creds, options=args)
    if security is not None and security.token:
        channel = grpc.intercept_channel(channel, BearerToken(security.token))
    return channel


def connects(channel: grpc.Channel, timeout_s: float = CONNECT_TIMEOUT_MS / 1000) -> bool:
    """Whether ``channel``'s connection is up, or comes up within ``timeout_s``: False as soon as it fails
    (a refused port), or after ``timeout_s`` (a dead machine that drops packets)."""
    settled = threading.Event()
    states: list[grpc.ChannelConnectivity] = []

    def seen(state: grpc.ChannelConnectivity) -> None:
        if state in (
            grpc.ChannelConnectivity.READY,
            grpc.ChannelConnectivity.TRANSIENT_FAILURE,
            grpc.ChannelConnectivity.SHUTDOWN,
        ):
            states.append(state)
            settled.set()

    channel.subscribe(seen, try_to_connect=True)
    try:
        settled.wait(timeout_s)
    finally:
        channel.unsubscribe(seen)
    return states[:1] == [grpc.ChannelConnectivity.READY]


#: how long ``close_channel`` waits for grpc's connectivity poller to stop (it looks again every 0.2 s)
POLLER_STOP_S = 1.0


def close_channel(channel: grpc.Channel, wait_s: float = POLLER_STOP_S) -> None:
    """Close ``channel`` once grpc's connectivity poller of it has stopped (at most ``wait_s`` later).

    ``connects`` subscribes to the channel's connectivity; grpc polls it on a thread of its own that stops
    within 0.2 s of the last unsubscribe, but a subscribe made while that thread still ran (two ``connects``
    close together) leaves it one more look, and a channel closed before that look makes the thread die with
    ``ValueError: Cannot invoke RPC: Channel closed!`` printed on the application's stderr (grpc/grpc#18995).
    The poller's state is grpc's own (``_connectivity_state``, behind an intercepted channel's
    ``_channel``); a grpc without it is closed at once, as before."""
    state = getattr(channel, "_connectivity_state", None)
    if state is None:
        state = getattr(getattr(channel, "_channel", None), "_connectivity_state", None)
    lock = getattr(state, "lock", None)
    if lock is not None:
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            with lock:
                if not getattr(state, "polling", False):
                    break
            time.sleep(0.01)
    channel.close()


class _Details(NamedTuple):
    method: str
    timeout: float | None
    metadata: Any
    credentials: Any
    wait_for_ready: Any
    compression: Any


class BearerToken(
    grpc.UnaryUnaryClientInterceptor,
    grpc.UnaryStreamClientInterceptor,
    grpc.StreamUnaryClientInterceptor,
    grpc.StreamStreamClientInterceptor,
):
    """Adds ``authorization: Bearer <token>`` to every call's metadata."""

    def __init__(self, token: str) -> None:
        self._entry = ("authorization", f"Bearer {token}")

    def _details(self, details: Any) -> Any:
        metadata = list(details.metadata or []) + [self._entry]
        return _Details(
            details.method, details.timeout, metadata, details.credentials, details.wait_for_ready, details.compression
        )

    def intercept_unary_unary(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Callable[..., Any], details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation: Callable[..., Any], details: Any, request_iterator: Any) -> Any:
        return continuation(self._details(details), request_iterator)

    def intercept_stream_stream(self, continuation: Callable[..., Any], details: Any, request_iterator: Any) -> Any:
        return continuation(self._details(details), request_iterator)
