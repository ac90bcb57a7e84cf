"""The domain (pure job state machine, schedule math) and the node runtime (config, wiring, leader loop)."""
