"""The operations routes: ``GET /metrics`` (Prometheus) and ``GET /healthz`` (probes). Both are public:
Prometheus and probes carry no token, and neither shows a job, a run or a payload. Both answer whatever
the request's ``Host`` (``any_host``): probes and Prometheus reach a node under addresses it cannot know
(a pod's IP, a load balancer's name), and what a page under a rebound name could read here is what any
scraper reads."""

from __future__ import annotations

from typing import Callable

from raftsched.cluster.node.health import Health
from raftsched.rpc.http.router import Request, Response, Router

#: ``exposition(accept_header) -> (body, content type)``
Exposition = Callable[[str], tuple[bytes, str]]


def add_ops_routes(router: Router, health: Callable[[], Health], exposition: Exposition | None) -> None:
    """``/healthz`` always; ``/metrics`` when ``exposition`` is given."""

    def healthz(request: Request) -> Response:
        now = health()
        return Response.text(200 if now.serving else 503, now.reason)

    router.add("/healthz", healthz, public=True, any_host=True)
    if exposition is not None:
        metrics = exposition

        def metrics_page(request: Request) -> Response:
            body, content_type = metrics(request.header("accept"))
            return Response(200, body, content_type)

        router.add("/metrics", metrics_page, public=True, any_host=True)
