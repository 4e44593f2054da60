"""The kcm implementation of the ZooKeeper-era Kafka controller and broker replica manager.

Its core is deterministic: every component takes one event or message and returns its outgoing
messages, touching nothing but its own state and the coordination-store port it is given.
"""
