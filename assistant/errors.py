"""The one exception tree of torchhelp.

Everything the engine raises on purpose derives from :class:`TorchhelpError`. Only the edges
(``cli.py`` and the HTTP server) catch it, print one line and choose an exit code; inside the
engine, errors travel up untouched.

    TorchhelpError
    ├── InputError          the user's input cannot be read (empty, missing file, not a file)
    ├── ConfigError         a setting or config file is invalid
    ├── KnowledgeError      the knowledge base or its index cannot be loaded or built
    ├── BackendError        an LLM backend failed (the caller falls back to the deterministic answer)
    │   ├── BackendUnavailable   not installed, not configured, or forbidden (--offline)
    │   └── BackendReplyError    the backend answered, but not usably (HTTP error, bad JSON, timeout)
    ├── RunnerError         `torchhelp run` could not start or supervise the child program
    ├── TriageError         `torchhelp triage` was given nothing it can read, or an engine it cannot start
    └── EvalError           an eval case or capture is malformed
"""

from __future__ import annotations


class TorchhelpError(Exception):
    """Base class; ``exit_code`` is what the CLI exits with when this reaches it."""

    exit_code: int = 1


class InputError(TorchhelpError):
    """The input could not be read or holds nothing to diagnose."""

    exit_code = 2


class ConfigError(TorchhelpError):
    """A setting, environment variable or config file has an invalid value."""

    exit_code = 2


class KnowledgeError(TorchhelpError):
    """The knowledge documents or the retrieval index are missing or broken."""


class BackendError(TorchhelpError):
    """An LLM backend could not produce a usable answer."""


class BackendUnavailable(BackendError):
    """The backend is not installed, not configured, or not allowed (offline mode)."""


class BackendReplyError(BackendError):
    """The backend was reached but its reply could not be used."""


class RunnerError(TorchhelpError):
    """The supervised child program could not be started or observed."""


class TriageError(TorchhelpError):
    """Triage cannot proceed: no jobs under the given paths, bad sacct text, an engine that cannot start."""

    exit_code = 2


class EvalError(TorchhelpError):
    """An eval case, capture or outside case file is malformed."""

    exit_code = 2
