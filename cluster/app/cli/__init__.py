"""``raftsched job|run|cluster ...``: the command-line client.

One module per noun — ``jobs``, ``runs`` (with ``watch`` and ``follow``),
``cluster`` — each a table of ``Command`` entries (``args``); ``spec_args``
holds the flags that describe a job, ``views`` the table columns,
``output`` the ``-o`` formats, ``timefmt`` how instants are written,
``connect`` how the cluster is found and called, ``global_flags`` how the
flags every command takes may come before it, ``spec_checks`` and
``cron_hint`` what a job spec holds that surprises. ``main`` builds the
parsers and runs a command, turning every failure into one line on stderr.
"""

from raftsched.cluster.app.cli.global_flags import hoist_client_flags
from raftsched.cluster.app.cli.main import add_client_commands, run

__all__ = ["add_client_commands", "hoist_client_flags", "run"]
