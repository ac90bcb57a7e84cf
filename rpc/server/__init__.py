"""The gRPC servicers: one line per RPC around the node's services; ``errors`` maps domain errors to status codes."""
