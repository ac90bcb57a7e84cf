"""The web view's job summary, pause, labels, newer spec fields and run origins without a network: the pure
helpers (``words``, ``job_sections``, ``run_sections``) table-tested, then the pages rendered from the fakes of
``tests.unit.test_web_view``: a paused job with a note and an until, its counts and last error (escaped, shortened,
whole in a ``<details>``), its labels as chips linking to the jobs carrying them, a spec row for each newer field
set and none for a default, a notify rule's secret name but nothing more, the jobs page's label filter and a bad
selector's 400, and the run page of a backfill, of a trigger with its own payload and of a notification."""

from __future__ import annotations

import re
from urllib.parse import quote, urlencode

import pytest

from raftsched.cluster.domain.errors import ValidationError
from raftsched.cluster.domain.model import (
    Cron,
    Every,
    Job,
    JobInfo,
    JobSpec,
    JobStatus,
    NotifyRule,
    Run,
    RunExtra,
    RunStatus,
    TimeWindow,
    with_extra,
)
from raftsched.cluster.domain.notifications import notification_payload, notification_run_id
from raftsched.rpc.http.web import words
from raftsched.rpc.http.web.job_sections import (
    ERROR_CHARS,
    LabelChip,
    label_chips,
    label_filter,
    pause_of,
    run_note,
    schedule_short,
    summary_of,
)
from raftsched.rpc.http.web.run_sections import origin_note, run_fields, run_origin
from tests.unit.test_web_view import EVIL, EVIL_ESCAPED, NOW, FakeJobs, app, assert_safe_page, call, make_job, make_run

pytestmark = pytest.mark.unit

SECRET_NAME = "hooks-key"
RULE = NotifyRule(("DEAD_LETTER", "RECOVERED"), "https://hooks.example/raftsched?team=<billing>", SECRET_NAME)
LABELS = (("owner", EVIL), ("team", "billing"), ("tier", "gold"), ("zone", "eu,us"))
LONG_ERROR = "command exited with code 7:\n  Traceback (most recent call last)\n" + "  frame <x>\n" * 30


def full_spec_job(job_id: str = "j-full") -> Job:
    """A PAUSED cron job that sets every newer field, with a summary of 4 successes and a failure."""
    job = make_job(
        job_id, "billing-report", Cron("0 * * * *", "Europe/Berlin"), queue="reports", labels=LABELS,
        start_ms=NOW - 86_400_000, end_ms=NOW + 30 * 86_400_000, jitter_ms=250, skip_dates=("2026-12-25", "2027-01-01"),
        skip_windows=(TimeWindow(NOW + 3_600_000, NOW + 7_200_000),), extra_crons=(Cron("30 12 * * 1-5", "UTC"),),
        max_runs=50, pause_after_failures=5, trigger_on_create=True, pending_ttl_ms=600_000, priority=7,
        concurrency_key="reports", concurrency_limit=2, notify=(RULE,),
    )  # fmt: skip
    job.status = JobStatus.PAUSED
    job.info = JobInfo(4, 1, 2, 1, NOW - 30_000, NOW - 5_000, LONG_ERROR, 3, f"deploy freeze {EVIL}", NOW + 3_600_000)
    return job


# ------------------------------------------------------------------ words


def test_shorten_keeps_one_line_and_cuts_with_dots() -> None:
    assert words.shorten("a\n  b\tc ", 10) == "a b c"
    assert words.shorten("x" * 20, 10) == "xxxxxxx..."
    assert len(words.shorten(LONG_ERROR, ERROR_CHARS)) == ERROR_CHARS


def test_utc_ago_names_the_instant_and_how_long_ago() -> None:
    assert words.utc_ago(NOW - 30_000, NOW) == "2026-10-23 23:59:30 UTC (30s ago)"
    assert words.utc_ago(NOW + 3_600_000, NOW) == "2026-10-24 01:00:00 UTC (in 1h)"
    assert words.utc_ago(0, NOW) == "-" and words.utc_ago(None, NOW, "never") == "never"


def test_listed_says_how_many_more() -> None:
    assert words.listed(["a", "b"]) == "a, b"
    assert words.listed([str(i) for i in range(13)], limit=3) == "0, 1, 2 and 10 more"
    assert words.listed(["w1", "w2"], "; ") == "w1; w2"


def test_a_notify_rule_in_words_names_its_secret_never_a_value() -> None:
    assert words.notify_words(RULE) == (
        "DEAD_LETTER, RECOVERED → https://hooks.example/raftsched?team=<billing>, "
        "signed with the secret named 'hooks-key' (its value stays with the executors)"
    )
    assert words.notify_words(NotifyRule(("FAILED",), "https://x.example/")) == "FAILED → https://x.example/, unsigned"


def test_spec_rows_add_a_row_for_each_newer_field_set_and_none_for_defaults() -> None:
    plain = words.spec_rows(JobSpec("plain", Every(1000)), NOW)
    assert [r.key for r in plain] == [
        "schedule", "queue", "type", "retries", "lease", "timeout", "concurrency", "misfire", "history",
    ]  # fmt: skip
    job = full_spec_job()
    rows = {r.key: (r.label, r.text) for r in words.spec_rows(job.spec, job.anchor_ms)}
    assert rows["start"] == ("Starts", "no instant before 2026-10-23 00:00:00 UTC")
    assert rows["end"] == ("Ends", "no instant after 2026-11-23 00:00:00 UTC: the job is COMPLETED then")
    assert rows["extra-crons"][1] == "cron '30 12 * * 1-5' in UTC (the job fires at the instants of all its expressions)"
    assert rows["jitter"][1].startswith("each instant's run becomes leasable up to 250ms after it")
    assert rows["skip-dates"][1].startswith("2026-12-25, 2027-01-01 (in Europe/Berlin): ")
    assert rows["skip-windows"][1].startswith("2026-10-24 01:00:00 UTC to 2026-10-24 02:00:00 UTC: ")
    assert rows["max-runs"][1].startswith("50: the job is COMPLETED after 50 runs of its schedule")
    assert rows["pause-after-failures"] == ("Pauses itself", "after 5 runs in a row end FAILED, DEAD_LETTER or EXPIRED")
    assert rows["trigger-on-create"][1].startswith("yes")
    assert rows["pending-ttl"][1].startswith("10m: a run still PENDING that long")
    assert rows["priority"][1] == "7 (0-9): leased before runs of lower priorities in queue reports"
    assert rows["concurrency-key"][1] == "'reports': at most 2 run(s) LEASED at once across every job with this key"
    assert rows["notify-0"] == ("Notify", words.notify_words(RULE))


# ------------------------------------------------------------------ job sections


def test_summary_counts_times_and_the_last_error_shortened_with_the_whole_kept() -> None:
    s = summary_of(full_spec_job(), NOW)
    assert (s.succeeded, s.failed, s.skipped, s.in_a_row) == ("4", "1", "2", "1 (it pauses itself at 5)")
    assert s.last_success == "2026-10-23 23:59:30 UTC (30s ago)" and s.last_failure == "2026-10-23 23:59:55 UTC (5s ago)"
    assert s.last_error == words.shorten(LONG_ERROR, ERROR_CHARS) and s.last_error_full == LONG_ERROR
    assert s.scheduled_runs == "3 of 50"
    fresh = make_job("j-new", "new", Every(1000))  # no max_runs: the job's own count of fired runs
    fresh.fire_count = 12
    s = summary_of(fresh, NOW)
    assert (s.succeeded, s.failed, s.in_a_row, s.last_success, s.last_error, s.last_error_full, s.scheduled_runs) == (
        "0", "0", "0", "never", "", "", "12",
    )  # fmt: skip
    fresh.info = JobInfo(last_error="exit 1", failure_count=1, consecutive_failures=1)
    assert summary_of(fresh, NOW).last_error == "exit 1" and summary_of(fresh, NOW).last_error_full == ""


def test_a_pause_shows_only_on_a_paused_job_with_its_note_and_until() -> None:
    job = full_spec_job()
    pause = pause_of(job, NOW)
    assert pause is not None and pause.note == f"deploy freeze {EVIL}"
    assert pause.until == "resumes by itself at 2026-10-24 01:00:00 UTC (in 1h)"
    job.info = JobInfo()
    pause = pause_of(job, NOW)
    assert pause is not None and pause.note == "" and pause.until.startswith("until someone resumes it")
    job.status = JobStatus.ACTIVE
    assert pause_of(job, NOW) is None


def test_label_chips_link_to_the_jobs_carrying_them_when_a_selector_can_name_them() -> None:
    assert label_chips(LABELS) == [
        LabelChip(f"owner={EVIL}", "/jobs?labels=" + quote(f"owner={EVIL}", safe="")),
        LabelChip("team=billing", "/jobs?labels=team%3Dbilling"),
        LabelChip("tier=gold", "/jobs?labels=tier%3Dgold"),
        LabelChip("zone=eu,us", ""),  # a comma would split the selector
    ]
    assert label_chips((("a", "x=y"), ("b", " pad"), ("c", "!no"))) == [LabelChip(t, "") for t in ("a=x=y", "b= pad", "c=!no")]


def test_the_label_filter_takes_a_selector_and_explains_a_bad_one() -> None:
    for good in ("", "team=billing", "team=billing,tier!=low", "tier", "!tier", "team==billing"):
        assert label_filter(good) == good
    for bad, says in (("Bad Key=x", "the labels filter term 'Bad Key=x' is not valid"), ("a,,b", "has an empty term")):
        with pytest.raises(ValidationError) as err:
            label_filter(bad)
        assert says in str(err.value) and "for example team=billing,tier!=low" in str(err.value)


def test_schedule_short_counts_extra_crons() -> None:
    assert schedule_short(Cron("0 * * * *", "UTC")) == "cron '0 * * * *' UTC"
    assert schedule_short(Cron("0 * * * *", "UTC"), 1) == "cron '0 * * * *' UTC +1 cron"
    assert schedule_short(Cron("0 * * * *", "UTC"), 2) == "cron '0 * * * *' UTC +2 crons"


# ------------------------------------------------------------------ run origins


def _runs_of_every_origin() -> tuple[Run, Run, Run, Run]:
    """A trigger with its own payload that failed, its notification, a backfilled run, a run of the schedule."""
    job = full_spec_job()
    own = make_run("j-full", NOW - 5000, RunStatus.DEAD_LETTER)
    own.manual, own.error = True, "command exited with code 7"
    with_extra(own, RunExtra.PAYLOAD, b'{"command": "echo <b>own</b>; exit 7"}')
    nid = notification_run_id(own, "DEAD_LETTER", 0)
    note = make_run("j-full", NOW - 4000, RunStatus.PENDING, attempt=0)
    note.run_id, note.queue = nid, "raftsched.notify"
    payload = notification_payload("j-full", job.spec, own, "DEAD_LETTER", RULE, nid)
    note.extra = tuple(sorted({RunExtra.TYPE: "notify", RunExtra.EVENT: "DEAD_LETTER", RunExtra.PAYLOAD: payload}.items()))
    backfill = make_run("j-full", NOW - 7_200_000, RunStatus.PENDING, attempt=0)
    backfill.run_id += "-backfill"
    with_extra(backfill, RunExtra.BACKFILL, True)
    return own, note, backfill, make_run("j-full", NOW - 3_600_000)


def test_what_made_a_run_in_a_note_and_a_sentence() -> None:
    own, note, backfill, scheduled = _runs_of_every_origin()
    assert [origin_note(r) for r in (own, note, backfill, scheduled)] == [
        "triggered by hand, with its own payload",
        "notification of DEAD_LETTER",
        "backfill of a past instant",
        "",
    ]
    assert run_note(own) == "command exited with code 7" and run_note(note) == "notification of DEAD_LETTER"
    note.error = "attempt 1 of 3 failed: HTTP 500"
    assert run_note(note) == "notification of DEAD_LETTER: attempt 1 of 3 failed: HTTP 500"
    assert run_note(backfill) == "backfill of a past instant" and run_note(scheduled) == ""

    origin = run_origin(own)
    assert origin.payload == '{"command": "echo <b>own</b>; exit 7"}' and origin.notification is None
    assert origin.summary.startswith("Triggered by hand with its own payload")
    assert run_origin(backfill).summary.startswith("A backfill: BackfillJob made this run") and not run_origin(backfill).payload
    assert run_origin(scheduled).summary == "" and run_origin(scheduled).notification is None
    n = run_origin(note).notification
    assert n is not None and (n.event, n.of_run_id, n.url, n.secret_name, n.event_id) == (
        "DEAD_LETTER", own.run_id, RULE.url, SECRET_NAME, note.run_id,
    )  # fmt: skip
    assert n.of_run_href == "/runs/" + quote(own.run_id, safe="") and '"event":"DEAD_LETTER"' in n.body
    assert run_origin(note).payload == ""  # its payload is the notification, shown as one
    kinds = {f.key: f.value for f in run_fields(note, None)}
    assert kinds["run-kind"] == "notification of DEAD_LETTER" and "run-own-payload" in {f.key for f in run_fields(own, None)}


def test_a_notification_whose_payload_is_not_json_still_names_its_run() -> None:
    _, note, _, _ = _runs_of_every_origin()
    with_extra(note, RunExtra.PAYLOAD, b"\xff not json")
    n = run_origin(note).notification
    assert n is not None and n.of_run_id == note.run_id.split("#notify-")[0] and n.url == "-" and n.secret_name == ""


# ------------------------------------------------------------------ pages


@pytest.fixture()
def world() -> FakeJobs:
    jobs = FakeJobs()
    full = full_spec_job()
    search = make_job("j-search", "search-index", Every(3_600_000), labels=(("team", "search"), ("tier", "low")))
    bare = make_job("j-bare", "no-labels", Every(3_600_000))
    jobs.jobs = {j.job_id: j for j in (full, search, bare)}
    for run in _runs_of_every_origin():
        jobs.runs[run.run_id] = run
    return jobs


def _text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html)).strip()


def _element(body: str, element_id: str) -> str:
    """The inner HTML of the element with this id (the first closing tag of its own name ends it)."""
    m = re.search(rf'<(\w+)[^>]* id="{element_id}"[^>]*>', body)
    assert m, f"no element #{element_id}"
    end = body.index(f"</{m.group(1)}>", m.end())
    return body[m.end() : end]


def test_the_job_page_shows_the_pause_summary_labels_and_every_newer_field(world: FakeJobs) -> None:
    status, _, body = call(app(world), "/jobs/j-full")
    assert status == 200
    assert_safe_page(body)
    assert body.index('id="pause"') < body.index('id="job"')  # beside the status, before the record
    assert _element(body, "next-fire") == "none while it is PAUSED"  # as GetJob: only an ACTIVE job fires
    assert _element(body, "pause-note") == f"deploy freeze {EVIL_ESCAPED}"
    assert _element(body, "paused-until") == "resumes by itself at 2026-10-24 01:00:00 UTC (in 1h)"
    cells = {k: _text(_element(body, f"summary-{k}")) for k in ("succeeded", "failed", "skipped", "in-a-row", "scheduled-runs")}
    assert cells == {
        "succeeded": "4",
        "failed": "1",
        "skipped": "2",
        "in-a-row": "1 (it pauses itself at 5)",
        "scheduled-runs": "3 of 50",
    }
    assert _element(body, "summary-last-success") == "2026-10-23 23:59:30 UTC (30s ago)"
    error = _element(body, "summary-last-error")
    assert "<details><summary>command exited with code 7: Traceback (most recent call last) frame &lt;x&gt;" in error
    assert _element(body, "summary-last-error-full") == LONG_ERROR.replace("<", "&lt;").replace(">", "&gt;")
    chips = re.findall(r'<li class="chip">(.*?)</li>', _element(body, "labels"))
    assert chips == [
        f'<a href="/jobs?{urlencode({"labels": f"owner={EVIL}"})}">owner={EVIL_ESCAPED}</a>',
        '<a href="/jobs?labels=team%3Dbilling">team=billing</a>',
        '<a href="/jobs?labels=tier%3Dgold">tier=gold</a>',
        "zone=eu,us",
    ]
    for key in ("start", "end", "extra-crons", "jitter", "skip-dates", "skip-windows", "max-runs", "pause-after-failures",
                "trigger-on-create", "pending-ttl", "priority", "concurrency-key", "notify-0"):  # fmt: skip
        assert f'id="spec-{key}"' in body, key
    assert _element(body, "spec-notify-0") == (
        "DEAD_LETTER, RECOVERED → https://hooks.example/raftsched?team=&lt;billing&gt;, "
        "signed with the secret named &#39;hooks-key&#39; (its value stays with the executors)"
    )
    assert world.shapes[-1] is world.jobs["j-full"].spec  # the next instants are the spec's (extra crons, skips)


def test_an_active_job_without_newer_fields_shows_no_pause_no_extra_rows_and_no_labels(world: FakeJobs) -> None:
    _, _, body = call(app(world), "/jobs/j-bare")
    assert 'id="pause"' not in body and 'id="pause-note"' not in body
    assert _element(body, "next-fire") == "2026-10-24 00:00:02 UTC (in 2s)"
    assert _element(body, "labels") == "none" and _element(body, "summary-last-error") == "none"
    assert _element(body, "summary-last-success") == "never" and _element(body, "summary-scheduled-runs") == "3"
    assert re.findall(r'id="spec-([a-z0-9-]+)"', body) == [
        "schedule", "queue", "type", "retries", "lease", "timeout", "concurrency", "misfire", "history",
    ]  # fmt: skip


def test_the_jobs_page_shows_labels_and_filters_by_a_selector(world: FakeJobs) -> None:
    router = app(world)

    def names(path: str) -> list[str]:
        status, _, body = call(router, path)
        assert status == 200, body
        assert_safe_page(body)
        return re.findall(r'class="job-link">([^<]+)</a>', body)

    assert names("/jobs") == ["no-labels", "billing-report", "search-index"]  # by job id
    assert names("/jobs?labels=" + quote("team=billing")) == ["billing-report"]
    assert names("/jobs?labels=" + quote("tier!=low")) == ["no-labels", "billing-report"]
    assert names("/jobs?labels=" + quote("team=billing,tier!=low")) == ["billing-report"]
    assert names("/jobs?labels=" + quote("!team")) == ["no-labels"]
    _, _, body = call(router, "/jobs?labels=" + quote("team=nobody"))
    assert 'id="no-jobs"' in body and "these filters" in body and 'value="team=nobody"' in body
    _, _, body = call(router, "/jobs")
    row = body[body.index('href="/jobs/j-full"') :]
    cell = row[row.index('<td class="labels"') : row.index("</td>", row.index('<td class="labels"'))]
    assert f'title="owner={EVIL_ESCAPED}, team=billing, tier=gold, zone=eu,us"' in cell
    assert cell.count('<li class="chip">') == 3 and '<small class="more">+1</small>' in cell
    assert "cron &#39;0 * * * *&#39; Europe/Berlin +1 cron" in row
    assert '<td class="time">-</td>' in row[: row.index("</tr>")]  # a PAUSED job has no next fire


def test_a_bad_label_selector_is_a_400_saying_how_to_write_one(world: FakeJobs) -> None:
    status, _, body = call(app(world), "/jobs?labels=" + quote(f"{EVIL}=x"))
    assert status == 400
    assert_safe_page(body)
    assert _element(body, "error-message").startswith(f"the labels filter term &#39;{EVIL_ESCAPED}=x&#39; is not valid")
    status, _, body = call(app(world), "/jobs?labels=" + quote("Bad Key=x"))
    assert status == 400 and _element(body, "error-message") == (
        "the labels filter term &#39;Bad Key=x&#39; is not valid: use k=v, k!=v, k or !k with keys of a-z 0-9 . _ / -; "
        "for example team=billing,tier!=low (every term must hold)"
    )


def test_the_run_pages_say_what_made_each_run_and_show_its_labels(world: FakeJobs) -> None:
    own, note, backfill, scheduled = _runs_of_every_origin()
    router = app(world)

    def page(run: Run) -> str:
        status, _, body = call(router, "/runs/" + quote(run.run_id, safe=""))
        assert status == 200
        assert_safe_page(body)
        return body

    body = page(own)
    assert re.findall(r'<li class="chip">(?:<a [^>]+>)?([^<]+)', _element(body, "run-labels")) == [
        f"owner={EVIL_ESCAPED}", "team=billing", "tier=gold", "zone=eu,us",
    ]  # fmt: skip
    assert _element(body, "run-origin").startswith("Triggered by hand with its own payload")
    assert _element(body, "run-payload") == "{&#34;command&#34;: &#34;echo &lt;b&gt;own&lt;/b&gt;; exit 7&#34;}"
    body = page(note)
    assert _element(body, "run-kind") == "notification of DEAD_LETTER"
    assert _element(body, "notification-event") == "DEAD_LETTER"
    assert _element(body, "notification-of") == own.run_id
    assert f'href="/runs/{quote(own.run_id, safe="")}" id="notification-of"' in body
    assert _element(body, "notification-url") == "https://hooks.example/raftsched?team=&lt;billing&gt;"
    assert "the secret named <code>hooks-key</code>" in _element(body, "notification-secret")
    assert "&#34;job_name&#34;:&#34;billing-report&#34;" in _element(body, "notification-body")
    body = page(backfill)
    assert _element(body, "run-kind") == "backfill of a past instant"
    assert _element(body, "run-origin").startswith("A backfill: BackfillJob made this run")
    assert 'id="run-payload"' not in body and 'id="notification"' not in body
    body = page(scheduled)
    assert 'id="run-origin"' not in body and 'id="run-kind"' not in body and 'id="run-labels"' in body
    del world.jobs["j-full"]  # a run whose job is gone: no labels to show
    assert 'id="run-labels"' not in page(scheduled)
