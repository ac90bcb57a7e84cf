"""gRPC: ``rpc.server`` (servicers, status table), ``rpc.client`` (Python client), ``rpc.convert`` (protobuf <-> domain)."""
