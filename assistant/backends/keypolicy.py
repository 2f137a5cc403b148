"""Which API key may go to which server, and over what.

``OPENAI_API_KEY`` belongs to OpenAI: it is sent to api.openai.com and nowhere else. A key meant
for another server must be configured for it explicitly (``TORCHHELP_LLM_API_KEY`` or
``llm_api_key``). No key travels over plain http unless the server is on this machine.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from assistant.errors import BackendUnavailable

OPENAI_HOST = "api.openai.com"


def is_loopback(host: str | None) -> bool:
    """True for localhost and loopback addresses (no DNS lookup: a name is trusted only if it is localhost)."""
    if not host:
        return False
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def choose_api_key(url: str, explicit_key: str | None, openai_key: str | None) -> str | None:
    """The key to send to ``url``, or None; refuses a key over plain http to another machine."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "")
    if scheme not in ("http", "https") or not host:
        raise BackendUnavailable("TORCHHELP_LLM_URL must be an http(s) URL with a host")
    key = explicit_key or (openai_key if scheme == "https" and host.lower() == OPENAI_HOST else None)
    if key and scheme == "http" and not is_loopback(host):
        raise BackendUnavailable(f"refusing to send an API key over plain http to {host}: use https, or a server on this machine")
    return key


def withheld_openai_key(url: str, explicit_key: str | None, openai_key: str | None) -> bool:
    """True when OPENAI_API_KEY is set but deliberately not sent to ``url`` (worth a hint on HTTP 401)."""
    return bool(openai_key) and not explicit_key and (urlsplit(url).hostname or "").lower() != OPENAI_HOST
