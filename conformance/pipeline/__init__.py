"""The trace pipeline on Spark: the session (`session`, `spark_conf/`), generating and checking corpora
(`jobs`), the invariants as DataFrame operations (`invariants`), and ingesting Kafka's `state-change.log`
(`kafka_log` parses Kafka's lines, `ingest` turns them into trace rows)."""
