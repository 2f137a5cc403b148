"""The investigation: pick the experiments that tell the leading hypotheses apart, run each once within
a time budget, and let each outcome verify or rule out hypotheses.

The budget defaults to :data:`BUDGET_FACTOR` times the failing run; each re-run is also stopped at the
point where it has clearly passed the step that failed (see :func:`rerun.pass_point`). Experiments
that no longer fit are reported as not run, with the reason, so the user can run them by hand.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from assistant.investigate.catalogue import ExperimentSpec, applicable, matches
from assistant.investigate.readers import LEAD, RULE, Finding, RerunView, read
from assistant.investigate.rerun import RUN_DIR_MARK, Rerun, classify, pass_point, rerun
from assistant.investigate.switches import MARK
from assistant.types import Diagnosis, ExperimentResult, Hypothesis

BUDGET_FACTOR = 3.0
TOTAL_FACTOR = 4.0  # the whole command (failing run, diagnosis, experiments, answer) stays within this many failing runs
TOTAL_MARGIN = 0.93  # the failing run under the hook is a little slower than the program alone: keep clear of the bound
MIN_SHARE = 1.0  # an experiment is started only with at least this share of the failing run's time left: less cannot reach the failure
VERIFIED_WEIGHT = 10.0
RULED_OUT_WEIGHT = 0.1
MAX_LIKELIHOOD = 0.97
OUTCOME_WORDS = {"passed": "passed", "same": "same failure", "other": "a different failure", "stopped": "stopped before it showed anything",
                 "not_run": "not run"}


@dataclass(frozen=True)
class FailingRun:
    """What the investigation knows about the run that failed."""

    argv: list[str]
    text: str  # what was diagnosed (stderr tail and the hook's traceback)
    duration_s: float
    location: str  # innermost user frame of the failure ("" when unknown)
    used_cuda: bool


def command_for(spec: ExperimentSpec, argv: Sequence[str]) -> str:
    """The command a user can paste to repeat one experiment."""
    cmd = shlex.join(argv)
    if spec.switches and not spec.env:
        # Switches live in torchhelp's crash hook: repeat through `torchhelp run`.
        return f"torchhelp run --investigate --experiment {spec.id} --yes -- {cmd}"
    env = " ".join(f"{k}={shlex.quote(v.replace(RUN_DIR_MARK, '/tmp'))}" for k, v in spec.env if not k.startswith("TORCHHELP_"))
    if any(k.startswith("TORCHHELP_") for k, _ in spec.env):
        return f"torchhelp run --investigate --experiment {spec.id} --yes -- {cmd}"
    return f"{env} {cmd}"


def total_deadline(started: float, failing_s: float, reserve_s: float) -> float:
    """The ``time.perf_counter()`` by which the experiments must end so that the whole command, begun at
    ``started``, stays within :data:`TOTAL_FACTOR` failing runs, ``reserve_s`` kept for the answer after them."""
    return started + TOTAL_MARGIN * TOTAL_FACTOR * failing_s - reserve_s


def investigate(failing: FailingRun, d: Diagnosis, diagnose: Callable[[str], Diagnosis], *, budget_s: float | None = None,
                only: tuple[str, ...] = (), progress: Callable[[str], None] | None = None,
                rediagnose: Callable[[tuple[ExperimentResult, ...]], Diagnosis] | None = None,
                deadline: float | None = None) -> Diagnosis:
    """Run the experiments for ``d`` and return it with ``experiments`` filled and its hypotheses re-ranked.

    ``diagnose`` turns a re-run's text into a diagnosis (to name a different failure, or to replace the
    answer when an experiment shows the failure is the program's own). ``rediagnose`` diagnoses the
    original failure again with the experiments as evidence, so a rule reads what they settled in the
    user's own numbers (e.g. an OOM whose fragmentation was ruled out). ``progress`` gets one line per experiment.
    ``deadline`` (a ``time.perf_counter()`` value, see :func:`total_deadline`) also bounds the experiments, so
    the whole command keeps its time; an explicit ``budget_s`` is the user's own choice and is not cut by it.
    """
    import time

    specs = applicable(d, failing.used_cuda, only, failing.text)
    if not specs:
        return replace(d, notes=(*d.notes, f"No experiment applies to a {d.category} failure; nothing was re-run."))
    budget = budget_s if budget_s is not None else BUDGET_FACTOR * failing.duration_s
    start = time.perf_counter()
    results: list[ExperimentResult] = []
    replacement: Diagnosis | None = None
    done_by: ExperimentResult | None = None
    for i, spec in enumerate(specs, 1):
        now = time.perf_counter()
        left = budget - (now - start)
        if deadline is not None and budget_s is None:
            left = min(left, deadline - now)
            if not results:
                # The first (most telling) experiment is what the user asked for: it always gets the window one
                # re-run needs, even where torchhelp's own start and diagnosis have spent the bound on a short program.
                left = max(left, pass_point(failing.duration_s))
        need = MIN_SHARE * failing.duration_s
        if done_by is not None:
            how = "passed and verified" if done_by.outcome == "passed" else "verified"
            results.append(_not_run(spec, failing, f"not needed: the run with {done_by.change} {how} {', '.join(done_by.verified)}"))
            continue
        if left < need:
            results.append(_not_run(spec, failing, f"the time budget was spent ({max(left, 0.0):.0f} s left, a run takes {need:.0f} s); repeat it by hand with the command shown"))
            continue
        if progress:
            progress(f"experiment {i}/{len(specs)}: {spec.title} ({spec.change}) …")
        run = rerun(failing.argv, spec, deadline_s=min(left, pass_point(failing.duration_s)))
        result, finding, other = _judge(spec, run, failing, d, diagnose)
        results.append(result)
        if progress:
            progress(f"  {OUTCOME_WORDS[result.outcome]} in {result.duration_s:.1f} s" + (f": {result.finding}" if result.finding else ""))
        if finding.replaces and other is not None and replacement is None:
            replacement = other
        if settles(result):
            done_by = result
    settled = tuple(results)
    if rediagnose is not None and replacement is None and any(r.verified or r.ruled_out for r in settled):
        d = rediagnose(settled)
    return apply_results(d, settled, replacement)


def settles(result: ExperimentResult) -> bool:
    """Whether one experiment settled the question, so that further re-runs would only cost time: the change
    made the program pass and verified a cause, or it verified exactly one cause (two verified at once still
    leave the question which)."""
    if result.outcome == "passed":
        return bool(result.verified)
    return len(result.verified) == 1


def _not_run(spec: ExperimentSpec, failing: FailingRun, why: str) -> ExperimentResult:
    return ExperimentResult(spec.id, spec.title, spec.change, spec.question, "not_run", command_for(spec, failing.argv), finding=why)


def _judge(spec: ExperimentSpec, run: Rerun, failing: FailingRun, d: Diagnosis,
           diagnose: Callable[[str], Diagnosis]) -> tuple[ExperimentResult, Finding, Diagnosis | None]:
    """The outcome of one re-run, what its reader found, and the diagnosis of a different failure."""
    outcome = classify(run, failing.text, failing.duration_s)
    headline, location = _headline_and_location(run.text) if outcome in ("same", "other") else ("", "")
    view = RerunView(outcome, run.text, run.record, headline, location, failing.location, d.category, run.values)
    finding = read(spec.reader, view)
    # A switch that stopped the run found what it looked for (the finding says it): nothing else to name.
    switch_stop = MARK in run.text
    other = diagnose(run.text) if (outcome == "other" and not switch_stop) or finding.replaces else None
    failure = f"{other.category}: {headline or other.error}" if other is not None and outcome == "other" else ""
    lead = d.hypotheses[0].id if d.hypotheses else (d.rule or d.category)
    verified, ruled_out = spec.moves(outcome)
    known, family = _known_ids(d), _family_ids(d)
    verified = _resolve((*verified, *finding.verifies), lead, known, family)
    ruled_out = tuple(h for h in _resolve((*ruled_out, *finding.rules_out), lead, known, family) if h not in verified)
    detail = finding.text
    if outcome == "passed" and not detail:
        detail = ("it ran to the end without failing" if run.exit_code == 0 else
                  f"it ran {run.duration_s:.1f} s without failing, past the {failing.duration_s:.1f} s the failing run took; stopped there")
    result = ExperimentResult(spec.id, spec.title, spec.change, spec.question, outcome, command_for(spec, failing.argv),
                              finding=detail, failure=failure, verified=verified, ruled_out=ruled_out, duration_s=run.duration_s,
                              values=finding.values or {})
    return result, finding, other


def _headline_and_location(text: str) -> tuple[str, str]:
    """The re-run's error line and its innermost frame in the user's code (a switch's own frames skipped)."""
    from pathlib import Path

    from assistant.parse.traceback import parse_failure

    ours = str(Path(__file__).resolve().parent)
    failure = parse_failure(text)
    user = [f for f in failure.user_frames if not f.file.startswith(ours)]
    return failure.headline[:300], (user[-1].location() if user else "")


def _family_ids(d: Diagnosis) -> set[str]:
    from assistant.differential.families import FAMILIES

    family = FAMILIES.get(d.category)
    return {a.id for a in family.alternatives} if family is not None else set()


def _known_ids(d: Diagnosis) -> set[str]:
    """Hypotheses an experiment may speak about: the diagnosis's own, and the family's other common causes
    when the diagnosis is ranked among them (a rule's single reading is not a family member to add to)."""
    ids = {h.id for h in d.hypotheses}
    family = _family_ids(d)
    if ids & family:
        ids |= family
    return ids


def _resolve(patterns: Sequence[str], lead: str, known: set[str], family: set[str]) -> tuple[str, ...]:
    """Hypothesis ids named by ``patterns`` (exact ids, prefixes, LEAD, or RULE) among the known ones."""
    out: list[str] = []
    for p in patterns:
        if p == LEAD:
            out.append(lead)
        elif p == RULE:
            if lead not in family:
                out.append(lead)
        else:
            out.extend(sorted(h for h in known if matches(h, (p,))))
    return tuple(dict.fromkeys(out))


def apply_results(d: Diagnosis, results: tuple[ExperimentResult, ...], replacement: Diagnosis | None = None) -> Diagnosis:
    """The diagnosis re-ranked by what the experiments verified and ruled out, with the experiments attached.

    A replacement (the program fails the same way without the suspected feature) becomes the answer,
    keeping the experiments and saying why.
    """
    if replacement is not None:
        note = "An experiment showed the failure does not come from what was first suspected; the diagnosis is of the re-run's failure."
        return replace(replacement, experiments=results, notes=(*replacement.notes, note))
    hypotheses = _reranked(d, results)
    if not hypotheses:
        return replace(d, experiments=results)
    lead = hypotheses[0]
    changed = bool(d.hypotheses) and lead.id != d.hypotheses[0].id
    if changed:
        from assistant.compose.deterministic import summary_of

        return replace(d, hypotheses=hypotheses, cause=lead.cause, fixes=lead.fixes or d.fixes, summary=summary_of(d.title, lead.cause),
                       experiments=results)
    return replace(d, hypotheses=hypotheses, experiments=results)


def _reranked(d: Diagnosis, results: Sequence[ExperimentResult]) -> tuple[Hypothesis, ...]:
    """Each verified hypothesis weighs VERIFIED_WEIGHT times more, each ruled-out one RULED_OUT_WEIGHT; the total is kept."""
    hyps = {h.id: h for h in d.hypotheses}
    if not hyps and d.category != "unknown":
        hyps[d.rule or d.category] = Hypothesis(d.rule or d.category, d.cause, d.confidence, "", d.fixes)
    weight = {h: 1.0 for h in hyps}
    for r in results:
        for hid in r.verified:
            if hid not in hyps:
                added = _from_family(d, hid)
                if added is None:
                    continue
                hyps[hid] = added
                weight[hid] = 1.0
            weight[hid] *= VERIFIED_WEIGHT
            hyps[hid] = replace(hyps[hid], supports=(*hyps[hid].supports, f"verified by re-running with {r.change}: {r.finding or OUTCOME_WORDS[r.outcome]}"))
        for hid in r.ruled_out:
            if hid in hyps:
                weight[hid] *= RULED_OUT_WEIGHT
                hyps[hid] = replace(hyps[hid], weakens=(*hyps[hid].weakens, f"ruled out by re-running with {r.change}: {r.finding or OUTCOME_WORDS[r.outcome]}"))
    total = sum(h.likelihood for h in d.hypotheses) or d.confidence or 1.0
    raw = {hid: max(h.likelihood, 0.05) * weight[hid] for hid, h in hyps.items()}
    norm = sum(raw.values()) or 1.0
    ranked = sorted((replace(h, likelihood=min(MAX_LIKELIHOOD, total * raw[hid] / norm)) for hid, h in hyps.items()), key=lambda h: -h.likelihood)
    return tuple(ranked)


def _from_family(d: Diagnosis, hid: str) -> Hypothesis | None:
    """A hypothesis from the family's common causes that the ranking had left out but an experiment verified."""
    from assistant.differential.families import FAMILIES

    family = FAMILIES.get(d.category)
    alt = next((a for a in family.alternatives if a.id == hid and a.available), None) if family else None
    if alt is None:
        return None
    return Hypothesis(alt.id, alt.cause, 0.05, alt.check, alt.fixes)

