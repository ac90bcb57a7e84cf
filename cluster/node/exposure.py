"""What a node serves on addresses that are not loopback, decided from its config before anything starts.

One rule for both listeners a person reaches: off loopback, the cluster's
jobs, payloads and run logs are served only with ``[tls]`` (nobody on the
way reads them) and ``[auth]`` (nobody without a token asks).

* **gRPC** (``grpc_exposure``): a node whose ``grpc`` or ``grpc_listen``
  address is not loopback refuses to start without both (``ConfigError``
  saying what to set).
* **HTTP** (``http_exposure``): a node whose ``http`` or ``http_listen``
  address is not loopback, without both, still starts and serves ``/metrics``
  and ``/healthz`` there (what Prometheus and probes need, and neither shows
  a job, a payload or a log) but not the web view; it says so in a warning
  at every start. The web view on such an address is not something to lose
  a node's monitoring over, nor to serve by accident.

Each has an explicit opt-out for a network or proxy that protects the port:
``[cluster] allow_insecure_grpc = true`` and ``[cluster] allow_insecure_http
= true``; the node then serves everything there and logs a warning at every
start (also when the opt-out has no effect, so that it is removed).
"""

from __future__ import annotations

from dataclasses import dataclass

from raftsched.cluster.domain.errors import ConfigError
from raftsched.cluster.node.config import ClusterConfig, is_loopback


@dataclass(frozen=True)
class HttpExposure:
    """What the node's HTTP endpoint serves, and the warning to log at start (None: nothing to say)."""

    web_view: bool
    warning: str | None = None


def _missing(cfg: ClusterConfig) -> list[str]:
    on = (("[tls]", cfg.tls is not None), ("[auth] tokens_file", bool(cfg.auth.tokens_file)))
    return [what for what, present in on if not present]


def _exposed(addresses: list[str]) -> list[str]:
    return [a for a in dict.fromkeys(addresses) if a and not is_loopback(a)]


def grpc_exposure(cfg: ClusterConfig, node_id: str) -> str | None:
    """Refuse to serve gRPC on a non-loopback address without both [tls] and [auth]; with
    ``allow_insecure_grpc`` return the warning to log instead (None: nothing to say)."""
    me = cfg.node(node_id)
    exposed = _exposed([me.grpc, me.grpc_listen])
    missing = _missing(cfg)
    if cfg.allow_insecure_grpc:
        if not missing:
            return f"{cfg.path}: [cluster] allow_insecure_grpc = true has no effect: [tls] and [auth] are both set; remove it"
        where = ", ".join(exposed) or f"{me.grpc} (loopback)"
        return (
            f"{cfg.path}: [cluster] allow_insecure_grpc = true: gRPC on {where} is served without "
            f"{' and without '.join(missing)}; whoever reaches it can read and change every job and "
            "run commands on the executors. Set [tls] and [auth] and remove allow_insecure_grpc"
        )
    if exposed and missing:
        raise ConfigError(
            f"{cfg.path}: node {node_id} would serve gRPC on {', '.join(exposed)}, which is not loopback, "
            f"without {' and without '.join(missing)}: anyone who reaches it could read and change every job "
            "and run commands on the executors. Configure [tls] (cert_file, key_file, ca_file) and [auth] "
            "tokens_file (see docs/config.md), or set [cluster] allow_insecure_grpc = true if a trusted "
            "network or proxy protects it"
        )
    return None


def http_exposure(cfg: ClusterConfig, node_id: str) -> HttpExposure:
    """Whether the node's HTTP endpoint serves the web view, and what to warn of (see the module docstring)."""
    me = cfg.node(node_id)
    if not me.http:
        return HttpExposure(web_view=True)
    exposed = _exposed([me.http, me.http_listen])
    missing = _missing(cfg)
    if cfg.allow_insecure_http:
        if not missing:
            return HttpExposure(
                True, f"{cfg.path}: [cluster] allow_insecure_http = true has no effect: [tls] and [auth] are both set; remove it"
            )
        where = ", ".join(exposed) or f"{me.http} (loopback)"
        return HttpExposure(
            True,
            f"{cfg.path}: [cluster] allow_insecure_http = true: the web view on {where} is served without "
            f"{' and without '.join(missing)}; whoever reaches it reads every job's payload and every run's log. "
            "Set [tls] and [auth] and remove allow_insecure_http",
        )
    if exposed and missing:
        return HttpExposure(
            False,
            f"{cfg.path}: node {node_id} serves HTTP on {', '.join(exposed)}, which is not loopback, without "
            f"{' and without '.join(missing)}: there it serves /metrics and /healthz only, not the web view (every "
            "job's payload and every run's log). Configure [tls] and [auth] tokens_file (see docs/config.md) to "
            "serve it, or set [cluster] allow_insecure_http = true if a trusted network or proxy protects it",
        )
    return HttpExposure(web_view=True)
