"""The `kcm` command line, the top layer: `cli` builds the parser from one module per command, `errors`
holds the exit codes and the one-line usage errors, `stages` the contract between `kcm verify` and each
engine's stage; `layers` checks the layering rules. Benchmarks live in `bench/`, which only a checkout has.
"""
