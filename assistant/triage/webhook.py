"""Post triage messages to a webhook (Slack-compatible), with retries that never crash the watcher.

The body is what a Slack incoming webhook accepts (``{"text": ...}``) plus a ``torchhelp`` object
with the structured fields, so a bot can act on it without parsing the text:

    {"text": "New failure group g3 (cuda_oom): CUDA out of memory — 1 job, 2.00 GPU h",
     "torchhelp": {"event": "new_group" | "group_grew" | "regression", "group", "category", "title",
                   "job_count", "gpu_hours", "job_ids", "new_job_ids",
                   "diagnosis": {"title", "cause"} | null,
                   "known": {"note", "resolved", "resolved_by", "resolved_group", "runbook", "runbook_path"} | null,
                   "regression": bool, "regression_job": str | null}}

A ``regression`` message goes out once per resolved group when one of its jobs fails again after
the resolution (see ``triage.known``).

:func:`post` retries connection errors, timeouts, 5xx, 408 and 429 (honouring ``Retry-After`` up to
a cap) with doubling backoff, and never other 4xx: a 400/401/403/404 means the URL or the body is
wrong, and sending the same thing again cannot fix it. Redirects are never followed (a POST that is
redirected is a refusal with a note, never a re-POST somewhere else). One :func:`post` has a total
deadline (``deadline_s``, attempts and waits included: a receiver dripping its answer byte by byte
cannot hold it longer) and ends within a fraction of a second once its ``stop`` event is set. It
returns a :class:`Delivery` and never raises (KeyboardInterrupt aside).

Delivery contract of the watcher (see ``watch.Watcher.flush``): at least once, in queue order. A
permanent refusal drops that one message with a logged note and the next message goes on; a
transient failure keeps the message (and the ones after it) for the next poll, and after
:data:`MAX_DELIVERY_ROUNDS` failed polls the message is dropped with a note, so one message can never
block the ones after it forever.
"""

from __future__ import annotations

import email.utils
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Mapping, Sequence

log = logging.getLogger(__name__)

MAX_RETRY_AFTER_S = 10.0  # a receiver asking for a longer pause is retried on the next poll instead
MAX_JOB_IDS = 50  # job ids listed in one message (a big group lists its latest ones)
MAX_DELIVERY_S = 20.0  # one post(), all its attempts and waits: the most a poll waits on one message
MAX_DELIVERY_ROUNDS = 8  # polls a message may fail (transiently) before it is dropped with a note
TRANSIENT_4XX = (408, 429)  # the only 4xx worth sending again
_WAIT_STEP_S = 0.05  # how often a waiting post() looks at its stop event


@dataclass(frozen=True)
class Delivery:
    """The outcome of one :func:`post`: delivered, or why not and whether trying later may help."""

    ok: bool
    status: int | None = None  # the last HTTP status, None when no answer came
    attempts: int = 0
    error: str = ""
    permanent: bool = False  # a 4xx other than 408/429, a redirect, a bad URL: the same message will never be accepted
    stopped: bool = False  # the stop event ended it: nothing was decided about the message


def _retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header (delta-seconds or an HTTP date), None when absent or bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def post(
    url: str,
    payload: Mapping[str, Any],
    *,
    retries: int = 3,
    backoff_s: float = 0.5,
    timeout_s: float = 5.0,
    deadline_s: float = MAX_DELIVERY_S,
    transport: Any = None,
    sleep: Callable[[float], Any] | None = None,
    stop: threading.Event | None = None,
) -> Delivery:
    """POST ``payload`` as JSON to ``url``; retry transient failures up to ``retries`` times.

    Backoff doubles from ``backoff_s`` (0.5, 1, 2 s); a ``Retry-After`` on 429/503 replaces it,
    capped at ``MAX_RETRY_AFTER_S``. Everything ends by ``deadline_s`` (``timeout_s`` bounds each
    read, the deadline the whole delivery) or as soon as ``stop`` is set. ``transport`` (an ``httpx``
    transport, e.g. ``MockTransport``) and ``sleep`` are for tests. Never raises: the result says
    what happened.
    """
    import httpx  # lazy: only the watcher with a webhook pays for it

    stop = stop or threading.Event()
    wait_for = sleep if sleep is not None else stop.wait
    deadline = time.monotonic() + deadline_s
    attempts = 0
    status: int | None = None
    error = ""
    client = httpx.Client(timeout=timeout_s, transport=transport, follow_redirects=False)
    try:
        for attempt in range(retries + 1):
            remaining = deadline - time.monotonic()
            if stop.is_set():
                return Delivery(False, status, attempts, "stopped before the message was delivered", stopped=True)
            if remaining <= 0:
                error = f"no answer within the {deadline_s:g} s delivery deadline" + (f" (last: {error})" if error else "")
                break
            attempts = attempt + 1
            wait = backoff_s * (2 ** attempt)
            outcome = _attempt(client, url, payload, remaining, stop)
            if outcome is None:  # stop or deadline while the receiver was still answering
                if stop.is_set():
                    return Delivery(False, status, attempts, "stopped while the receiver was answering", stopped=True)
                error = f"the receiver did not answer within the {deadline_s:g} s delivery deadline"
                break
            if isinstance(outcome, httpx.HTTPError):  # connection refused, DNS, timeouts, protocol errors
                status, error = None, f"{type(outcome).__name__}: {outcome}"
            elif isinstance(outcome, BaseException):  # an invalid URL and the like: never crash the watcher
                return Delivery(False, None, attempts, f"{type(outcome).__name__}: {outcome}", permanent=True)
            else:
                status = outcome.status_code
                if 200 <= status < 300:
                    return Delivery(True, status, attempts)
                refused = _refusal(outcome)
                if refused is not None:
                    log.warning("webhook %s refused the message (%s); not retrying", _redact(url), refused)
                    return Delivery(False, status, attempts, refused, permanent=True)
                error = f"HTTP {status}: {outcome.text[:200]}"
                asked = _retry_after(outcome.headers.get("Retry-After"))
                if asked is not None:
                    if asked > MAX_RETRY_AFTER_S:
                        error += f" (Retry-After {asked:.0f} s: left for the next poll)"
                        break
                    wait = asked
            if attempt < retries:
                wait_for(max(0.0, min(wait, deadline - time.monotonic())))
    finally:
        _close_soon(client)
    log.warning("webhook %s not reached after %d attempt(s): %s", _redact(url), attempts, error)
    return Delivery(False, status, attempts, error)


def _refusal(response: Any) -> str | None:
    """Why an answer is a permanent refusal (a redirect, a 4xx other than 408/429), or None when it is transient."""
    status = int(response.status_code)
    if 300 <= status < 400:
        where = response.headers.get("Location") or "?"
        return f"HTTP {status}: redirect to {_redact(where)} not followed (a webhook POST is never redirected; fix the URL)"
    if 400 <= status < 500 and status not in TRANSIENT_4XX:
        return f"HTTP {status}: {response.text[:200]}"
    return None


def _attempt(client: Any, url: str, payload: Mapping[str, Any], within_s: float, stop: threading.Event) -> Any:
    """One POST in a worker thread: the response, the exception it raised, or None when ``stop`` or
    ``within_s`` came first (the worker is then abandoned; its connection is closed by the caller)."""
    box: list[Any] = []
    done = threading.Event()

    def send() -> None:
        try:
            response = client.post(url, json=dict(payload), headers={"User-Agent": "torchhelp-triage"})
            box.append(response)
        except BaseException as exc:  # handed to the waiting thread, which decides
            box.append(exc)
        finally:
            done.set()

    threading.Thread(target=send, name="torchhelp-webhook", daemon=True).start()
    until = time.monotonic() + within_s
    while not done.wait(min(_WAIT_STEP_S, max(0.0, until - time.monotonic()))):
        if stop.is_set() or time.monotonic() >= until:
            return None
    return box[0]


def _close_soon(client: Any) -> None:
    """Close the client without waiting on it (an abandoned request may still hold its connection)."""

    def close() -> None:
        try:
            client.close()
        except Exception as exc:  # noqa: BLE001 - closing a half-used connection: nothing left to save
            log.debug("closing the webhook client: %s", exc)

    threading.Thread(target=close, name="torchhelp-webhook-close", daemon=True).start()


def _redact(url: str) -> str:
    """The URL without its path (Slack webhook paths are secrets) for log lines."""
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0]
    return f"{scheme}://{host}/…" if rest else url


def message(
    event: str,
    *,
    group: str,
    category: str,
    title: str,
    job_count: int,
    gpu_hours: float,
    job_ids: Sequence[str],
    new_job_ids: Sequence[str] = (),
    diagnosis_title: str | None = None,
    diagnosis_cause: str | None = None,
    known: Mapping[str, Any] | None = None,
    regression_job: str | None = None,
) -> dict[str, Any]:
    """The Slack-compatible body for a ``new_group``, ``group_grew`` or ``regression`` event.

    ``known`` (the ``Known.to_dict()`` of a resolved group) adds the team's note and runbook; a
    ``regression`` event names the job that came back after the group was resolved.

    Every string comes from logs, folder names or the team's notes: the text goes out through
    :func:`~assistant.render.outgoing.slack_text` (no controls, no credentials, no Slack mentions or
    disguised links) and the structured object through :func:`~assistant.render.outgoing.shown_value`.
    """
    from assistant.render.outgoing import shown_text, shown_value, slack_text

    if event not in ("new_group", "group_grew", "regression"):
        raise ValueError(f"unknown webhook event {event!r}")
    if event == "regression" and known is None:
        raise ValueError("a regression message needs the resolution it breaks")
    jobs_word = "job" if job_count == 1 else "jobs"
    listed = list(job_ids)[-MAX_JOB_IDS:]
    if event == "regression":
        assert known is not None
        head = f"REGRESSION in failure group {group} ({category}): {title}"
        body = (f"resolved {known.get('resolved')} by {known.get('resolved_by')}: {known.get('note')} (runbook {known.get('runbook')})\n"
                f"job {regression_job} failed again after that; {job_count} {jobs_word}, {gpu_hours:.2f} GPU h lost")
    elif event == "new_group":
        head = f"New failure group {group} ({category}): {title}"
        body = f"{job_count} {jobs_word} ({', '.join(listed[:5])}), {gpu_hours:.2f} GPU h lost"
    else:
        head = f"Failure group {group} ({category}) grew to {job_count} {jobs_word}: {title}"
        recent = list(new_job_ids)[-5:]
        body = f"+{len(new_job_ids)} since the last message (latest: {', '.join(recent)}), {gpu_hours:.2f} GPU h lost"
    text = f"{head}\n{body}"
    if known is not None and event != "regression":
        text += f"\nknown: {known.get('note')} (resolved {known.get('resolved')}; runbook {known.get('runbook')})"
    if diagnosis_cause:
        text += f"\nCause: {shown_text(diagnosis_cause)[:500]}"  # masked before the cut: no token cut in half
    diagnosis = None
    if diagnosis_title or diagnosis_cause:
        diagnosis = {"title": diagnosis_title, "cause": diagnosis_cause}
    return {
        "text": slack_text(text),
        "torchhelp": shown_value({
            "event": event,
            "group": group,
            "category": category,
            "title": title,
            "job_count": job_count,
            "gpu_hours": round(gpu_hours, 4),
            "job_ids": listed,
            "new_job_ids": list(new_job_ids)[-MAX_JOB_IDS:],
            "diagnosis": diagnosis,
            "known": dict(known) if known is not None else None,
            "regression": event == "regression",
            "regression_job": regression_job,
        }),
    }
