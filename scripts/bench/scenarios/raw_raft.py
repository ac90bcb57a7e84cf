"""Scenario ``raw_raft``: the bare pysyncobj cluster's commits per second, with our journal and with pysyncobj's.

Writes ``raw_raft_commits_per_s`` (the nodes' journal, ``LmdbJournal``) and
``raw_raft_commits_per_s_pysyncobj_journal`` (how much the journal costs).
Runs before the client processes start, so their start-up steals no CPU.
"""

from __future__ import annotations

import os

from bench.baselines.raw_raft import run_raw_raft
from bench.harness.common import r1
from bench.harness.context import Bench


def scenario_raw_raft(b: Bench) -> None:
    p = b.profile
    b.say(f"raw Raft ceiling: 3 pysyncobj processes, build_conf(RaftSettings), 200-byte commands, {p.raw_measure_s:.0f} s")
    res = run_raw_raft(os.path.join(b.root, "raw-raft-nodes-journal"), p, node_journal=True)
    if res is None:
        b.results["raw_raft_commits_per_s"] = None
        b.notes["raw_raft_commits_per_s"] = "the bare pysyncobj cluster elected no leader or produced no result within 60 s"
        return
    b.results["raw_raft_commits_per_s"] = r1(res["commits_per_s"])
    b.extra["raw_raft"] = res
    b.series["raw_raft_per_second"] = res["per_second"]
    b.notes["raw_raft_commits_per_s"] = (
        "async @replicated counter increments with a 200-byte argument and callbacks, at most 20000 in flight, "
        f"proposed on the leader; conf from raftsched.raft.adapter.build_conf with password, dump file and journal ({res.get('journal')}) "
        f"like our nodes; counted over {p.raw_measure_s:.0f} s after {p.raw_warmup_s:.0f} s warm-up"
    )
    b.say(
        f"  raw Raft: {res['commits_per_s']:.0f} commits/s with {res['journal']} (proposed {res['proposed']}, failed "
        f"{res['failed'] or 0}; pysyncobj 'truncating already-applied log entries' warnings on followers: "
        f"{res['follower_truncation_warnings']})"
    )
    # the same with pysyncobj's own journal: how much the nodes' journal costs
    other = run_raw_raft(os.path.join(b.root, "raw-raft-file-journal"), p, node_journal=False)
    if other is not None:
        b.results["raw_raft_commits_per_s_pysyncobj_journal"] = r1(other["commits_per_s"])
        b.extra["raw_raft_pysyncobj_journal"] = other
        b.say(f"  raw Raft: {other['commits_per_s']:.0f} commits/s with {other['journal']} (for comparison)")
