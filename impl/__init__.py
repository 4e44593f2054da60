"""The kcm implementation of the ZooKeeper-era Kafka controller and broker replica manager.

Its core (the modules of this package) is deterministic: every component takes one event or message and
returns its outgoing messages, touching nothing but its own state and the coordination-store port it is
given. `sim/` holds the adapters around it: the network, a whole cluster, and the simulator that drives it.
It imports only from kcm.spec.
"""
