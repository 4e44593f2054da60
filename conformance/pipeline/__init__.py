"""The trace pipeline on Spark: the session (`session`, `spark_conf/`), generating and checking corpora
(`jobs`), a run checked as a stream by the invariant checker of `kcm check-trace` (`stream`), and ingesting
Kafka's `state-change.log` (`kafka_log` parses Kafka's lines, `ingest` turns them into trace rows)."""
