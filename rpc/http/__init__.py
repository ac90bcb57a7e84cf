"""The node's HTTP endpoint (``[[nodes]] http``): a WSGI router served by one event-loop thread and a few worker
threads (``raftsched.rpc.http.server``), with the operations routes (``/metrics``, ``/healthz``) and the node's Prometheus
metrics. The web view (``raftsched.rpc.http.web``) is added as routes."""

from raftsched.rpc.http.metrics import METRICS, NodeMetrics
from raftsched.rpc.http.router import Request, Response, Router, bearer_reader
from raftsched.rpc.http.server import HttpServer

__all__ = ["METRICS", "HttpServer", "NodeMetrics", "Request", "Response", "Router", "bearer_reader"]
