"""Systems under test: Kafka-protocol brokers with different storage designs.

`core` holds what every system shares (wire protocol server, controller, broker runtime, local
log, process management, the profile type); `replication` and `shared` are the two storage
designs, each with a `profile.py`; `registry.py` lists them.
"""
