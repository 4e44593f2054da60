"""Trace format v2, the language every engine speaks: events and their state deltas (`format`), the JSON
schema of one event (`schema.json`), lossless conversion to and from Apalache's ITF (`itf`), the Parquet
layout of trace corpora (`parquet`), and one-line renderings of steps for people (`render`)."""
