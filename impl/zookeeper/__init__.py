"""A real ZooKeeper behind the coordination-store port: the ensemble kcm starts and the kazoo adapter."""
