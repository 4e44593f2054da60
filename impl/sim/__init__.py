"""Adapters around the pure core: the simulated network (`network`), a whole cluster of controllers and
brokers over the in-memory store and that network, stepped one event at a time and traced (`cluster`), and
the seeded fault-injecting driver that writes simulation traces (`simulator`)."""
