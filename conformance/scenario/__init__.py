"""The datadriven scenario language of `tests/scenarios/`: a file of commands, each followed by the trace
output it must produce, run against a simulated cluster."""
