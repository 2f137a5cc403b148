"""Context cues: the words around an error that change which cause is likely.

The same ``CUDA out of memory`` means different things "when resuming from a checkpoint", "after a
few epochs" and "on the first batch". Cues are read from the whole text the user gave (report
prose, log lines before the traceback, the traceback's own source lines), never from the error
message's boilerplate, and each one keeps the snippet it was read from so it can be shown as a fact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

MAX_CUE_TEXT = 200_000  # cues are phrases around the error; a bounded window keeps this linear and cheap
SNIPPET = 60


@dataclass(frozen=True)
class Cue:
    """A context cue found in the text: what it means and the words it was read from."""

    id: str
    snippet: str

    @property
    def fact(self) -> str:
        return f"the text says “{self.snippet}”"


# (cue id, pattern). Patterns are bounded (no nested quantifiers) and case-insensitive.
_PATTERNS: tuple[tuple[str, str], ...] = (
    ("resume", r"\bresum(?:e|es|ed|ing)\b(?: (?:training|from))?(?: (?:a |the )?(?:saved )?(?:checkpoint|training|model))?|\b(?:load(?:ing|ed)?|restor(?:e|ing|ed)|continu(?:e|ing))\b[^\n.]{0,30}\bcheckpoints?\b"
               r"|\bresume_from_checkpoint\b|\bfrom (?:a |the )?(?:saved )?checkpoint\b"),
    ("upgrade", r"\bafter (?:an? )?(?:upgrad|updat)\w*|\b(?:upgrad|updat)(?:ed|ing) (?:to |from )?(?:torch|pytorch|transformers|timm|lightning|cuda|the library|version)\b"
                r"|\b(?:worked|works|working) (?:fine |well )?(?:in|with|on|before) (?:v(?:ersion)?\s?)?\d+\.\d+|\bnewer version\b|\bolder version\b|\bversion mismatch\b"),
    ("multi_gpu", r"\b(?:[2-9]|1[0-9]|[2-9]\d) ?(?:x ?)?gpus\b|\bmulti-?gpus?\b|\bmultiple gpus\b|\bDistributedDataParallel\b|\btorchrun\b|\bnproc_per_node\b"
                  r"|\bworld_size\s*=\s*(?:[2-9]|\d\d)|\bDataParallel\b"),
    ("workers_zero_ok", r"\bnum_workers\s*=\s*0\b[^\n]{0,40}\b(?:works?|fine|fixe[sd]|solve[sd]|no (?:error|problem))|\b(?:works?|fine) (?:with|when) num_workers\s*=\s*0"),
    ("windows", r"\bon windows\b|\bwindows 1[01]\b|\bwin32\b|\b[A-Z]:\\\\?(?:Users|Program Files|ProgramData|Anaconda3|Miniconda3)\\|\bwin-amd64\b"),
    ("later_in_training", r"\bafter (?:about |around |some |a few |several |\d+ )(?:epochs?|iterations?|steps?|batches|hours?)\b|\b(?:epoch|iteration|step) \d{2,}\b"
                          r"|\b(?:grows?|growing|increas(?:es|ing)|keeps? (?:going )?up|creeps? up|climbs?)\b[^\n.]{0,40}\b(?:memory|every|each|over time)\b"
                          r"|\bmemory leak\b|\bin the middle of training\b"),
    ("first_step", r"\b(?:on|at|in) the (?:very )?first (?:batch|step|iteration|forward|epoch)\b|\bimmediately\b|\bright (?:away|at the start)\b|\bbefore (?:the )?first step\b"),
    ("mixed_precision", r"\bfp16\b|\bfloat16\b|\bhalf[- ]precision\b|\bmixed[- ]precision\b|\bautocast\b|\bGradScaler\b|\b--amp\b|\bamp\.|\bamp=True\b|\buse_amp\b|\bbf16\b"),
    ("colab", r"\bcolab\b|\bgoogle\.colab\b|/content/drive\b"),
    ("evaluation", r"\b(?:during|in) (?:the )?(?:validation|evaluation|eval|inference|testing)\b|\bmodel\.eval\(\)|\bvalidation (?:loop|step|epoch)\b|\bdef (?:validate|evaluate|test)\b"
                   r"|\bin (?:validate|evaluate|evaluation|validation_step|test_step|eval_\w+|run_eval\w*)\n"
                   r"|\b(?:validation|evaluation|eval|test|testing|inference) (?:phase|process|stage|time)\b|\bwhen (?:validating|evaluating|testing)\b"
                   # A traceback whose script is the evaluation entry point (evaluate.py, val.py, test.py, inference.py).
                   r"|[/\\](?:eval|evaluate|evaluation|val|validate|validation|test|inference|infer|predict)\.py\"?, line \d"),
    ("learning_rate", r"\blearning rate\b|\blr\s*=\s*\d|\blr (?:of|is|was) \d|\blarger lr\b|\bhigher lr\b"),
    ("custom_data", r"\b(?:my|our|custom|own) (?:data ?set|data|images|labels|annotations)\b|\bnew dataset\b"),
    ("different_model", r"\b(?:changed|modified|different|new) (?:the )?(?:model|architecture|config|number of classes|num_classes|head)\b|\bfine-?tun(?:e|ing)\b"),
    # Cues for the GPU, distributed and host-memory families (families_more.py).
    ("tokenizer", r"\btokenizer\b|\badd(?:ed|ing)? (?:new |special |extra )?tokens?\b|\bvocab(?:ulary)?[ _]size\b|\bresize_token_embeddings\b"),
    ("embedding_code", r"\bnn\.Embedding\b|\bself\.\w*embed\w*\(|\bembedding\(|\bF\.embedding\b|\b(?:wte|wpe|word_embeddings|tok_embeddings?)\(|\b(?:tok|pos|word|token|position)_emb(?:ed|eddings?)?\b"),
    ("loss_code", r"\b(?:F\.)?(?:cross_entropy|nll_loss)\(|\bCrossEntropyLoss\(|\bNLLLoss\(|\bcriterion\(|\bloss_fn\("),
    ("driver_update", r"\b(?:updat|upgrad|reinstall|install|chang)(?:ed|ing) (?:the |my |an? |our )?(?:nvidia |gpu |cuda |graphics )?drivers?\b"
                      r"|\b(?:nvidia |gpu |cuda )?driver (?:update|upgrade)\b|\bnew (?:nvidia |gpu )?driver\b|\bwithout (?:a )?reboot(?:ing)?\b"),
    ("new_gpu", r"\b(?:new|newer|different|another) (?:gpu|graphics card|card|machine|server)\b"
                r"|\bworks? (?:fine |well )?on (?:my |an? |the )?(?:other|old|older|previous|another) (?:gpu|card|machine|server)\b"
                r"|\brtx ?[345]0[5-9]0(?: ti)?\b|\b(?:ampere|hopper|blackwell)\b"),
    ("container", r"\bdocker\b|\bcontainers?\b|\bkubernetes\b|\bk8s\b|\bsingularity\b|\bapptainer\b|\bpodman\b"),
    ("wsl", r"\bwsl ?2?\b"),
    ("suspend", r"\b(?:after|from) (?:a |the )?(?:suspend|sleep|hibernat(?:e|ion))\b|\bsuspend(?:ed)? ?(?:/|and) ?resum\w*|\bwak(?:e|es|ing) (?:up )?from (?:sleep|suspend)\b"),
    ("multi_node", r"\b(?:[2-9]|\d\d) (?:nodes|machines|servers|hosts)\b|\bmulti-?node\b|\bmultiple (?:nodes|machines|servers|hosts)\b|\bnnodes[ =]+(?:[2-9]|\d\d)\b|\bnode_rank\b"),
    ("rank0_only", r"\bif (?:self\.|args\.)?(?:local_|global_)?rank\s*==\s*0\b|\bonly (?:on )?(?:the )?(?:rank ?0|main process|master process)\b|\bis_main_process\(|\bis_master\b"
                   r"|\brank 0 only\b|\bon rank ?0 only\b"),
    ("saving", r"\b(?:while|when|during) (?:it is )?saving\b|\bsav(?:e|es|ing) (?:a |the )?(?:checkpoint|model|weights)\b|\bcheckpoint(?:ing)? (?:is |takes )?(?:slow|long)\b"),
    # Not a bare "temperature": sampling code has one too.
    ("overheat", r"\boverheat\w*|\b(?:gpu|card|high|core) temperatures?\b|\btemperatures? (?:reach|reaches|climbs?|rises?|goes|hits|above|over)\b"
                 r"|\bthermal (?:throttl\w*|shutdown|limit)|\btoo hot\b|\b\d{2,3} ?°C\b"),
    ("specific_node", r"\b(?:one|a|that|this) (?:specific|particular|certain) (?:gpu|node|machine|card|server|host)\b"
                      r"|\bsame (?:gpu|node|machine|card|server|host) (?:every|each) time\b|\bother (?:gpus|nodes|machines|cards|servers|hosts) (?:are|work|run) fine\b"
                      r"|\bonly (?:on|with) (?:gpu ?\d|node ?\d|cuda:\d)\b"),
    ("loading_weights", r"\btorch\.load\(|\bload_state_dict\(|\bfrom_pretrained\(|\bsafetensors\b|\bunpickl(?:e|er|ing)\b"),
    ("dataloader", r"\bDataLoader\b|\bnum_workers\b|\bdata ?load(?:er|ing)\b|\b__getitem__\b|\bcollate_fn\b"),
    ("own_pool", r"\b(?:multiprocessing|mp)\.(?:Pool|Process)\(|\bProcessPoolExecutor\b|\bForkProcess-\d+|\bForkPoolWorker-\d+|\bmultiprocessing[/\\](?:pool|process)\.py\b"),
    # Memory that runs out only after N items were processed: something grows per step (references, metrics, lists never reset).
    ("after_n_items", r"\b(?:when|after|once) (?:about |around |roughly |nearly |approximately |~ ?)?\d[\d,]* (?:images?|samples?|iterations?|iters?|batches|steps?|epochs?"
                      r"|files?|videos?|frames?|examples?|prompts?|requests?|sentences?) (?:were |have been |had been |are |is )?(?:processed|done|completed|evaluated|predicted|inferred|generated)"
                      r"|\b(?:trained|ran|run|running|training) (?:to|until|till|up to) (?:about |around |roughly )?\d[\d,]* (?:iterations?|iters?|steps?|batches|epochs?)\b"
                      r"|\bafter (?:processing|predicting|evaluating|inferring|generating|testing) (?:about |around |roughly )?\d[\d,]* \w+"
                      r"|\b(?:metrics?|outputs?|predictions?|preds|logits|losses|results|features|embeddings)\b[^\n.]{0,40}(?:\bnever|\bnot|n't) (?:reset|cleared|freed|detached)\b"),
    # The user already tried the usual remedy and it did not help: that remedy's cause is less likely.
    ("tried_batch", r"\b(?:reduc|lower|decreas|shrink|halv)\w* (?:the |my )?(?:batch[ _-]?size|bs|samples_per_gpu|micro[ _-]?batch)\b[^\n.]{0,60}"
                    r"\b(?:still|same (?:error|problem|issue)|doesn't help|does not help|didn't help|did not help|no luck|no difference|nothing changed)"
                    r"|\b(?:even|still) (?:with|at|when using|using) (?:a |the )?(?:batch[ _-]?size|bs|samples_per_gpu)\s*(?:=|of|:|to)?\s*[12]\b"
                    r"|\bsmaller batch(?:[ _-]?sizes?)?\b[^\n.]{0,40}\b(?:still|doesn't help|does not help|didn't help|did not help|no luck)"
                    r"|\bno matter (?:how small|what) (?:the |my )?batch"),
    ("tried_workers", r"\b(?:reduc|lower|decreas|set)\w* (?:the |my )?num_workers\b[^\n.]{0,60}\b(?:still|same (?:error|problem|issue)|doesn't help|does not help|didn't help|did not help|no luck)"
                      r"|\b(?:even|still) with num_workers\s*=\s*[0-2]\b"),
    ("tried_allocator", r"(?:empty_cache\(\)|expandable_segments|max_split_size_mb)[^\n.]{0,60}\b(?:still|doesn't help|does not help|didn't help|did not help|no luck|no effect|no difference)"),
    # Weights offloaded to the CPU or disk (accelerate's device_map): the model already fills the GPU(s), so any further GPU
    # allocation (a cuBLAS/cuDNN handle, a workspace, activations) can fail on memory.
    ("model_offloaded", r"\boffloaded to (?:the )?(?:cpu|disk)\b|\b(?:cpu|disk)[ _]offload(?:ing|ed)?\b|\boffload_folder\b"
                        r"|\bdevice_map\s*=\s*[\"']?(?:auto|balanced)\b|[\"']device_map[\"']\s*:\s*[\"'](?:auto|balanced)\b"),
    # The user set CUDA_VISIBLE_DEVICES themselves: whether it reached the process decides which GPU the job is on.
    ("visible_devices", r"\bCUDA_VISIBLE_DEVICES\b"),
    # Data whose samples vary widely in length (speech, audio, long documents): a few very long samples can dominate memory.
    ("variable_length", r"\b(?:utterances?|ASR|speech recognition|TTS|text-to-speech|waveforms?|fbank|filterbanks?|kaldi"
                        r"|long (?:documents?|utterances?|audio|recordings?|clips?|wav files?))\b"),
    ("large_input", r"\b(?:larger|bigger|large|big|higher) batch(?:[ _-]?size)?\b|\bbatch[ _-]?size (?:above|over|greater than|larger than|bigger than)\b"
                    r"|\bsmaller batch(?:[ _-]?size)? (?:works|is fine|fixes|avoids|solves)\b|\b(?:longer|larger|bigger|high-resolution) (?:inputs?|sequences?|images?)\b"),
)
@lru_cache(maxsize=1)
def _compiled() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """The patterns, compiled on first use (not at import: most runs of `ask` answer without a differential)."""
    return tuple((cue_id, re.compile(pattern, re.I)) for cue_id, pattern in _PATTERNS)


def read_cues(text: str, exclude: str = "") -> tuple[Cue, ...]:
    """Every context cue in ``text`` (first occurrence each), ignoring what lies inside ``exclude``.

    ``exclude`` is the error message itself: its boilerplate ("if reserved but unallocated memory is
    large ...") is the same for every user and says nothing about their story.
    """
    window = text[-MAX_CUE_TEXT:]
    if exclude and len(exclude) > 20:
        window = window.replace(exclude, " ")
    found: list[Cue] = []
    for cue_id, pattern in _compiled():
        m = pattern.search(window)
        if m:
            snippet = " ".join(m.group(0).split())[:SNIPPET]
            found.append(Cue(cue_id, snippet))
    return tuple(found)
