"""What the user says they already tried: remedies an answer should not offer again.

Reports often say "lowering the learning rate did not help" or "I already tried num_workers=0". A fix that
repeats it is worse than useless: it tells the user we did not read them, and the thread has ruled it out.
This reader finds such statements (a sentence with a marker of trying and a remedy's topic) and names the
topics; the composer leaves out the fixes about them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# A sentence says something was tried (and, mostly, that it did not help).
_TRIED = re.compile(
    r"\b(?:i(?:'ve| have)? (?:already |also )?tried|we(?:'ve| have)? (?:already |also )?tried|tried (?:to |with |using |setting |lowering |reducing )?"
    r"|have already|already (?:set|use[ds]?|reduced|lowered|changed|added)"
    r"|did(?: not|n't) (?:help|work|fix|solve|change anything)|does(?: not|n't) (?:help|work|fix|solve)|(?:is|was) not helpful|no help"
    r"|no (?:effect|luck|difference)|to no avail|without (?:success|luck)|makes? no difference)\b"
    r"|尝试|试过|试了|没有用|没用",
    re.I,
)
# Topic -> what the user's sentence says about it. The same names key FIX_TOPICS.
TOPICS: dict[str, re.Pattern[str]] = {
    "learning_rate": re.compile(r"learning[ _-]?rate|\blr\b|warm-?up", re.I),
    "batch_size": re.compile(r"batch[ _-]?size|smaller batch", re.I),
    "workers": re.compile(r"num_workers|(?:data ?loader|loading) workers|fewer workers", re.I),
    "reinstall": re.compile(r"re-?install", re.I),
    "driver": re.compile(r"\b(?:nvidia |gpu |cuda )?drivers?\b", re.I),
    "gradient_clipping": re.compile(r"clip(?:ping)?(?:_grad| the grad| grad)|gradient clipping|clip_grad", re.I),
    "empty_cache": re.compile(r"empty_cache", re.I),
}
# Topic -> the words of a fix about it (title, detail and code together).
FIX_TOPICS: dict[str, re.Pattern[str]] = {
    "learning_rate": re.compile(r"learning rate|\blr\b|warm-?up", re.I),
    "batch_size": re.compile(r"(?:smaller|reduce|lower|halve)\w* (?:the )?batch|batch[ _-]?size", re.I),
    "workers": re.compile(r"num_workers|fewer workers", re.I),
    "reinstall": re.compile(r"\bre-?install", re.I),
    "driver": re.compile(r"(?:update|upgrade|install|reinstall)\w* (?:the |your |a newer )?(?:nvidia |gpu )?driver", re.I),
    "gradient_clipping": re.compile(r"clip_grad|clip (?:the )?grad|gradient clipping", re.I),
    "empty_cache": re.compile(r"empty_cache", re.I),
}
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|\n+")
MAX_TEXT = 100_000  # statements of what was tried sit in the prose around the error, not deep in a long log


def already_tried(text: str) -> frozenset[str]:
    """The remedy topics the user says they already tried (see :data:`TOPICS`)."""
    found: set[str] = set()
    for sentence in _SENTENCE.split(text[:MAX_TEXT]):
        if len(sentence) > 600 or not _TRIED.search(sentence):
            continue  # a log line or a traceback is no statement of what was tried
        found.update(topic for topic, pattern in TOPICS.items() if pattern.search(sentence))
    return frozenset(found)


def about(topics: Iterable[str], text: str) -> tuple[str, ...]:
    """The topics among ``topics`` that a fix's ``text`` is about."""
    return tuple(t for t in topics if t in FIX_TOPICS and FIX_TOPICS[t].search(text))
