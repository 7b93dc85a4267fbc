"""Systems under test: Kafka-protocol brokers with two storage designs.

`core` holds what both share (wire protocol server, controller, broker runtime,
local log); `replication` and `shared` are the two storage designs.
"""
