"""One scheduler node's runtime: replicated state, leader loop, job and lease services, config.

What it needs from outside is named in ``cluster.node.ports``; the app layer
(``cluster.app.node_main``) plugs in the adapters.
"""
