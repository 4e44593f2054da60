"""Kafka's `state-change.log` and `controller.log` (ZooKeeper mode), every release from 0.8.2 to 3.9:
the statements as data (formats), the object renderings (renderings), log4j layouts (layouts), the
parser into partial traces (parser) and the renderer of fixtures (renderer). docs/pipeline.md has the table."""

from kcm.conformance.pipeline.kafka_log.layouts import PatternError, compile_pattern
from kcm.conformance.pipeline.kafka_log.parser import ParsedLog, match_message
from kcm.conformance.pipeline.kafka_log.renderer import Line, RenderError, prints, render, render_message
from kcm.conformance.pipeline.kafka_log.renderings import LogLineError, parse_rendering, partition_name
from kcm.conformance.pipeline.kafka_log.split import parse_kafka_log

__all__ = ["Line", "LogLineError", "ParsedLog", "PatternError", "RenderError", "compile_pattern", "match_message",
           "parse_kafka_log", "parse_rendering", "partition_name", "prints", "render",
           "render_message"]
