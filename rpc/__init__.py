"""gRPC servicers, protobuf conversion, the status table, the client and the command-line client."""
