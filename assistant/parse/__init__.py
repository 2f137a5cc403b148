"""Parsing: raw input -> clean text -> :class:`~assistant.types.Failure`."""

from assistant.parse.reader import InputText, read_bytes, read_path, read_stream
from assistant.parse.traceback import parse_failure

__all__ = ["InputText", "parse_failure", "read_bytes", "read_path", "read_stream"]
