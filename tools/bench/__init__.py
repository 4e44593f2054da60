"""Benchmarks: each prints its figures with ratios against a baseline measured in the same run. They live
in the checkout only, outside the installed package: `python -m kcm.tools.bench` from a development
install (docs/performance.md)."""
