"""The `kcm` command line, the top layer: `cli` builds the parser from one module per command, `errors`
holds the exit codes and the one-line usage errors, `progress` shows long work; `layers` checks the layering
rules. A command parses its arguments, calls the layers below it (where `kcm review`'s matrices, `kcm hunt`'s
route and `kcm verify`'s stages live) and prints. Benchmarks live in `bench/`, which only a checkout has.
"""
