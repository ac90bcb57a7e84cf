"""What the client processes run: load on the cluster (and on the baselines) from outside the parent.

A task is a dict with a ``kind``; ``worker.TASKS`` maps each kind to a
function ``(Ctx) -> dict`` that runs on the process's threads (thread j of
process p talks to node ``(p * threads + j) % len(addresses)``) and returns
plain lists the parent merges. ``context`` holds what they share.
"""
