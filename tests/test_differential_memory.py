"""Out-of-memory differentials (GPU and host RAM): the words around the same error move the ranking.

Every error text is real (eval/corpus/memory/*.txt, each with its source URL). Each ranking test runs the
same report twice, with and without the sentence that carries the cue, so the move is the cue's alone.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from assistant import diagnose
from assistant.differential.cues import read_cues
from assistant.settings import load_settings

CORPUS = Path(__file__).resolve().parents[1] / "eval" / "corpus" / "memory"


def _text(name: str) -> str:
    """A corpus file's verbatim text, without its `# source:` header."""
    lines = (CORPUS / name).read_text(encoding="utf-8").splitlines(keepends=True)
    return "".join(line for line in lines if not line.startswith("# source:"))


def _without(text: str, sentence: str) -> str:
    assert sentence in text, sentence
    return text.replace(sentence, "")


def _ids(d) -> list[str]:  # type: ignore[no-untyped-def]
    return [h.id for h in d.hypotheses]


def _lead_text(d) -> str:  # type: ignore[no-untyped-def]
    return " ".join([d.cause, d.title] + [f"{f.title} {f.detail} {f.code or ''}" for f in d.fixes])


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    home = tmp_path_factory.mktemp("home")
    return load_settings(env={"TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0"}, llm="none")


# --- 1. the CPU allocator's failure in every wording is host RAM ---------------------------------------------------

@pytest.mark.parametrize(("name", "outcome"), [
    ("cpu_alloc_fragment_eval_phase_stargan.txt", "memory.cpu_oom_allocator"),   # only "enforce fail at CPUAllocator.cpp" quoted
    ("cpu_alloc_posix_memalign_old_photos.txt", "memory.cpu_oom_allocator"),     # "posix_memalign(...) == 0. 12 vs 0"
    ("cpu_alloc_mask2former_eval.txt", "memory.cpu_oom"),                         # "DefaultCPUAllocator: can't allocate memory"
    ("cpu_alloc_after_iterations_memseg.txt", "memory.cpu_oom"),                  # "DefaultCPUAllocator: not enough memory"
    ("cpu_alloc_old_th_buy_new_ram.txt", "memory.cpu_oom"),                       # "Torch: not enough memory: you tried to allocate"
])
def test_cpu_allocator_failures_are_host_memory(name: str, outcome: str, settings) -> None:  # type: ignore[no-untyped-def]
    d = diagnose(_text(name), settings=settings)
    assert (d.category, d.rule) == ("cpu_oom", outcome)
    assert not re.search(r"CUDA out of memory|GPU memory|VRAM", _lead_text(d))


# --- 2. growth across steps, and evaluation-time OOM ----------------------------------------------------------------

def test_oom_after_n_images_leads_with_growth(settings) -> None:  # type: ignore[no-untyped-def]
    text = _text("oom_after_n_images_eval_hairseg.txt")
    sentence = 'When about 30 images were processed,  "Cuda out of Memory error" happens.\n'
    told, plain = diagnose(text, settings=settings), diagnose(_without(text, sentence), settings=settings)
    assert "after_n_items" in [c.id for c in read_cues(text)]
    assert _ids(told)[0] == "oom.growth" != _ids(plain)[0]
    # What grows is kept references: the lead does not send the user to a smaller batch.
    assert not re.search(r"reduce (the )?batch size|smaller batch", _lead_text(told), re.I)


def test_host_oom_after_n_iterations_leads_with_growth(settings) -> None:  # type: ignore[no-untyped-def]
    text = _text("cpu_alloc_after_iterations_memseg.txt")
    sentence = "when I trained to 600 iterations, prompted this error, "
    told, plain = diagnose(text, settings=settings), diagnose(_without(text, sentence), settings=settings)
    assert _ids(told)[0] == "cpu.growth" != _ids(plain)[0]
    assert any("reset" in f.code for f in told.fixes if f.code)


def test_validation_oom_has_its_own_alternative(settings) -> None:  # type: ignore[no-untyped-def]
    text = _text("oom_validation_batch_reduced_still_mmseg.txt")
    sentence = "The training is ok, but cuda out of memory will appear during the validation process. "
    told = diagnose(text, settings=settings)
    plain = diagnose(_without(_without(text, sentence), ", but 2 samples per gpu in validation will occur the error"), settings=settings)
    assert _ids(told)[0] == "oom.eval_larger_inputs"
    assert "oom.eval_larger_inputs" not in _ids(plain)[:1]
    lead = told.hypotheses[0]
    assert re.search(r"tile|sliding", lead.fixes[0].title + lead.fixes[0].detail, re.I)
    assert "batch" not in lead.fixes[0].title.lower()  # the user already lowered the batch


def test_host_oom_in_evaluation_offers_a_smaller_evaluation_step_first(settings) -> None:  # type: ignore[no-untyped-def]
    text = _text("cpu_alloc_fragment_eval_phase_stargan.txt")
    told = diagnose(text, settings=settings)
    plain = diagnose(_without(text, " in eval phase"), settings=settings)
    assert told.fixes[0].title == "Shrink one evaluation step"
    assert plain.fixes[0].title != "Shrink one evaluation step"


# --- 3. a remedy the user already tried is weakened and not offered first --------------------------------------------

def test_reduced_batch_that_did_not_help_weakens_the_batch_cause(settings) -> None:  # type: ignore[no-untyped-def]
    text = _text("oom_validation_batch_reduced_still_mmseg.txt")
    sentence = "When i reduce the batch size, it is still appear,  "
    told, plain = diagnose(text, settings=settings), diagnose(_without(text, sentence), settings=settings)
    peak = {h.id: h.likelihood for h in plain.hypotheses}.get("oom.peak_too_large", 0.0)
    assert {h.id: h.likelihood for h in told.hypotheses}.get("oom.peak_too_large", 0.0) < peak
    # The rule's own fixes drop the batch-size remedy once the user says it did not help.
    rule_fixes = lambda d: [f.title for h in d.hypotheses if h.id == "oom.fragmentation" for f in h.fixes]  # noqa: E731
    assert any("batch size" in t.lower() for t in rule_fixes(plain))
    assert not any("batch size" in t.lower() for t in rule_fixes(told))


@pytest.mark.parametrize(("sentence", "cue"), [
    ("When i reduce the batch size, it is still appear", "tried_batch"),
    ("I lowered the batch size to 4 but I still get the same error.", "tried_batch"),
    ("It happens even with batch size 1.", "tried_batch"),
    ("I reduced num_workers to 2 and it still gets killed.", "tried_workers"),
    ("Calling torch.cuda.empty_cache() after every step does not help.", "tried_allocator"),
    ("When about 30 images were processed, it crashes.", "after_n_items"),
    ("when I trained to 600 iterations, prompted this error", "after_n_items"),
    ("The metric objects are never reset between epochs.", "after_n_items"),
    ('"enforce fail at CPUAllocator.cpp" error happens in eval phase', "evaluation"),
    ('  File "/home/u/proj/evaluate.py", line 94, in <module>', "evaluation"),
    ("export CUDA_VISIBLE_DEVICES=5", "visible_devices"),
    ("WARNING [big_modeling.py:433] Some parameters are on the meta device device because they were offloaded to the cpu.", "model_offloaded"),
])
def test_memory_cues(sentence: str, cue: str) -> None:
    assert cue in [c.id for c in read_cues(sentence)]


@pytest.mark.parametrize("sentence", [
    "A smaller batch size works fine.",  # the opposite story: the batch is the cause
    "If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.",
    "Training for 3 epochs on 2 GPUs.",
])
def test_memory_cues_stay_quiet(sentence: str) -> None:
    assert not {"tried_batch", "tried_allocator", "after_n_items", "visible_devices"} & {c.id for c in read_cues(sentence)}


# --- 4. CUDA_VISIBLE_DEVICES set, yet the GPU in use is busy -----------------------------------------------------------

def test_visible_devices_with_a_busy_gpu_asks_to_verify_the_variable(settings) -> None:  # type: ignore[no-untyped-def]
    text = _text("oom_visible_devices_gpu0_busy_llamafactory.txt")
    first = text.splitlines(keepends=True)[0]
    told, plain = diagnose(text, settings=settings), diagnose(_without(text, first), settings=settings)
    assert told.rule == "memory.cuda_oom_visible_devices" and _ids(told)[0] == "oom.visible_devices_not_applied"
    assert "os.environ" in told.hypotheses[0].check and "numbered 0" in told.hypotheses[0].check
    assert "CUDA_VISIBLE_DEVICES=5 python" in " ".join(f.code or "" for f in told.fixes)
    assert not re.search(r"max_split_size_mb|reduce (the )?batch size|gradient checkpointing", _lead_text(told), re.I)
    # Without the variable in the text, the busy card is another process's, and nothing speaks of CUDA_VISIBLE_DEVICES checks.
    assert plain.rule == "memory.cuda_oom_other_processes"
    assert "oom.visible_devices_not_applied" not in _ids(plain)
