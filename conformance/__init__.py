"""Conformance machinery: the trace format, the invariant checker, campaigns and their reports."""
