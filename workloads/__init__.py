"""What load is applied: Locust users producing through a real Kafka client, load shapes, and the
scenario files (``workloads/scenarios/*.yaml``) the harness runs."""
