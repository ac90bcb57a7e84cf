"""raftsched's own code, by layer: ``domain`` (pure), ``node`` and ``executor`` (runtimes with ports), ``app`` (wiring)."""
