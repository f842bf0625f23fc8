"""The other replicas of one PostgreSQL database, as this one's `Peers` (peers: and none for
one process): the cluster, its lease, its listener, the shared admission line, answers and the
harness feed across replicas."""
