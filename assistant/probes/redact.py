"""Secret redaction: applied to everything that leaves a probe, goes to a remote LLM or is shown.

Three nets, from the most to the least certain:

- known token formats are masked wherever they appear (cloud and forge tokens, API keys, JWTs,
  private-key blocks, passwords in URLs, ``Authorization`` headers);
- a value assigned to a secret-sounding name (``password=``, ``API_KEY:``, ``"client_secret": …``,
  ``--token …``) is masked, the name is kept so the reader still sees what was there;
- a long random-looking run of base64 characters is masked.

Variables whose *name* says secret lose their value whole (:func:`redact_env`). Every pattern
starts at a fixed literal or at the start of a word, so the cost stays linear in the text: the
redactor runs on untrusted logs of any size.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

REDACTED = "[REDACTED]"
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|PASSPHRASE|PRIVATE|COOKIE|SESSION", re.I)

# Token formats whose shape alone says "credential". Each starts with a literal (Python's regex engine
# then skips ahead with a fast search); that the token starts a word is checked on each match.
# Each starts with a literal, so the regex engine finds candidates with a fast search; that the token
# starts a word is checked right after that literal, by a fixed-width look-behind over the literal
# and the character before it (a run like "sk-sk-sk-…" is then not rescanned from every prefix).
_W = r"[A-Za-z0-9_\-]"
_TOKEN_PATTERNS = tuple(re.compile(p) for p in (
    # OpenAI (sk-, sk-proj-, sk-svcacct-), Anthropic (sk-ant-api03-…), Stripe-style live/test keys.
    rf"[spr]k-(?<!{_W}[spr]k-)(?:ant-|proj-|svcacct-|admin-|live-|test-)?[A-Za-z0-9_\-]{{16,}}",
    rf"[sr]k_(?<!{_W}[sr]k_)(?:live|test)_[A-Za-z0-9]{{16,}}",  # Stripe secret and restricted keys
    rf"npm_(?<!{_W}npm_)[A-Za-z0-9]{{30,}}",  # npm access token
    rf"hf_(?<!{_W}hf_)[A-Za-z0-9]{{20,}}",  # Hugging Face
    rf"gh[pousr]_(?<!{_W}gh[pousr]_)[A-Za-z0-9]{{20,}}",  # GitHub classic: personal, OAuth, user, server, refresh
    rf"github_pat_(?<!{_W}github_pat_)[A-Za-z0-9_]{{20,}}",  # GitHub fine-grained personal token
    rf"gl(?<!{_W}gl)(?:pat|dt|rt|cbt|ptt|oas|ft|imt|agent|wt)-[A-Za-z0-9_\-]{{20,}}(?:\.[A-Za-z0-9_\-]+)*",  # GitLab
    rf"xox[abposre]-(?<!{_W}xox[abposre]-)[A-Za-z0-9-]{{10,}}",  # Slack
    rf"A(?<!{_W}A)(?:KIA|SIA|BIA|CCA)[0-9A-Z]{{16}}\b",  # AWS access key id
    rf"AIza(?<!{_W}AIza)[0-9A-Za-z_\-]{{30,}}",  # Google API key
    rf"eyJ(?<!{_W}eyJ)[A-Za-z0-9_\-]{{8,}}\.[A-Za-z0-9_\-]{{8,}}\.[A-Za-z0-9_\-]{{8,}}",  # JWT (header.payload.signature)
))
# The patterns below run on an ASCII-lowercased copy of the text (same length, same offsets):
# Python's case-insensitive alternations are ten times slower than plain ones.
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
# Authorization (and Proxy-Authorization) headers: the scheme word is kept, the credential goes.
_AUTH_HEADER = re.compile(
    r"(?P<head>authorization['\"]?[ \t]*[=:][ \t]*['\"]?(?:(?:bearer|basic|token|digest|negotiate)[ \t]+)?)"
    r"(?P<value>[^\s'\",;`]+)"
)
_BEARER = re.compile(r"(?P<head>bearer[ \t]+)(?P<value>[a-z0-9._\-~+/]{16,}=*)")
_URL_PASSWORD = re.compile(r"(?P<head>://[^:/@\s]*:)(?P<value>[^@/\s]+)(?=@)")
# Query parameters that carry credentials (Azure SAS signatures, presigned S3 URLs, OAuth codes).
_QUERY_SECRET = re.compile(
    r"(?P<head>[?&](?:sig|signature|x-amz-signature|x-amz-credential|x-amz-security-token|x-goog-signature|token|access_token|"
    r"api_key|apikey|key|password|client_secret|code)=)(?P<value>[^&\s#'\"]+)"
)
# Names whose value is a secret, matched only when the name ends right before the separator (`tokens=`,
# `token_id=`, `KeyError:` are not secrets) and starts a word or a camelCase hump (dbPassword, AccountKey).
_SECRET_WORDS = (
    r"api[_-]?key|access[_-]?key(?:[_-]?id)?|secret[_-]?access[_-]?key|secret[_-]?key|private[_-]?key|account[_-]?key|"
    r"shared[_-]?access[_-]?key|storage[_-]?key|master[_-]?key|encryption[_-]?key|signing[_-]?key|client[_-]?secret|"
    r"(?:wandb|comet|neptune)[_-]?key|"
    r"secret|passwd|password|pwd|passphrase|token|auth[_-]?token|access[_-]?token|refresh[_-]?token|id[_-]?token|"
    r"session[_-]?token|security[_-]?token|credentials?|connection[_-]?string|shared[_-]?access[_-]?signature"
)
# A long alternation tried at every position is slow in Python, so an assignment is found from its end:
# a cheap search for a word ending and a separator, then the name is matched in a short window before it.
_ASSIGNMENT_HINT = re.compile(r"(?:key|id|secret|passwd|password|pwd|passphrase|token|credentials?|string|signature)['\"]?[ \t]*[=:]")
_ASSIGNMENT_HEAD = re.compile(rf"(?:{_SECRET_WORDS})['\"]?[ \t]*[=:]\Z")
# Password names are secrets even glued to a prefix (PGPASSWORD=, MYSQL_PWD=, dbpasswd=).
_PASSWORD_HEAD = re.compile(r"(?:passwd|password|pwd)['\"]?[ \t]*[=:]\Z")
_ASSIGNMENT_VALUE = re.compile(r"[ \t]*(?P<value>\"[^\"\n]*\"|'[^'\n]*'|`[^`\n]*`|[^\s'\",;&)}\]`]+)")
_NAME_WINDOW = 48  # longer than any secret word with its quote and spaces
# Command-line flags followed by their value as the next word: `--password hunter2`, `--api-key …`.
_FLAG_WORDS = r"api-?key|access-key|secret-key|client-secret|secret|password|passwd|passphrase|token|auth-token|access-token|hf-token|credentials?"
_SECRET_FLAG = re.compile(rf"^--?(?:[a-z0-9]+-)*(?:{_FLAG_WORDS})$")
_FLAG_WITH_VALUE = re.compile(rf"(?P<head>--?(?:{_FLAG_WORDS})[ \t]+)(?P<value>[^\s'\"-][^\s'\"]*)")
# Names that end in "token" but hold a vocabulary entry, not a credential (pad_token: '<pad>').
_VOCAB_TOKEN = re.compile(r"(?i)(?:pad|eos|bos|unk|sep|cls|mask|start|end|special|image|vision|audio|video|placeholder|decoder_start|additional)[_-]?$")
_HARMLESS_VALUES = frozenset({"", "none", "null", "nil", "true", "false", "undefined", "***", "xxx", "redacted", REDACTED.lower()})
_PEM_BEGIN = re.compile(r"-----BEGIN (?P<label>[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?)-----")
_PEM_LINE = re.compile(r"[ \t]*(?:[A-Za-z0-9+/=]{1,120}|[A-Za-z-]{2,30}: [^\n]{0,200}|)[ \t]*\r?$")
_PEM_SEARCH_LIMIT = 64 * 1024
# Base64-ish runs only: identifiers with underscores (kernel names, paths) must survive redaction.
# "=" only as base64 padding at the end: inside the run it would swallow a name (`id=…` keeps its `id=`).
_LONG_OPAQUE = re.compile(r"(?<![\w/.-])[A-Za-z0-9+/]{32,}={0,2}(?![\w/.=-])")


def _entropy(s: str) -> float:
    counts = Counter(s)
    return -sum(c / len(s) * math.log2(c / len(s)) for c in counts.values())


def looks_like_secret(value: str) -> bool:
    """True for values shaped like credentials (known prefixes, or long random-looking strings)."""
    if any(p.search(value) for p in _TOKEN_PATTERNS) or _PEM_BEGIN.search(value):
        return True
    v = value.strip()
    return (len(v) >= 32 and " " not in v and "_" not in v and _entropy(v) > 4.2
            and any(c.isdigit() for c in v) and any(c.isupper() for c in v) and any(c.islower() for c in v))


def _redact_pem(text: str) -> str:
    """Private-key blocks go whole; a block cut before its END line goes up to its last key-like line."""
    if "-----BEGIN " not in text:
        return text
    out: list[str] = []
    pos = 0
    while True:
        m = _PEM_BEGIN.search(text, pos)
        if m is None:
            break
        out.append(text[pos:m.start()])
        end_marker = f"-----END {m.group('label')}-----"
        # Look for the END line before the next BEGIN only: each character is searched once.
        next_begin = text.find("-----BEGIN ", m.end())
        limit = min(m.end() + _PEM_SEARCH_LIMIT, len(text) if next_begin < 0 else next_begin)
        end = text.find(end_marker, m.end(), limit)
        if end >= 0:
            stop = end + len(end_marker)
        else:
            # No END within reach: take the following lines while they look like key material or headers.
            stop = m.end()
            while stop < limit and text[stop] == "\n":
                nxt = text.find("\n", stop + 1, limit)
                line_end = limit if nxt < 0 else nxt
                if line_end == stop + 1 or not _PEM_LINE.fullmatch(text, stop + 1, line_end):
                    break
                stop = line_end
        out.append(f"-----BEGIN {m.group('label')}----- {REDACTED}")
        pos = stop
    out.append(text[pos:])
    return "".join(out)


def _starts_word(text: str, i: int) -> bool:
    """True when position ``i`` starts a word (what ``\\b`` would say before a word character)."""
    return i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")


def _starts_name(text: str, i: int) -> bool:
    """A name part's start: after a non-letter (``db_password``, ``X-Api-Key``) or at a camelCase hump
    (the P of ``dbPassword``, the K of ``AccountKey``)."""
    return i == 0 or not text[i - 1].isalnum() or (text[i].isupper() and (text[i - 1].islower() or text[i - 1].isdigit()))


def _harmless(value: str) -> bool:
    """Values that are plainly not secrets: empty, None/true/false, numbers, placeholders, already masked."""
    return (value.strip().lower() in _HARMLESS_VALUES or value.isdigit() or value.startswith(REDACTED[:-1])
            or value.endswith(("...", "…"))  # a placeholder in documentation, e.g. OPENAI_API_KEY=sk-...
            or (value.startswith("<") and value.endswith(">")))


def _masked(text: str, start: int, value_start: int, end: int) -> str:
    """``text[start:end]`` with its value part masked (quotes kept), unless the value is harmless."""
    value = text[value_start:end]
    quote = value[0] if value[:1] in "'\"`" and len(value) >= 2 and value[-1] == value[0] else ""
    if _harmless(value[1:-1] if quote else value):
        return text[start:end]
    return f"{text[start:value_start]}{quote}{REDACTED}{quote}"


def _mask(text: str, m: re.Match[str]) -> str:
    """The match with its ``value`` group masked and the rest (its ``head``) kept."""
    return _masked(text, m.start(), m.start("value"), m.end("value"))


def _mask_word_start(text: str, m: re.Match[str]) -> str:
    return _mask(text, m) if _starts_word(text, m.start()) else text[m.start():m.end()]


def _redact_assignments(text: str) -> str:
    """Values assigned to secret names masked: ``password=…``, ``"api_key": "…"``, ``AccountKey=…``."""
    low = text.translate(_ASCII_LOWER)
    pieces: list[str] = []
    pos = 0
    for hint in _ASSIGNMENT_HINT.finditer(low):
        if hint.start() < pos:
            continue  # inside the value just masked
        head = _ASSIGNMENT_HEAD.search(low, max(pos, hint.start() - _NAME_WINDOW), hint.end())
        value = _ASSIGNMENT_VALUE.match(low, hint.end()) if head is not None else None
        if head is None or value is None:
            continue  # not a secret name
        password = _PASSWORD_HEAD.match(low, head.start(), head.end()) is not None
        if not (password or _starts_name(text, head.start())):
            continue  # a secret word that only ends a longer name (`mytoken=`)
        if low.startswith("pwd", head.start()) and low.startswith(("/", "~", "'/", '"/'), value.start("value")):
            continue  # PWD=/home/…: the working directory, not a password
        start = head.start()
        if low.startswith("token", start) and _VOCAB_TOKEN.search(text, max(0, start - 20), start):
            continue  # a tokenizer's special token, e.g. pad_token='<pad>'
        pieces.append(text[pos:start])
        pieces.append(_masked(text, start, value.start("value"), value.end()))
        pos = value.end()
    if not pieces:
        return text
    pieces.append(text[pos:])
    return "".join(pieces)


def _sub(pattern: re.Pattern[str], text: str, repl: Callable[[str, re.Match[str]], str], *, folded: bool = True) -> str:
    """``pattern.sub`` where ``repl`` sees the original text; with ``folded`` the pattern runs on an
    ASCII-lowercased copy (same offsets), so it matches any case at the speed of a case-sensitive search."""
    haystack = text.translate(_ASCII_LOWER) if folded else text
    pieces: list[str] = []
    pos = 0
    for m in pattern.finditer(haystack):
        pieces.append(text[pos:m.start()])
        pieces.append(repl(text, m))
        pos = m.end()
    if not pieces:
        return text
    pieces.append(text[pos:])
    return "".join(pieces)


def redact_text(text: str) -> str:
    """Mask credential-shaped substrings in free text (logs, tracebacks, prompts, rendered answers)."""
    if not text:
        return text
    out = _redact_pem(text)
    for p in _TOKEN_PATTERNS:
        out = p.sub(REDACTED, out)
    out = _sub(_AUTH_HEADER, out, _mask_word_start)
    out = _sub(_BEARER, out, _mask_word_start)
    out = _sub(_URL_PASSWORD, out, _mask)
    out = _sub(_QUERY_SECRET, out, _mask)
    out = _redact_assignments(out)
    out = _sub(_FLAG_WITH_VALUE, out, _mask_word_start)
    out = _LONG_OPAQUE.sub(lambda m: REDACTED if looks_like_secret(m.group(0)) else m.group(0), out)
    return out


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A command line with secrets masked, including the value that follows a ``--password``-style flag."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        arg = str(arg)
        if hide_next and not arg.startswith("-"):
            out.append(REDACTED)
        else:
            out.append(redact_text(arg))
        hide_next = bool(_SECRET_FLAG.match(arg.lower()))
    return out


def redact_value(value: Any) -> Any:
    """A JSON-like value (dicts, lists, strings) with every string redacted; keys naming secrets lose their value."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: (REDACTED if isinstance(k, str) and isinstance(v, str) and v and _names_secret(k) else redact_value(v))
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_value(v) for v in value]
    return value


def _names_secret(name: str) -> bool:
    """A dict key that names a credential (``api_key``, ``password``), not merely contains a word (``keys``)."""
    probe = f"{name}=x"
    return _redact_assignments(probe) != probe


def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """Environment variables with secret names or secret-looking values masked."""
    clean: dict[str, str] = {}
    for name, value in env.items():
        if _SECRET_NAME.search(name) or looks_like_secret(value):
            clean[name] = REDACTED
        else:
            clean[name] = redact_text(value)
    return clean
