"""Generated from scheduler.proto by scripts/gen_protos.py; never edit by hand."""
