"""gRPC: ``raftsched.rpc.server`` (servicers, status table), ``raftsched.rpc.client`` (Python client), ``raftsched.rpc.convert`` (protobuf <-> domain)."""
