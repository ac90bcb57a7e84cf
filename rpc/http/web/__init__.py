"""The read-only web view on each node's HTTP endpoint: the cluster, jobs, a job, a run.

Server-rendered HTML from Jinja2 templates (autoescaped), no JavaScript, no
asset from outside (the style sheet is served by a route of ours). Pages
read through the node's services (``views.JobReader``, the cluster status);
under ``[auth]`` they ask for a reader token (``signin.WebAuth``). The app
wires it: ``raftsched.cluster.app.observability``.
"""

from raftsched.rpc.http.web.overview import ClusterOverview, MemberView, overview_of
from raftsched.rpc.http.web.session import Sessions, cookie_name
from raftsched.rpc.http.web.signin import TokenCheck, TokenVerdict, WebAuth
from raftsched.rpc.http.web.views import JobReader, WebView, add_web_routes

__all__ = [
    "ClusterOverview",
    "JobReader",
    "MemberView",
    "Sessions",
    "TokenCheck",
    "TokenVerdict",
    "WebAuth",
    "WebView",
    "add_web_routes",
    "cookie_name",
    "overview_of",
]
