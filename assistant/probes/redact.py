"""Secret redaction: applied to everything that leaves a probe or goes to a remote LLM.

Two nets: variables whose *name* says secret (KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL, AUTH,
PASSPHRASE) lose their value; and any *value* that looks like a credential (API-key prefixes,
long high-entropy strings, bearer tokens, URLs with passwords) is masked wherever it appears.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping

REDACTED = "[REDACTED]"
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|PASSPHRASE|PRIVATE|COOKIE|SESSION", re.I)
_TOKEN_PATTERNS = (
    re.compile(r"\b(?:sk|pk|rk)-(?:proj-|live-|test-)?[A-Za-z0-9_\-]{16,}"),  # OpenAI/Stripe style
    re.compile(r"\bhf_[A-Za-z0-9]{20,}"),  # Hugging Face
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"),  # GitHub
    re.compile(r"\bxox[abpr]-[A-Za-z0-9-]{10,}"),  # Slack
    re.compile(r"\bAKIA[0-9A-Z]{16}\b"),  # AWS access key id
    re.compile(r"\bAIza[0-9A-Za-z_\-]{30,}"),  # Google API key
    re.compile(r"\beyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"),  # JWT
    re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._\-~+/]{16,}=*"),
    re.compile(r"(?i)\b(?:wandb|comet|neptune)[_-]?(?:api)?[_-]?key\s*[=:]\s*\S+"),
)
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.\-]*://)(?P<user>[^:/@\s]+):(?P<pw>[^@/\s]+)@", re.I)
_ASSIGNMENT = re.compile(r"(?P<name>\b[A-Za-z_][A-Za-z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH)[A-Za-z0-9_]*)(?P<sep>\s*[=:]\s*)(?P<value>['\"]?[^\s'\"]+['\"]?)", re.I)
# Base64-ish runs only: identifiers with underscores (kernel names, paths) must survive redaction.
_LONG_OPAQUE = re.compile(r"(?<![\w/.-])[A-Za-z0-9+/=]{32,}(?![\w/.-])")


def _entropy(s: str) -> float:
    counts = Counter(s)
    return -sum(c / len(s) * math.log2(c / len(s)) for c in counts.values())


def looks_like_secret(value: str) -> bool:
    """True for values shaped like credentials (known prefixes, or long random-looking strings)."""
    if any(p.search(value) for p in _TOKEN_PATTERNS):
        return True
    v = value.strip()
    return (len(v) >= 32 and " " not in v and "_" not in v and _entropy(v) > 4.2
            and any(c.isdigit() for c in v) and any(c.isupper() for c in v) and any(c.islower() for c in v))


def redact_text(text: str) -> str:
    """Mask credential-shaped substrings in free text (logs, tracebacks, prompts)."""
    out = text
    for p in _TOKEN_PATTERNS:
        out = p.sub(REDACTED, out)
    out = _URL_PASSWORD.sub(lambda m: f"{m.group('scheme')}{m.group('user')}:{REDACTED}@", out)
    out = _ASSIGNMENT.sub(lambda m: f"{m.group('name')}{m.group('sep')}{REDACTED}", out)
    out = _LONG_OPAQUE.sub(lambda m: REDACTED if looks_like_secret(m.group(0)) else m.group(0), out)
    return out


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Environment variables with secret names or secret-looking values masked."""
    clean: dict[str, str] = {}
    for name, value in env.items():
        if _SECRET_NAME.search(name) or looks_like_secret(value):
            clean[name] = REDACTED
        else:
            clean[name] = redact_text(value)
    return clean
