"""Apache Kafka itself, run by kcm: its releases and jars, and a ZooKeeper-mode cluster on loopback."""
