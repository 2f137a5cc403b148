"""Differential diagnosis: ranked causes with checks, moved by the words around the error."""

from assistant.differential.rank import differentiate

__all__ = ["differentiate"]
