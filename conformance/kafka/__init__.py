"""Apache Kafka itself judged by kcm: fault campaigns on a real cluster, their logs checked against the model."""
