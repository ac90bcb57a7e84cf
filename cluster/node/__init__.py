"""One scheduler node's runtime: replicated state, leader loop, job and lease services, config.

What it needs from outside is named in ``raftsched.cluster.node.ports``; the app layer
(``raftsched.cluster.app.node_main``) plugs in the adapters.
"""
