"""The addresses of the web view's pages: a job's, a run's, and a page with its query (filters, a page token).

Pure. Every id and query value is percent-encoded here, so a template only
ever prints an address these functions made (and escapes it as any value).
"""

from __future__ import annotations

from urllib.parse import quote, urlencode


def job_href(job_id: str) -> str:
    return "/jobs/" + quote(job_id, safe="")


def run_href(run_id: str) -> str:
    return "/runs/" + quote(run_id, safe="")


def link(path: str, **query: str) -> str:
    """``path`` with the query values that are set (``/jobs?queue=reports``); empty ones are left out."""
    kept = {k: v for k, v in query.items() if v}
    return path + ("?" + urlencode(kept) if kept else "")
