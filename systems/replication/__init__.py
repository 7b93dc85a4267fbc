"""Replication-copy system: classic Kafka, partitions on the local disks of their replicas."""
