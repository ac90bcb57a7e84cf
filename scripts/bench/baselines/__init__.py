"""What raftsched's figures are compared with, measured in the same run on the same machine.

* ``raw_raft``  — a bare 3-process pysyncobj cluster with our ``SyncObjConf``
  and journal: the ceiling for replicated commands;
* ``noop_grpc`` — gRPC servers whose CreateJob only answers: the ceiling of
  the gRPC layer;
* ``etcd``      — a 3-member etcd on loopback, when the binary is installed.
"""
