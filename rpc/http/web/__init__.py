"""The web view on each node's HTTP endpoint: the cluster, jobs, a job, a run; under ``[auth]``, its actions.

Server-rendered HTML from Jinja2 templates (autoescaped), no JavaScript, no
asset from outside (the style sheet is served by a route of ours). Pages
read through the node's services (``views.JobReader``, the cluster status);
under ``[auth]`` they ask for a reader token (``signin.WebAuth``), and a
signed-in token that may change jobs pauses, resumes and triggers jobs and
retries and cancels runs (``actions.WebActions``). The app
wires it: ``raftsched.cluster.app.observability``.
"""

from raftsched.rpc.http.web.actions import ActionCheck, JobActor, WebActions
from raftsched.rpc.http.web.overview import ClusterOverview, MemberView, overview_of
from raftsched.rpc.http.web.session import Sessions, cookie_name
from raftsched.rpc.http.web.signin import TokenCheck, TokenVerdict, WebAuth
from raftsched.rpc.http.web.views import JobReader, WebView, add_web_routes

__all__ = [
    "ActionCheck",
    "ClusterOverview",
    "JobActor",
    "JobReader",
    "MemberView",
    "Sessions",
    "TokenCheck",
    "TokenVerdict",
    "WebActions",
    "WebAuth",
    "WebView",
    "add_web_routes",
    "cookie_name",
    "overview_of",
]
