"""Described symptoms: a report in words, with no error message a rule could read.

Users often write what they see instead of pasting a traceback: "the loss becomes nan after ~200
steps", "GPU memory keeps increasing every epoch", "training hangs with num_workers > 0", "DDP is
stuck at init_process_group". These rules run last (they read any failure, so they come after every
message rule and generic fallback of the failure's family; the NaN reader sits in the ``text`` family
before the generic NaN rule) and answer only texts without an exception line, frames or kernel
assertions: a described symptom never overrides a real message.

What the words say decides between causes of one family (NaN from the first step vs after many
steps; memory that grows vs OOM at batch size 1; a hang at start-up vs mid-training), so each
answer says which words it read, keeps a moderate confidence (it is read from a description), and
asks for the one log or measurement that would decide.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from assistant.rules.base import Context, LazyPattern, hit, lazy_re, remedy
from assistant.rules.registry import FALLBACK, Example, rule
from assistant.types import Fact, Facts, RuleHit

# -- vocabulary -------------------------------------------------------------------------------

# NaN / Inf as a word: "nan", "NaN", "-nan", "NaNs", "inf" (not "nanoGPT", "info", "infinite loop").
# ASCII boundaries: in "变成nan了" the neighbours are word characters to `\b`, but not part of the word.
_NAN = lazy_re(r"(?<![A-Za-z0-9_.-])-?(?:nan|nans|inf)(?![A-Za-z0-9_-])", re.I)
# Words that place a NaN in training (a loss, weights, outputs ...), so a stray "nan" in other prose is ignored.
_TRAINING = lazy_re(r"loss|train|epoch|iter|step|batch|weight|grad|output|logit|predict|model|value|result", re.I)

_GROWTH = lazy_re(
    r"(?:memory|\bram\b|vram|\bmem\b|gpu usage|gpu_mem)[^.\n]{0,60}?"
    r"(?:keeps? (?:on )?(?:increasing|growing|rising|going up|decreasing)|(?:continuously|consistently|gradually|steadily|constantly|slowly)? ?(?:increas|grow|grew|ris(?:e|es|ing)\b|climb|leak|explod|goes up|going up|went up)"
    r"|higher and higher|will become higher|accumulat(?:es|ed|ing)\b)"
    r"|(?:increas|grow)\w* (?:in |of )?(?:the )?(?:gpu |cpu |video |system |host )?(?:memory|ram|vram)\b|memory (?:leak|explosion)|(?:\bram\b|memory)[^.\n]{0,40}?fill",
    re.I,
)
_OOM = lazy_re(r"out of (?:gpu |cuda |video )?memory|\bOOM\b|OutOfMemory|CUDA_ERROR_OUT_OF_MEMORY", re.I)
# Killed by the system (passive, or the OS/kernel as subject), not "I killed the process after it hung".
_KILLED = lazy_re(
    r"\b(?:process|train\w*|job|program|python|script)\b[^.\n]{0,30}?\b(?:is|was|be|been|being|gets?|got|getting|always|directly)\b[^.\n]{0,20}?\bkilled\b"
    r"|\b(?:process|training|job|program)\b (?:\w+ )?killed\b(?! (?:the|it|my|a|this)\b)|message \W?killed\b"
    r"|\bkilled by (?:the )?(?:system|kernel|os|linux|oom)|\b(?:system|os|kernel|linux) kill(?:s|ed)\b|已杀死|OOM killer|oom-kill",
    re.I,
)
_HANG = lazy_re(
    r"\b(?:hang|hangs|hanging|hung|stuck|stucks|freez\w*|froze|frozen|halts?|deadlock\w*|stalls?|stalled|locks? up|locked up|blocked|suspend(?:s|ed)?)\b"
    r"|(?:no|without any) (?:more |visible )?output|never (?:prints?|returns?|progress\w*|proceeds?|finish\w*)|does not progress|stop(?:s|ped)? (?:running|progressing)",
    re.I,
)
_WORKERS = lazy_re(r"num_workers?|\bworkers?\b|dataloader|data loader", re.I)
_WORKER_CONDITION = lazy_re(
    r"num_workers?\s*(?:>|>=|=\s*[1-9]|is ever set|greater than 0|to [1-9]|nonzero|non-zero)|workers? ?> ?0|with (?:more than \d+ )?workers|has more than \d+ workers|dataloader with num_workers",
    re.I,
)
_DISTRIBUTED = lazy_re(
    r"\bDDP\b|DistributedDataParallel|distributed|init_process_group|\bNCCL\b|multi[- ]?gpu|multiple gpu|(?<!\d)\d+ gpus?\b|gpus\b|multi[- ]?node|\bnodes\b|\branks?\b"
    r"|torchrun|torch\.distributed|dist_train|accelerate launch|barrier\(|all_?reduce|all_gather",
    re.I,
)
_INIT_PHASE = lazy_re(
    r"init_process_group|initi?ali[sz](?:ation|ing|e)\b(?! (?:has been |is |was )?(?:completed|done|finished))|rendezvous"
    r"|before (?:entering |starting )?(?:the )?(?:first )?(?:training|epoch)"
    r"|at the (?:very )?(?:start|beginning)|(?:never|doesn'?t|does not|won'?t) (?:even )?start",
    re.I,
)
_FP16 = lazy_re(r"\bfp16\b|float16|half[- ]precision|\.half\(\)|mixed[-_ ]precision|\bamp\b|autocast|to_fp16|precision\s*[:=]?\s*16\b|precision (?:is |was )?(?:set )?(?:to |as )?16\b|16-mixed|--fp16", re.I)
# A loss described as diverging/exploding (no literal "nan"): the same family, read as "became non-finite/huge after a while".
_DIVERGE = lazy_re(r"\bloss\w*\b[^.\n]{0,40}?\b(?:diverg\w*|explod\w*|blows? up|blew up)|\b(?:diverg\w*|exploding) (?:training )?loss", re.I)
# The user's text names a logarithm (torch.log(x), log of 0): log at 0 is a direct source of -inf/NaN.
# A loss reported as exactly 0 ("loss is always 0", "loss全为0"): in half precision the overflow story (inf/NaN steps skipped or
# logged as 0), read only together with an fp16 flag (without it, fully masked labels are as likely).
_ZERO_LOSS = lazy_re(r"(?<![A-Za-z_])(?:train_|training |eval_)?loss(?:es)?(?![A-Za-z_])[^.\n]{0,20}?(?:全为|全是|全部为|一直为|一直是|都是|都为|变成|变为|为|\b(?:becomes?|became|is|are|was|were|stays?|goes to|drops? to|all)\s+(?:always\s+|exactly\s+|all\s+)?)0(?:\.0+)?(?![\d.])", re.I)
# The user ties the NaN to a known PyTorch bug (a link to its issue tracker, or "known issue/bug"): a kernel fixed in a later release.
_KNOWN_TORCH_BUG = lazy_re(r"github\.com/pytorch/pytorch/(?:issues|pull)/\d+|\bknown (?:issues?|bugs?)\b|\bis (?:this|it) a bug\b", re.I)
_LOG_CALL = lazy_re(r"torch\.log\(|\blog\(0\)|\blog\(\s*\w+\s*\)|\blog of (?:0|zero)\b", re.I)
_BF16 = lazy_re(r"\bbf16\b|bfloat16", re.I)
_LR_TRIED = lazy_re(r"(?:reduc|lower|decreas|chang|tun)\w{0,12} (?:the )?(?:learning[ _]rate|\blr\b)|learning[ _]rate to `?\d", re.I)
_EVAL = lazy_re(r"\b(?:test(?:ing)?|validat\w*|evaluat\w*|inference|predict\w*)\b", re.I)
# Memory that rises within an epoch and falls back when the loader restarts (DataLoader workers' host memory).
_DROPS = lazy_re(r"drop\w* (?:back )?(?:to )?[^.\n]{0,30}(?:after|at the end of|every|each) (?:each )?epoch|after which it drops|released when (?:one |an |the |each )?epoch", re.I)
_GPU_WORDS = lazy_re(r"\bgpu\b|\bcuda\b|vram|video memory|graphics memory|device memory|gpu_mem|nvidia-smi|显存", re.I)
_CPU_WORDS = lazy_re(r"\bram\b|\bcpu\b|host memory|system memory|main memory|\bswap\b|resident|\brss\b|free -m|\bOS kills\b|system killed|kill", re.I)
_NOT_GPU = lazy_re(r"\bnot (?:on )?(?:the )?gpu\b|\(not gpu\)|\bNOT on GPU\b", re.I)

_WORD_NUMBERS = {
    "first": 1, "1st": 1, "one": 1, "second": 2, "2nd": 2, "two": 2, "third": 3, "3rd": 3, "three": 3, "fourth": 4, "four": 4,
    "fifth": 5, "five": 5, "sixth": 6, "six": 6, "seventh": 7, "seven": 7, "eighth": 8, "eight": 8, "ninth": 9, "nine": 9,
    "tenth": 10, "ten": 10, "a dozen": 12, "dozen": 12,
}
_UNITS = {
    "epoch": "epochs", "epoches": "epochs", "epochs": "epochs", "round": "epochs", "rounds": "epochs",
    "iteration": "steps", "iterations": "steps", "iter": "steps", "iters": "steps", "step": "steps", "steps": "steps",
    "batch": "steps", "batches": "steps", "update": "steps", "updates": "steps", "times": "steps",
}
_NUM = r"(?P<num>\d[\d,]*(?:\.\d+)?k?|first|1st|second|2nd|third|3rd|fourth|fifth|sixth|seventh|eighth|ninth|tenth|one|two|three|four|five|six|seven|eight|nine|ten|a dozen|dozen)"
_UNIT = r"(?P<unit>epoch(?:e?s)?|rounds?|iterations?|iters?|steps?|batch(?:es)?|updates?|times)\b"
# "after 2000 iterations", "after ~6000 iters", "after more than a dozen rounds", "at the 10th epoch", "during the fifth epoch", "20k+ steps".
_COUNT_BEFORE_UNIT = lazy_re(
    r"(?:after[^.\n\d]{0,12}?\(?|at|in|during|reaches|reaching|until|around|about|for|than|~)\s*(?:the |about |around |roughly |approximately |~|more than |over |training )*"
    + _NUM + r"(?:\+|th|st|nd|rd)?(?:\s*[-–~]\s*\d+)?\s*(?:\+\s*\d+\s*)?(?:of )?" + _UNIT,
    re.I,
)
# "after epoch 3", "at the epoch of 28", "at iteration 4000".
_UNIT_BEFORE_COUNT = lazy_re(r"(?:after|at|in|during|until|around)\s+(?:the\s+)?" + _UNIT + r"\s*(?:of\s+)?(?P<num>\d[\d,]*)\b", re.I)
# Vague "later" words: the loss was fine for a while.
_LATER = lazy_re(
    r"after (?:a |some |several |certain |many |a few |few )(?:\w+ )?(?:epochs?|iterations?|steps?|batches|rounds|time|while|hours)|after a while|suddenly|at some point"
    r"|(?:was|were) (?:converging|decreasing|fine|normal)|half(?:way| of the total)|in the middle|after training for|(?:high|large) (?:iteration|step) (?:numbers|counts)|突然",
    re.I,
)
# From the start: the first step(s) already give NaN.
_FROM_START = lazy_re(
    r"(?:from|at|since|on) (?:the )?(?:very )?(?:start|beginning|begin|first (?:iteration|iter|step|batch|forward))\b|immediately|right away|from the first|from (?:the )?second (?:iteration|step|batch)"
    r"|(?:after|in|at) (?:the )?(?:first|1st|second|2nd) (?:iteration|iter|step|batch|forward|update)|(?:first|1st) (?:forward pass|few (?:iterations|steps|batches))|(?:each|every) (?:iteration|step|batch)"
    r"|\b(?:in|at) batch ?1\b|first ten batch|at init\b|in the first layer",
    re.I,
)
# "in/during/at the first epoch": early, but could still be hundreds of steps in.
_FIRST_EPOCH = lazy_re(r"(?:in|during|at|on) (?:the )?(?:first|1st) (?:training )?epoch", re.I)


def _number(word: str) -> float | None:
    """A count written as digits ("2,000", "20k", "6000") or a word ("fifth", "a dozen")."""
    w = word.lower().strip()
    if w in _WORD_NUMBERS:
        return float(_WORD_NUMBERS[w])
    scale = 1000.0 if w.endswith("k") else 1.0
    try:
        return float(w.rstrip("k").replace(",", "")) * scale
    except ValueError:
        return None


# -- the gate -----------------------------------------------------------------------------------


def _description(ctx: Context) -> str | None:
    """The user's text when it is a description: no exception line, frames or kernel assertion in it.

    Those are read by the message rules; a described symptom never overrides them.
    """
    failure = ctx.failure
    if failure.exc_type or failure.frames or failure.cuda_asserts:
        return None
    text = failure.text or ctx.text
    return text if text.strip() else None


def _first(pattern: LazyPattern, text: str) -> int | None:
    m = pattern.search(text)
    return m.start() if m else None


def _nan_position(text: str) -> int | None:
    m = _NAN.search(text)
    if m and _TRAINING.search(text):
        return m.start()
    d = _DIVERGE.search(text) or (_FP16.search(text) and _ZERO_LOSS.search(text))
    return d.start() if d else None


def _memory_position(text: str) -> int | None:
    growth = _first(_GROWTH, text)
    if growth is not None and _memory_side(text) is None and not _DROPS.search(text):
        growth = None  # neither GPU nor host memory named: the memory rule would not answer
    spots = [p for p in (growth, _first(_KILLED, text)) if p is not None]
    return min(spots) if spots else None


def _hang_position(text: str) -> int | None:
    m = _HANG.search(text)
    return m.start() if m and (_WORKERS.search(text) or _DISTRIBUTED.search(text) or _UNEVEN.search(text)) else None


def _headline(text: str) -> str | None:
    """The symptom family the text names first (a title usually names the main complaint)."""
    spots = {name: pos(text) for name, pos in (("nan", _nan_position), ("memory", _memory_position), ("hang", _hang_position))}
    named = {k: v for k, v in spots.items() if v is not None}
    return min(named, key=lambda k: named[k]) if named else None


def _quote(m: re.Match[str] | None, text: str, width: int = 70) -> str:
    """The user's words around a match, for the evidence list."""
    if not m:
        return ""
    start = max(0, text.rfind("\n", 0, m.start()) + 1, m.start() - width)
    end = text.find("\n", m.end())
    end = end if end != -1 else len(text)
    if end - m.end() > width:  # cut at a word boundary, not inside a word or number
        cut = text.rfind(" ", m.end(), m.end() + width)
        end = cut if cut != -1 else m.end() + width
    return " ".join(text[start:end].split())


# -- NaN / Inf ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Timing:
    """When the NaN appeared, as far as the words say."""

    kind: str  # "start" | "later" | "unknown"
    unit: str | None = None  # "steps" | "epochs"
    count: float | None = None
    words: str = ""


def _nan_timing(text: str) -> _Timing:
    """From the first step, after N steps/epochs, or not said."""
    counted: list[tuple[str, float, str]] = []
    for pattern in (_COUNT_BEFORE_UNIT, _UNIT_BEFORE_COUNT):
        for m in pattern.finditer(text):
            value = _number(m.group("num"))
            unit = _UNITS.get(m.group("unit").lower().rstrip("s") if m.group("unit").lower() not in _UNITS else m.group("unit").lower())
            if value is not None and unit:
                counted.append((unit, value, m.group(0)))
    start = _FROM_START.search(text)
    # A count of more than a couple of steps (or any whole epoch) means the loss was finite for a while.
    later = [(u, v, w) for u, v, w in counted if (u == "epochs" and v >= 1 and not re.search(r"(?:in|during|at|on) (?:the )?(?:first|1st)", w, re.I)) or (u == "steps" and v > 2)]
    if later and not (start and start.start() < text.find(later[0][2])):
        unit, value, words = later[0]
        return _Timing("later", unit, value, words)
    if start:
        return _Timing("start", words=start.group(0))
    vague = _LATER.search(text)
    if vague:
        return _Timing("later", words=vague.group(0))
    logged = _timing_from_log(text)
    if logged is not None:
        return logged
    first_epoch = _FIRST_EPOCH.search(text)
    return _Timing("unknown", words=first_epoch.group(0) if first_epoch else "")


# A progress line that names its position: "step: 100 total_loss: nan", "Epoch 3, Iter 0: Loss:nan", "Iter 4200 | loss 2.31".
# A progress line that names its position: "step: 100 total_loss: nan", "Epoch 3, Iter 0: Loss:nan", a tqdm bar "92679/5900000 [19:15<...".
_LOG_POSITION = lazy_re(r"\b(?P<unit>epoch|iter(?:ation)?|step|batch)\b\W{0,3}(?P<num>\d+)|(?<!\d)(?P<bar>\d+)/\d+ \[\d", re.I)


def _timing_from_log(text: str) -> _Timing | None:
    """When pasted log lines show it: finite losses at earlier positions, then the first line with NaN.

    Only lines that carry a position (step/iter/epoch/batch N, a progress bar) count; the first NaN
    line gives "later" with its position when a finite loss came before or the position is past the
    first couple of steps, else "start".
    """
    seen_finite = False
    for line in text.splitlines():
        pos = _LOG_POSITION.search(line)
        if not pos:
            continue
        if _NAN.search(line):
            unit = "epochs" if (pos.group("unit") or "").lower() == "epoch" else "steps"
            count = float(pos.group("num") or pos.group("bar"))
            if seen_finite or (unit == "epochs" and count >= 1) or count > 2:
                return _Timing("later", unit, count, line.strip()[:80])
            return _Timing("start", words=line.strip()[:80])
        if re.search(r"loss\w{0,40}\W{0,3}-?\d", line, re.I):
            seen_finite = True
    return None


# A backward function named beside NaN ("SoftmaxBackward NaN", anomaly mode's "Error detected in XBackward"): that is anomaly
# detection's report, which autograd.nan_inf reads (with its half-precision story); the onset-based reading does not fit it.
_BACKWARD_NODE_NAN = lazy_re(r"\b[A-Z][A-Za-z0-9]*Backward\d*\b[^\n]{0,60}(?i:\bnan\b)|(?i:\bnan\b)[^\n]{0,60}\b[A-Z][A-Za-z0-9]*Backward\d*\b"
                             r"|Error detected in [A-Z][A-Za-z0-9]*Backward\d*")
_NAN_DOCS = ("nan-loss-during-training", "nan-inf-anomaly", "exploding-gradients", "anomaly-detection")


@rule(
    "symptoms.nan_loss",
    category="nan_inf",
    docs=_NAN_DOCS,
    reads=("text",),
    priority=51,  # before autograd.nan_inf (52): its generic branch would take prose that names NaN; this rule only reads text with no exception line
    outcomes=("symptoms.nan_from_start", "symptoms.nan_after_steps", "symptoms.nan_unknown_onset"),
    examples=(
        Example("corpus/symptoms/nan_after_200_epochs.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/nan_after_2000_iterations.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/nan_after_6000_iters_float16.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/nan_after_certain_epochs.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/nan_fifth_epoch.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/nan_turns_after_iterations.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/nan_10th_epoch_title.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/nan_dozen_rounds.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/nan_after_epoch_3_comment.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/weights_nan_after_training_times.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/nan_sudden_drop.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/nan_middle_of_training_title.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/nan_chinese_suddenly.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/nan_progress_bar_chinese.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/nan_appeared_15th_epoch.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/nan_output_after_several_epochs.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/nan_around_50000epoch.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/nan_about_5000_iterations.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/nan_immediately_first_batch.txt", "symptoms.nan_from_start"),
        Example("corpus/symptoms/nan_output_after_1st_batch.txt", "symptoms.nan_from_start"),
        Example("corpus/symptoms/nan_after_1st_iteration.txt", "symptoms.nan_from_start"),
        Example("corpus/symptoms/nan_from_second_iteration.txt", "symptoms.nan_from_start"),
        Example("corpus/symptoms/nan_each_iteration_comment.txt", "symptoms.nan_from_start"),
        Example("corpus/symptoms/nan_batch1_sample2.txt", "symptoms.nan_from_start"),
        Example("corpus/symptoms/nan_first_ten_batch_fp16.txt", "symptoms.nan_from_start"),
        Example("corpus/symptoms/nan_first_epoch_unspecified.txt", "symptoms.nan_unknown_onset"),
        Example("corpus/symptoms/nan_in_weights_during_training.txt", "symptoms.nan_unknown_onset"),
        Example("corpus/symptoms/nan_fp16_precision.txt", "symptoms.nan_unknown_onset"),
        Example("corpus/symptoms/nan_fp16_tabular_fastai.txt", "symptoms.nan_unknown_onset"),
        Example("corpus/symptoms/nan_can_go_to_nan.txt", "symptoms.nan_unknown_onset"),
        Example("corpus/symptoms/nan_got_nan_rarely_conv1d.txt", "symptoms.nan_unknown_onset"),
        Example("corpus/symptoms/nan_backprop_results.txt", "symptoms.nan_unknown_onset"),
        Example("corpus/symptoms/nan_fixed_number_of_times.txt", "symptoms.nan_unknown_onset"),
        Example("realworld/dev/irn-loss-diverges-without-grad-clipping", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/loss_exploded_suddenly_epochs.txt", "symptoms.nan_after_steps"),
        Example("corpus/symptoms/loss_divergence_title_3k_steps.txt", "symptoms.nan_after_steps"),
    ),
)
def nan_loss(ctx: Context) -> RuleHit | None:
    """A loss, output or weights described as becoming NaN/Inf, with the cause chosen by when it starts."""
    text = _description(ctx)
    if text is None or _headline(text) != "nan" or _BACKWARD_NODE_NAN.search(text):
        return None
    timing = _nan_timing(text)
    fp16 = _FP16.search(text)
    bf16 = _BF16.search(text)
    lr_tried = _LR_TRIED.search(text)
    diverged = None if _NAN.search(text) else (_DIVERGE.search(text) or (_ZERO_LOSS.search(text) if fp16 else None))
    said = _quote(_NAN.search(text) or diverged, text)
    found = [Fact("description", f"your words: \"{said}\"")]
    numbers: dict[str, float] = {}
    flags: set[str] = set()
    if timing.count is not None and timing.unit:
        numbers[timing.unit] = timing.count
    if timing.words:
        found.append(Fact("timing", f"when: \"{timing.words.strip()}\""))
    if fp16:
        flags.add("fp16")
        found.append(Fact("precision", f"half precision mentioned (\"{fp16.group(0)}\")"))
    if bf16:
        flags.add("bf16")
    if lr_tried:
        flags.add("learning_rate_already_lowered")

    when = ""
    if timing.count is not None:
        when = f"after about {timing.count:g} {timing.unit}" if timing.count != 1 else f"after the first {(timing.unit or '').rstrip('s')}"
    half = (" The run uses half precision: fp16 overflows above 65504 and underflows below about 6e-5, so an activation, a loss term or a "
            "gradient that fp32 holds easily becomes Inf and then NaN." if fp16 else "")
    if timing.kind == "start":
        flags.add("from_first_step")
        outcome = "symptoms.nan_from_start"
        title = "Loss is NaN from the first steps"
        cause = ("The values are NaN from the very first steps (you wrote \"" + timing.words.strip() + "\"), before training could have "
                 "diverged. That points at something non-finite or undefined from the start rather than at the optimisation: NaN/Inf or "
                 "extreme values already in the inputs or labels (missing values, a division by zero in preprocessing, unnormalised data, "
                 "targets outside what the loss accepts), an operation at its singular point in the model or loss (log of 0, 0/0, sqrt at 0 "
                 "in backward, an empty mean), or an initialisation/custom layer that already produces Inf. When the first step is finite "
                 "and the second is NaN, the first update itself blew up: the learning rate is far too large for this model." + half)
        fixes = [
            remedy("nan-loss-during-training#check-first-batch"),
            remedy("anomaly-detection#find-first-nan-op"),
            remedy("nan-loss-during-training#guard-log-div-sqrt"),
            remedy("exploding-gradients#try-much-smaller-lr"),
        ]
    elif timing.kind == "later":
        flags.add("after_training_steps")
        outcome = "symptoms.nan_after_steps"
        title = "Loss diverges after training for a while" if diverged else "Loss becomes NaN after training for a while"
        cause = (("The loss trains normally and then diverges" if diverged else "Training runs with finite values and then turns NaN")
                 + (f" ({when})" if when else f" (you wrote \"{timing.words.strip()}\")") + ". "
                 "A run that learns normally and then blows up has usually diverged: gradients grow step after step until they overflow "
                 "(a learning rate too high for this point of the schedule, no warmup, no gradient clipping), or a rare batch with extreme or "
                 "degenerate values (an empty target, a zero-length sequence, a count of 0 in a division) arrives only later. Logging the "
                 "loss and the gradient norm every step tells the two apart: a norm that climbs for many steps is divergence, a sudden jump "
                 "at one batch is bad data." + half
                 + (" Lowering the learning rate, as you tried, often only delays a divergence; clipping, warmup or a numerics fix addresses it." if lr_tried else ""))
        fixes = []
        if fp16:
            fixes.append(remedy("nan-loss-during-training#gradscaler-or-bf16"))
        fixes += [
            remedy("exploding-gradients#clip-and-log-grad-norm"),
            remedy("exploding-gradients#lower-lr-or-warmup"),
            remedy("nan-loss-during-training#stop-at-first-nonfinite-keep-batch"),
            remedy("nan-loss-during-training#guard-log-div-sqrt-eps"),
        ]
    else:
        outcome = "symptoms.nan_unknown_onset"
        title = "Loss or weights become NaN"
        cause = ("The values become NaN, but the text does not say when it starts"
                 + (f" (\"{timing.words.strip()}\" can still mean after hundreds of steps)" if timing.words else "") + ", and that decides the cause. "
                 "NaN from the very first step means something is undefined from the start: bad values in inputs or labels, log/division/sqrt "
                 "at 0, an overflow at initialisation. NaN after many normal steps means the run diverged (learning rate, exploding gradients) "
                 "or met a rare bad batch." + half)
        fixes = []
        if fp16:
            fixes.append(remedy("nan-loss-during-training#check-half-precision"))
        fixes += [
            remedy("nan-loss-during-training#say-when-nan-appears"),
            remedy("nan-loss-during-training#check-inputs-and-labels"),
            remedy("anomaly-detection#locate-first-nan-anomaly"),
            remedy("exploding-gradients#stabilise-the-run"),
        ]
        if not fp16:
            fixes.append(remedy("nan-loss-during-training#rule-out-mixed-precision"))
    log_call = _LOG_CALL.search(text)
    if log_call:
        found.append(Fact("operation", f"a logarithm is named: \"{log_call.group(0)}\""))
        fixes.insert(0, remedy("nan-loss-during-training#log-input-strictly-positive"))
    if timing.kind == "start" and fp16:
        fixes.insert(1, remedy("nan-loss-during-training#rule-out-fp16-overflow"))
    if _KNOWN_TORCH_BUG.search(text):
        found.append(Fact("known_bug", "the text points to a known PyTorch issue"))
        cause += (" You point to a known PyTorch issue: when an operation gives NaN on finite inputs while an equivalent formulation does "
                  "not, the kernel of the installed release is at fault and a later release fixes it.")
        fixes.insert(0, remedy("nan-loss-during-training#upgrade-after-kernel-bug"))
    if fp16 and not _NAN.search(text) and not _DIVERGE.search(text) and _ZERO_LOSS.search(text):
        # No NaN named: the loss is reported as exactly 0 in a float16 run, the half-precision overflow story told by its result.
        title = "Loss collapses to 0 in a float16 run"
        cause = ("The loss is reported as exactly 0 while training in float16. A real loss is almost never exactly zero; in half precision "
                 "activations or gradients that exceed float16's range become inf/NaN, the scaler skips those steps or the logged value "
                 "collapses, and the model stops learning. Models pretrained in bfloat16 are the usual case: their activations do not fit "
                 "float16.")
        first = [remedy("nan-loss-during-training#gradscaler-or-bf16"), remedy("nan-loss-during-training#check-half-precision")]
        fixes = first + [f for f in fixes if f.title not in {g.title for g in first}]
    facts = Facts(numbers=numbers, dtypes=("float16",) if fp16 else (), flags=frozenset(flags))
    return hit(outcome, "nan_inf", title, cause, fixes, _NAN_DOCS, found, 0.7 if timing.kind != "unknown" else 0.62,
               "nan loss during training", facts=facts)


# -- memory ------------------------------------------------------------------------------------


def _memory_side(text: str) -> str | None:
    """'gpu' or 'cpu' from the words ("RAM, not GPU memory" is the CPU), None when nothing says."""
    cleaned = _NOT_GPU.sub(" ", text)
    gpu = len(_GPU_WORDS.findall(cleaned))
    cpu = len(_CPU_WORDS.findall(cleaned))
    if re.search(r"\bram\b|cpu memory|cpu ram|host memory|system memory|main memory", cleaned, re.I) and not re.search(r"gpu ram|video ram|vram", cleaned, re.I):
        return "cpu"
    if gpu > cpu:
        return "gpu"
    if cpu > gpu:
        return "cpu"
    return "gpu" if _OOM.search(text) and not _KILLED.search(text) else None


_GPU_DOCS = ("memory-growth-training-loop", "memory-profiling", "cuda-oom")
# Gradients taken with respect to the inputs (gradient penalty / normalisation, autograd.grad with create_graph).
_INPUT_GRADS = lazy_re(r"gradient (?:penalty|normali[sz]ation)|\bGP\b loss|create_graph\s*=\s*True|autograd\.grad\(|requires_grad_?\(\s*True\s*\)", re.I)
_CPU_DOCS = ("cpu-oom", "memory-growth-training-loop", "memory-profiling")


@rule(
    "symptoms.memory",
    category="cuda_oom",
    also=("cpu_oom",),
    docs=_GPU_DOCS,
    reads=("any",),
    priority=FALLBACK,  # a description is read last, after the launcher's and crash lines
    outcomes=("symptoms.gpu_memory_growth", "symptoms.ram_growth", "symptoms.process_killed"),
    examples=(
        Example("corpus/symptoms/cuda_mem_gradually_increase.txt", "symptoms.gpu_memory_growth"),
        Example("corpus/symptoms/gpu_mem_keeps_increasing_comment.txt", "symptoms.gpu_memory_growth"),
        Example("corpus/symptoms/cuda_mem_increase_over_time_killed.txt", "symptoms.gpu_memory_growth"),
        Example("corpus/symptoms/gpu_memory_iterative_training.txt", "symptoms.gpu_memory_growth"),
        Example("corpus/symptoms/video_memory_each_iteration.txt", "symptoms.gpu_memory_growth"),
        Example("corpus/symptoms/graphics_memory_until_oom.txt", "symptoms.gpu_memory_growth"),
        Example("corpus/symptoms/imagenet_gpu_memory_epochs.txt", "symptoms.gpu_memory_growth"),
        Example("corpus/symptoms/vram_steadily_increases.txt", "symptoms.gpu_memory_growth"),
        Example("corpus/symptoms/ram_consistently_increase_per_epoch.txt", "symptoms.ram_growth"),
        Example("corpus/symptoms/cpu_ram_mini_imagenet_crash.txt", "symptoms.ram_growth"),
        Example("corpus/symptoms/ram_8k_iterations_os_kills.txt", "symptoms.ram_growth"),
        Example("corpus/symptoms/cpu_mem_grows_num_workers.txt", "symptoms.ram_growth"),
        Example("corpus/symptoms/ram_accumulated_each_epoch.txt", "symptoms.ram_growth"),
        Example("corpus/symptoms/memory_increases_drops_after_epoch.txt", "symptoms.ram_growth"),
        Example("corpus/symptoms/ram_consumed_killed_14th_epoch.txt", "symptoms.ram_growth"),
        Example("corpus/symptoms/ram_per_iteration_until_oom.txt", "symptoms.ram_growth"),
        Example("corpus/symptoms/killed_no_error_patchcore.txt", "symptoms.process_killed"),
        Example("corpus/symptoms/killed_always_hmn.txt", "symptoms.process_killed"),
        Example("corpus/symptoms/killed_by_system_dreamer.txt", "symptoms.process_killed"),
        Example("corpus/symptoms/killed_suddenly_frequently.txt", "symptoms.process_killed"),
        Example("corpus/symptoms/killed_abruptly_message.txt", "symptoms.process_killed"),
        Example("corpus/symptoms/killed_prematurely_idle.txt", "symptoms.process_killed"),
    ),
)
def memory(ctx: Context) -> RuleHit | None:
    """Memory described as growing over steps, or a process killed without an error.

    OOM descriptions that name CUDA/GPU out of memory (batch size 1, growth until OOM) and host RAM growth in the
    wordings memory.py knows are answered there first; this takes the remaining descriptions.
    """
    text = _description(ctx)
    if text is None or _headline(text) != "memory":
        return None
    growth = _GROWTH.search(text)
    oom = _OOM.search(text)
    killed = _KILLED.search(text)
    side = _memory_side(text)
    workers = _WORKERS.search(text)
    in_eval = _EVAL.search(text)
    found: list[Fact] = []
    numbers: dict[str, float] = {}
    flags: set[str] = set()

    if growth is None and killed is not None:
        found.append(Fact("description", f"your words: \"{_quote(killed, text)}\""))
        cause = ("The process was killed from outside without a Python error. On Linux that is almost always the kernel's OOM killer: host RAM "
                 "ran out, and it ends the largest process with SIGKILL (exit status 137). Typical sources are a dataset or replay buffer "
                 "held in RAM, DataLoader workers that each copy Python objects, or memory that grows every step.")
        fixes = [
            remedy("cpu-oom#confirm-oom-killer-described"),
            remedy("cpu-oom#measure-memory-per-step"),
            remedy("cpu-oom#keep-data-out-of-ram"),
        ]
        return hit("symptoms.process_killed", "cpu_oom", "Process killed without an error (host out of memory)", cause, fixes, _CPU_DOCS, found, 0.62,
                   "process killed oom killer ram", facts=Facts(flags=frozenset({"killed_without_error"})))

    drops = _DROPS.search(text)
    if side is None and drops:
        side = "cpu"  # grows within an epoch, falls back when the loader restarts: the DataLoader workers' host memory
    if growth is None or side is None:
        return None
    found.append(Fact("description", f"your words: \"{_quote(growth, text)}\""))
    span = re.search(r"(?:after|around|about|at)\s+(?:training\s+)?(\d[\d,]*k?)\s*(epoch(?:e?s)?|iterations?|iters?|steps?)", text, re.I)
    if span:
        value = _number(span.group(1))
        if value is not None:
            numbers["epochs" if span.group(2).lower().startswith("epoch") else "steps"] = value
    if killed or oom:
        flags.add("ended_in_oom")
    if side == "gpu":
        flags.add("gpu_memory")
        cause = ("GPU memory use keeps rising over iterations or epochs instead of levelling off after the first steps"
                 + (", until the run fails with out of memory" if (killed or oom) else "") + ". Steady growth means something keeps references "
                 "from one step to the next: a tensor that still carries its autograd graph is accumulated (`total_loss += loss`, losses, "
                 "outputs or predictions appended to a list without .item()/.detach()), a cache or buffer that grows, backward with "
                 "retain_graph=True, or evaluation run with autograd enabled."
                 + (" You see it during testing/validation: run that loop under torch.no_grad() and move collected outputs to the CPU." if in_eval else "")
                 + " Note that nvidia-smi shows what the caching allocator has reserved, which can also creep up with varying input sizes "
                 "without any leak; torch.cuda.memory_allocated() printed every step is the measure that proves a leak.")
        fixes = [
            remedy("memory-profiling#measure-allocated-per-step"),
            remedy("memory-growth-training-loop#store-numbers-not-graphs"),
            remedy("memory-growth-training-loop#evaluate-without-autograd"),
            remedy("memory-profiling#find-what-holds-memory"),
        ]
        input_grads = _INPUT_GRADS.search(text)
        if input_grads:
            # Gradient penalties / normalisation differentiate w.r.t. the inputs with create_graph=True: those graphs must not outlive the step.
            found.append(Fact("description", f"gradients with respect to inputs are involved: \"{input_grads.group(0)}\""))
            fixes.insert(1, remedy("memory-growth-training-loop#release-input-gradient-graphs"))
        return hit("symptoms.gpu_memory_growth", "cuda_oom", "GPU memory grows during training", cause, fixes, _GPU_DOCS, found, 0.66,
                   "gpu memory leak grows every iteration", facts=Facts(numbers=numbers, flags=frozenset(flags)))

    flags.add("host_memory")
    if drops:
        flags.add("drops_each_epoch")
    if workers:
        flags.add("dataloader_workers")
    cause = ("Host RAM keeps growing during training" + (" until the system kills the process" if killed or oom else "") + ". "
             + ("It grows within an epoch and falls back when the DataLoader is recreated, which is the signature of DataLoader workers: each "
                "forked worker gradually copies the dataset's Python objects as it reads them (reference counts dirty the shared pages), so "
                "memory rises with every worker until the epoch ends. " if drops else
                "DataLoader workers are involved: each forked worker gradually copies the dataset's Python lists/dicts as it reads them "
                "(reference counts dirty the shared pages), so memory rises with the number of workers and the size of those objects. " if workers else
                "Something keeps data from every step: a dataset that caches decoded samples, a replay buffer or history that only grows, "
                "metrics or losses kept as tensors (with their graph), or DataLoader workers that copy the dataset's Python objects. ")
             + "Measuring resident memory per step with num_workers=0 and with your setting tells which it is.")
    fixes = [
        remedy("cpu-oom#measure-rss-per-step"),
        remedy("cpu-oom#copy-friendly-dataset"),
        remedy("memory-growth-training-loop#no-per-step-objects"),
        remedy("cpu-oom#lower-dataloader-pressure"),
        remedy("cpu-oom#check-kernel-log"),
    ]
    return hit("symptoms.ram_growth", "cpu_oom", "Host RAM grows during training", cause, fixes, _CPU_DOCS, found, 0.66,
               "cpu ram memory leak grows dataloader workers", facts=Facts(numbers=numbers, flags=frozenset(flags)))


# -- hangs -------------------------------------------------------------------------------------

_LOADER_DOCS = ("dataloader-hang", "dataloader-worker-crash", "dataloader-shared-memory")
_DIST_DOCS = ("distributed-hang", "nccl-timeout", "process-group-init")

# A described hang around a barrier the user added ...
_BARRIER_CALL = lazy_re(r"\bbarrier\(\)|\bdist(?:ributed)?\.barrier\b", re.I)
# ... while validation/evaluation runs on one rank only ("validation on just one GPU", "evaluate only on rank 0", "if gpu == 0").
_RANK_ONLY_EVAL = lazy_re(
    r"\b(?:validat\w*|evaluat\w*|eval|test(?:ing)?|inference)\b[^.\n]{0,40}\b(?:(?:just|only) (?:on )?(?:one|a single|the first|the main) "
    r"(?:gpu|rank|process|device)|(?:just|only) (?:on )?(?:rank|gpu|local_rank) ?(?:0|zero)|on (?:rank|gpu) ?0 only)"
    r"|\bif (?:self\.)?(?:gpu|rank|local_rank|args\.(?:gpu|rank|local_rank)) ?== ?0\b[^.\n]{0,60}\b(?:validat\w*|evaluat\w*|eval|test)\b",
    re.I,
)


def _rank_only_eval_hang(said: str, found: list[Fact], numbers: dict[str, float]) -> RuleHit:
    """A barrier that hangs while one rank validates: that rank's forward through the DDP wrapper waits for the other ranks."""
    found = [*found, Fact("description", f"your words: \"{said[:120]}\" with a barrier for the other ranks")]
    cause = ("The other ranks wait in the barrier while one rank runs validation, and that rank never finishes: it runs the DDP-wrapped "
             "model, whose forward itself starts collectives (the buffer broadcast from rank 0, SyncBatchNorm's all-reduce, unused-parameter "
             "bookkeeping) that need every rank to join. The ranks parked in the barrier never join them, so validation and barrier wait "
             "for each other for ever (until the NCCL watchdog timeout, if one is set).")
    fixes = [
        remedy("nccl-timeout#no-collectives-in-rank-code"),
        remedy("barrier-hangs-timeouts#unconditional-barrier"),
        remedy("nccl-timeout#keep-ranks-in-step"),
        remedy("distributed-hang#debug-output-hang"),
    ]
    return hit("symptoms.distributed_hang", "ddp_error", "Barrier hangs while one rank validates through the DDP model", cause, fixes,
               ("nccl-timeout", "barrier-hangs-timeouts", "distributed-hang"), found, 0.66, "barrier hang rank 0 validation DDP forward collectives",
               facts=Facts(numbers=numbers, flags=frozenset({"hang", "distributed_train"})))


# Data split unevenly between training processes ("uneven data across the workers", "different number of batches" per rank/GPU).
_UNEVEN = lazy_re(
    r"uneven (?:data|inputs?|number of batches|batches|batch counts?|split)|(?:different|unequal|not the same) (?:total )?(?:number|amount) of (?:training )?(?:batches|steps|iterations|samples)",
    re.I,
)


def _hang_kind(text: str) -> str | None:
    """'loader' when the hang is tied to DataLoader workers, 'init'/'train' for distributed runs."""
    if _UNEVEN.search(text):
        return "train"  # workers/ranks with different amounts of data: the longer ones wait in a collective
    loader = _WORKER_CONDITION.search(text) or (_WORKERS.search(text) and not _DISTRIBUTED.search(text))
    if loader:
        return "loader"
    if _DISTRIBUTED.search(text):
        return "init" if _INIT_PHASE.search(text) else "train"
    return None


# torch.distributed's own INFO line while init_process_group waits for the other ranks (releases 1.8-2.0).
_BARRIER = lazy_re(
    r"Waiting in store based barrier to initialize process group for rank: (?P<rank>\d+), key: \S+ "
    r"\(world_size=(?P<world>\d+), worker_count=(?P<count>\d+), timeout=(?P<timeout>[\d:]+)\)"
)


def _barrier_wait(text: str, m: re.Match[str]) -> RuleHit:
    """init_process_group waiting in its start-up barrier: the counts say whether ranks are missing or extra."""
    world, count = int(m.group("world")), int(m.group("count"))
    found = [Fact("log", m.group(0)[:200]), Fact("ranks", f"{count} of world_size={world} processes have reached the start-up barrier")]
    numbers = {"world_size": float(world), "worker_count": float(count), "rank": float(m.group("rank"))}
    if count > world:
        cause = (f"init_process_group is stuck in its start-up barrier, and more processes ({count}) than world_size ({world}) have checked in "
                 "with the same store. Two runs share one rendezvous: another job, or processes left over from an earlier run, use the same "
                 "MASTER_ADDR:MASTER_PORT, or world_size is set lower than the number of processes actually launched.")
        first = remedy("process-group-init#own-rendezvous-clear-stale")
    else:
        cause = (f"init_process_group is stuck in its start-up barrier: only {count} of the {world} expected processes have arrived, so the ones "
                 f"waiting will block until the timeout ({m.group('timeout')}). {world - count} rank(s) never started or died before reaching "
                 "init_process_group (an exception or OOM on that rank, a launcher that started fewer processes, a node that cannot reach "
                 "MASTER_ADDR), or world_size is larger than the number of processes launched.")
        first = remedy("process-group-init#find-rank-that-did-not-arrive")
    fixes = [
        first,
        remedy("distributed-hang#debug-output-at-startup"),
        remedy("process-group-init#short-startup-timeout-debugging"),
    ]
    return hit("symptoms.init_barrier_count", "ddp_error", "init_process_group waits for ranks that do not arrive", cause, fixes,
               ("process-group-init", "distributed-hang"), found, 0.74, "init_process_group store based barrier world_size worker_count",
               facts=Facts(numbers=numbers, flags=frozenset({"hang", "distributed_init"})))


# Where a process interrupted with Ctrl+C was waiting: (file suffix, functions) -> kind of hang.
_WAITS = (
    ("torch/utils/data/dataloader.py", {"_try_get_data", "_get_data", "_try_get_batch", "_get_batch", "_next_data", "__next__"}, "loader"),
    ("torch/distributed/distributed_c10d.py", {"init_process_group", "_store_based_barrier", "_new_process_group_helper"}, "init"),
    ("torch/distributed/rendezvous.py", None, "init"),
    ("torch/nn/parallel/distributed.py", {"__init__", "_sync_params_and_buffers", "_verify_param_shape_across_processes"}, "init"),
    ("torch/distributed/distributed_c10d.py", {"all_reduce", "barrier", "broadcast", "all_gather", "reduce", "wait", "all_gather_object", "broadcast_object_list"}, "train"),
)


def _stuck_in(ctx: Context) -> tuple[str, str] | None:
    """(kind, where) when the text is the stack of a process interrupted while it waited (a hang the user stopped).

    Only a traceback with no final error (cut off at the ^C) or one ending in KeyboardInterrupt counts: any
    real exception is the message rules' business.
    """
    failure = ctx.failure
    if failure.exc_type not in (None, "KeyboardInterrupt") or not failure.frames:
        return None
    if failure.exc_type is None and "^C" not in (failure.text or "") and not re.search(r"KeyboardInterrupt|interrupt|Ctrl\+?C", failure.text or "", re.I):
        return None
    for fr in reversed(failure.frames):
        path = fr.file.replace("\\", "/")
        for suffix, functions, kind in _WAITS:
            if path.endswith(suffix) and (functions is None or fr.function in functions):
                return kind, f"{suffix.rsplit('/', 1)[-1]} ({fr.function})"
    return None


@rule(
    "symptoms.hang",
    category="dataloader_error",
    also=("ddp_error", "nccl_error"),
    docs=_LOADER_DOCS,
    reads=("any",),
    priority=FALLBACK + 1,
    outcomes=("symptoms.dataloader_hang", "symptoms.distributed_init_hang", "symptoms.init_barrier_count", "symptoms.distributed_hang"),
    examples=(
        Example("corpus/symptoms/dataloader_hang_after_1_epoch_workers.txt", "symptoms.dataloader_hang"),
        Example("corpus/symptoms/dataloader_stuck_epoch_1.txt", "symptoms.dataloader_hang"),
        Example("corpus/symptoms/dataloader_workers_freeze_randomly.txt", "symptoms.dataloader_hang"),
        Example("corpus/symptoms/dataloader_freeze_after_model_cuda.txt", "symptoms.dataloader_hang"),
        Example("corpus/symptoms/dataloader_cpu_only_freezes_comment.txt", "symptoms.dataloader_hang"),
        Example("corpus/symptoms/dataloader_jetson_halts_workers.txt", "symptoms.dataloader_hang"),
        Example("corpus/symptoms/ddp_workers_hang_before_first_epoch.txt", "symptoms.dataloader_hang"),
        Example("corpus/symptoms/dataloader_locks_up_second_epoch.txt", "symptoms.dataloader_hang"),
        Example("corpus/symptoms/dataloader_stuck_num_workers_danet.txt", "symptoms.dataloader_hang"),
        Example("corpus/symptoms/dataloader_suspend_ctrl_c_trace.txt", "symptoms.dataloader_hang"),
        Example("corpus/symptoms/dataloader_stop_running_interrupt_trace.txt", "symptoms.dataloader_hang"),
        Example("corpus/symptoms/ddp_init_process_group_hangs_trainer.txt", "symptoms.distributed_init_hang"),
        Example("corpus/symptoms/ddp_stuck_init_step_simsiam.txt", "symptoms.distributed_init_hang"),
        Example("corpus/symptoms/ddp_program_stuck_no_output.txt", "symptoms.distributed_init_hang"),
        Example("corpus/symptoms/ddp_stuck_init_launch.txt", "symptoms.distributed_init_hang"),
        Example("corpus/symptoms/ddp_hpc_init_hangs_hours.txt", "symptoms.distributed_init_hang"),
        Example("corpus/symptoms/ddp_stuck_initalizing_distributed.txt", "symptoms.distributed_init_hang"),
        Example("corpus/symptoms/ddp_stuck_at_initialisation_log.txt", "symptoms.distributed_init_hang"),
        Example("corpus/symptoms/ddp_stuck_initializing_deepspeed.txt", "symptoms.distributed_init_hang"),
        Example("corpus/symptoms/store_barrier_worker_count_8_of_4.txt", "symptoms.init_barrier_count"),
        Example("corpus/symptoms/store_barrier_stuck_at_start_7_of_8.txt", "symptoms.init_barrier_count"),
        Example("corpus/symptoms/store_barrier_1_of_8_lightning.txt", "symptoms.init_barrier_count"),
        Example("corpus/symptoms/store_barrier_info_root_7_of_8.txt", "symptoms.init_barrier_count"),
        Example("corpus/symptoms/dist_train_hangs_after_epochs.txt", "symptoms.distributed_hang"),
        Example("corpus/symptoms/multinode_hangs_197_steps.txt", "symptoms.distributed_hang"),
        Example("corpus/symptoms/multigpu_hung_after_batches.txt", "symptoms.distributed_hang"),
        Example("corpus/symptoms/fairseq_distributed_hanging_no_output.txt", "symptoms.distributed_hang"),
        Example("corpus/symptoms/ranks_blocked_all_the_time.txt", "symptoms.distributed_hang"),
        Example("corpus/symptoms/ddp_8cards_stuck_epoch.txt", "symptoms.distributed_hang"),
        Example("realworld/dev/bigdl-estimator-hang-uneven-batches-join", "symptoms.distributed_hang"),
        Example("corpus/symptoms/ddp_uneven_batches_gpus_hang.txt", "symptoms.distributed_hang"),
        Example("corpus/symptoms/deepspeed_processes_different_number_of_batches.txt", "symptoms.distributed_hang"),
    ),
)
def hang(ctx: Context) -> RuleHit | None:
    """Training described as hanging/freezing (or the stack of a hang interrupted with Ctrl+C): with DataLoader workers,
    at distributed start-up, or mid-run on several ranks."""
    text = _description(ctx)
    barrier = _BARRIER.search(text) if text else None
    if barrier:
        return _barrier_wait(text or "", barrier)
    stuck = _stuck_in(ctx)
    if stuck is not None:
        text = ctx.failure.text or ctx.text
        kind: str | None = stuck[0]
    elif text is None or _headline(text) != "hang":
        return None
    else:
        kind = _hang_kind(text)
    if kind is None:
        return None
    said = _HANG.search(text)
    found = [Fact("description", f"your words: \"{_quote(said, text)}\"")] if said else []
    if stuck is not None:
        found.append(Fact("stack", f"interrupted (Ctrl+C) while waiting in {stuck[1]}: the process was blocked there, not failing"))
    numbers: dict[str, float] = {}
    m = re.search(r"(?:after|around|at)\s+(?:completion of\s+)?(?:about |around |~)?(\d[\d,]*k?)(?:\s*-\s*\d+)?\s*(epochs?|steps?|iterations?|iters?|batch(?:es)?)", text, re.I)
    if m:
        value = _number(m.group(1))
        if value is not None:
            numbers["epochs" if m.group(2).lower().startswith("epoch") else "steps"] = value
    workers = [int(w) for w in re.findall(r"num_workers?\s*=\s*(\d+)", text, re.I) if int(w) > 0]
    if workers:
        numbers["num_workers"] = float(workers[0])

    if kind == "loader":
        flags = {"hang", "dataloader_workers"}
        cuda_first = re.search(r"model\.cuda\(\)|\.to\(['\"]?cuda|cuda", text, re.I)
        how = ("the stack you interrupted shows the main process waiting inside the DataLoader for the next batch" if stuck is not None else
               "the words tie it to DataLoader workers (it works with num_workers=0 or only hangs with workers)")
        cause = (f"Training stops making progress without an error, and {how}. A worker is blocked, and the main process waits for its batch forever. "
                 "Usual causes: a deadlock after fork when the parent already runs threads (OpenCV/OpenMP/MKL thread pools, a lock held "
                 "by a logging or I/O thread, CUDA or other libraries initialised before the workers start), a worker stuck in slow I/O or "
                 "in a transform that never returns, shared memory (/dev/shm) too small in a container, or, on Windows/macOS, a script "
                 "without the `if __name__ == '__main__':` guard."
                 + (" Your text mentions CUDA being set up before iterating: that state is inherited by forked workers; start workers with "
                    "the 'spawn' context or create the loader's iterator before touching CUDA." if cuda_first else ""))
        fixes = [
            remedy("dataloader-hang#isolate-with-num-workers-0"),
            remedy("dataloader-hang#worker-timeout"),
            remedy("dataloader-hang#see-where-stuck"),
            remedy("dataloader-hang#avoid-fork-with-threads"),
            remedy("dataloader-shared-memory#enough-worker-shared-memory"),
        ]
        return hit("symptoms.dataloader_hang", "dataloader_error", "Training hangs with DataLoader workers", cause, fixes, _LOADER_DOCS, found, 0.66,
                   "dataloader hang num_workers deadlock", facts=Facts(numbers=numbers, flags=frozenset(flags)))

    debug = remedy("distributed-hang#debug-output-hang")
    if kind == "init":
        cause = ("The distributed job blocks while the process group is being set up (init_process_group or the DDP constructor): "
                 "the rendezvous never completes, so every process waits for peers that do not arrive. Usual causes: fewer processes than "
                 "world_size were started or two processes claim the same rank (e.g. a fixed rank=0 in every process), MASTER_ADDR/MASTER_PORT "
                 "not reachable from every process (wrong address, firewall, port taken), NCCL picking a network interface or GPU peer-to-peer "
                 "path that does not work on this machine, or a barrier that only some ranks reach.")
        fixes = [
            debug,
            remedy("process-group-init#check-rank-and-world-size"),
            remedy("distributed-hang#test-the-transport"),
            remedy("process-group-init#short-setup-timeout"),
        ]
        return hit("symptoms.distributed_init_hang", "ddp_error", "Distributed job hangs at start-up", cause, fixes, ("process-group-init", "distributed-hang", "nccl-timeout"), found, 0.64,
                   "init_process_group hangs rendezvous", facts=Facts(numbers=numbers, flags=frozenset({"hang", "distributed_init"})))

    rank_only = _RANK_ONLY_EVAL.search(text) if _BARRIER_CALL.search(text) else None
    if rank_only:
        return _rank_only_eval_hang(rank_only.group(0), found, numbers)
    cause = ("A multi-GPU/distributed run trains for a while and then stops making progress without an error"
             + "".join(f" (around {numbers[unit]:g} {unit})" for unit in ("steps", "epochs") if unit in numbers)
             + ". The GPUs often show 100% utilisation while nothing happens: the ranks sit in a collective (all_reduce, broadcast, barrier) "
             "waiting for a rank that never arrives, until the NCCL watchdog ends the job after its timeout. Usual causes: ranks running a "
             "different number of batches (an uneven data split, the last batch, a per-rank filter), a collective inside code that only "
             "some ranks run (evaluation, checkpointing or logging under `if rank == 0`), one rank that died, ran out of memory or is stuck "
             "loading data, or an unstable interconnect.")
    fixes = [
        debug,
        remedy("distributed-hang#find-rank-stopped-first"),
        remedy("nccl-timeout#keep-ranks-in-step"),
        remedy("nccl-timeout#hang-ends-with-report"),
    ]
    return hit("symptoms.distributed_hang", "nccl_error", "Distributed training hangs mid-run", cause, fixes, _DIST_DOCS, found, 0.64,
               "distributed training hangs nccl collective", facts=Facts(numbers=numbers, flags=frozenset({"hang", "distributed_train"})))
