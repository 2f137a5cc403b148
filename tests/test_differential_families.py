"""The families beyond OOM, state_dict, NaN and DataLoader workers: GPU faults, distributed jobs, host memory.

Every error text is a real one (eval/corpus reports, eval/captured runs). Each family is shown the
same text plain and with one sentence of the kind users write around it; the ranking must move the
way that sentence says (the same cuDNN status "on a new card that the old build predates" is an
installation problem, not memory).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from assistant import diagnose
from assistant.differential.cues import read_cues
from assistant.differential.families import FAMILIES
from assistant.differential.families_more import MORE_FAMILIES
from assistant.settings import load_settings

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "eval" / "corpus"
CAPTURED = ROOT / "eval" / "captured"


def _text(rel: str) -> str:
    path = ROOT / "eval" / rel
    if path.suffix == ".json":
        return json.loads(path.read_text(encoding="utf-8"))["stderr"]
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    home = tmp_path_factory.mktemp("home")
    return load_settings(env={"TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0"}, llm="none")


def _ranked(d) -> dict[str, tuple[int, float]]:  # type: ignore[no-untyped-def]
    return {h.id: (i, h.likelihood) for i, h in enumerate(d.hypotheses)}


# (category, error text, sentence around it, the lead without the sentence, the lead with it)
LEAD_MOVES = [
    ("device_side_assert", "corpus/cuda/device_side_assert_no_kernel_line.txt",
     "I added special tokens to the tokenizer before training.", "assert.label_range", "assert.embedding_ids"),
    ("illegal_memory_access", "captured/cuda/cuda-illegal-access-triton-byte-stride.json",
     "This started after upgrading PyTorch, and only on one particular machine.", "ima.bad_indices", "ima.build_or_hardware"),
    ("nccl_error", "corpus/distributed/nccl_timeout_alltoall_epoch_transition.txt",
     "It always hangs while rank 0 is saving the checkpoint at the end of the epoch.", "nccl.rank_desync", "nccl.slow_or_dead_rank"),
    ("ddp_error", "corpus/distributed/ddp_unused_aux_head_gloo_2_13.txt",
     "It only fails after 10 epochs, when the second branch is switched on.", "ddp.unused_parameters", "ddp.changing_graph"),
    ("cpu_oom", "corpus/distributed/torchrun_sigkill_2_13.txt",
     "This happens when resuming from the last checkpoint.", "cpu.data_in_ram", "cpu.checkpoint_load"),
    ("cudnn_error", "corpus/cuda/cudnn_internal_error_backward.txt",
     "The same code works on my old GPU; this is a new RTX 4090.", "cudnn.out_of_memory", "cudnn.install_mismatch"),
    ("cublas_error", "corpus/cuda/cublas_internal_error_backward.txt",
     "The same code works on my old GPU; this is a new RTX 4090.", "cublas.out_of_memory", "cublas.build_gpu"),
    ("cublas_error", "corpus/cuda/cublas_internal_error_backward.txt",
     "I added new tokens to the tokenizer and the model's vocabulary.", "cublas.out_of_memory", "cublas.earlier_error"),
    ("multiprocessing_error", "corpus/multiprocessing/cuda_fork_oneline_pycls.txt",
     "I start a multiprocessing.Pool(4) to run the model on several files.", "mp.worker_uses_cuda", "mp.pool_after_cuda"),
]


@pytest.mark.parametrize(("category", "rel", "sentence", "plain_lead", "cued_lead"), LEAD_MOVES, ids=[f"{c[0]}:{c[4]}" for c in LEAD_MOVES])
def test_context_moves_the_lead(settings, category: str, rel: str, sentence: str, plain_lead: str, cued_lead: str) -> None:  # type: ignore[no-untyped-def]
    text = _text(rel)
    plain = diagnose(text, settings=settings)
    told = diagnose(sentence + "\n" + text, settings=settings)
    assert plain.category == told.category == category
    assert plain.hypotheses[0].id == plain_lead
    assert told.hypotheses[0].id == cued_lead
    before, after = _ranked(plain), _ranked(told)
    assert after[cued_lead][1] > before[cued_lead][1]
    lead = told.hypotheses[0]
    # The answer leads with the leading hypothesis's fixes (the family's other documented fixes may follow).
    assert told.cause == lead.cause and told.fixes[: len(lead.fixes)] == lead.fixes
    assert lead.check and lead.fixes and all(f.sources for f in lead.fixes)  # every fix keeps a citation after grounding
    assert any("the text says" in s for s in lead.supports)  # the sentence is shown as the evidence for the lead


# The rule's own branch is strong evidence; a cue then moves another cause up behind it, with more weight.
RISES = [
    ("cuda_unavailable", "corpus/devices/no_cuda_gpus_available_samus.txt",
     "It worked until I updated the NVIDIA driver yesterday.", "cuda.no_gpu_access", "cuda.driver_state"),
    ("hardware_error", "corpus/cuda/unknown_error_mid_training.txt",
     "It is always the same node; the other nodes are fine.", "hw.driver_or_software", "hw.faulty_device"),
    ("hardware_error", "corpus/cuda/unknown_error_mid_training.txt",
     "The GPU temperature climbs above 90°C before it fails.", "hw.driver_or_software", "hw.overheating"),
]


@pytest.mark.parametrize(("category", "rel", "sentence", "lead", "risen"), RISES, ids=[f"{c[0]}:{c[4]}" for c in RISES])
def test_context_raises_a_cause_behind_the_rule(settings, category: str, rel: str, sentence: str, lead: str, risen: str) -> None:  # type: ignore[no-untyped-def]
    text = _text(rel)
    plain = diagnose(text, settings=settings)
    told = diagnose(sentence + "\n" + text, settings=settings)
    assert plain.category == told.category == category
    assert plain.hypotheses[0].id == told.hypotheses[0].id == lead
    before, after = _ranked(plain), _ranked(told)
    assert risen in after and after[risen][0] == 1
    assert after[risen][1] > before.get(risen, (9, 0.0))[1]
    assert after[risen][0] <= before.get(risen, (9, 0.0))[0]


def test_the_traceback_line_is_a_cue_too(settings) -> None:  # type: ignore[no-untyped-def]
    # No kernel line was pasted; the reported line adds token and position embeddings (a hint, since the error is asynchronous).
    d = diagnose(_text("corpus/cuda/device_side_assert_embedding_add_line.txt"), settings=settings)
    assert d.rule == "cuda.device_side_assert"
    assert d.hypotheses[0].id == "assert.embedding_ids" and len(d.hypotheses) > 1


def test_a_worker_free_run_that_passes_points_at_worker_copies(settings) -> None:  # type: ignore[no-untyped-def]
    text = _text("corpus/distributed/torchrun_sigkill_2_13.txt")
    plain, told = (diagnose(t, settings=settings) for t in (text, "With num_workers=0 it works fine, just slowly.\n" + text))
    assert told.hypotheses[0].id == "cpu.worker_copies" != plain.hypotheses[0].id


@pytest.mark.parametrize(("rel", "rule"), [
    ("corpus/cuda/cudnn_arch_mismatch_old_gpu.txt", "cuda.cudnn_arch_mismatch"),
    ("corpus/cuda/cublas_arch_mismatch_extension.txt", "cuda.cublas_arch_mismatch"),
    ("corpus/cuda/launch_timed_out_watchdog.txt", "cuda.hardware_launch_timeout"),
    ("corpus/distributed/collective_mismatch_shape_allgather.txt", "distributed.collective_mismatch"),
    ("corpus/devices/driver_too_old_fooocus.txt", "devices.driver_too_old"),
    ("captured/cuda/cuda-assert-ce-one-based-labels.json", "cuda.assert_label"),
])
def test_decisive_facts_keep_one_hypothesis_with_its_check(settings, rel: str, rule: str) -> None:  # type: ignore[no-untyped-def]
    d = diagnose("It started after upgrading, on a new GPU, in a docker container, after 10 epochs.\n" + _text(rel), settings=settings)
    assert d.rule == rule and len(d.hypotheses) == 1
    assert d.hypotheses[0].cause == d.cause
    family = FAMILIES[d.category]
    mapped = next((a for a in family.alternatives if rule in a.outcomes), None)
    assert mapped is None or d.hypotheses[0].check == mapped.check


def test_more_families_are_merged_and_well_formed() -> None:
    from assistant.rules.registry import all_rules

    declared = {o: spec for spec in all_rules() for o in spec.outcomes}
    knowledge = {m.group(1) for p in (ROOT / "knowledge").rglob("*.md") if (m := re.search(r"^id: ([\w-]+)", p.read_text(encoding="utf-8"), re.M))}
    cue_ids = {c for c, _ in __import__("assistant.differential.cues", fromlist=["_PATTERNS"])._PATTERNS}
    assert set(MORE_FAMILIES) <= set(FAMILIES)
    for category, family in MORE_FAMILIES.items():
        assert 2 <= len(family.alternatives) <= 4, category
        assert sum(a.prior for a in family.alternatives) <= 1.0, category
        owner: dict[str, str] = {}
        for alt in family.alternatives:
            assert alt.check and alt.cause and alt.fixes, alt.id
            assert all(f.sources and set(f.sources) <= knowledge for f in alt.fixes), alt.id
            assert set(alt.cues) <= cue_ids, alt.id
            # No number the facts did not give (dtype names such as bfloat16 are words, not values).
            assert not re.search(r"\d", re.sub(r"\b(?:b?float|u?int)\d+\b", "", alt.cause)), alt.id
            for outcome in alt.outcomes:
                assert outcome in declared and category in declared[outcome].categories, outcome
                assert owner.setdefault(outcome, alt.id) == alt.id, outcome  # one alternative per outcome
        assert all(o in declared for o in family.decisive | family.plain)
        assert all(family.covers(o) for o in family.plain)


@pytest.mark.parametrize(("sentence", "cue"), [
    ("I resized the vocabulary after adding special tokens to the tokenizer.", "tokenizer"),
    ("x = self.token_embedding(idx)", "embedding_code"),
    ("loss = criterion(outputs, labels)", "loss_code"),
    ("This started after I updated the NVIDIA driver.", "driver_update"),
    ("The same script fails on our new GPU.", "new_gpu"),
    ("We run it inside a Docker container.", "container"),
    ("I am on WSL2 with Ubuntu.", "wsl"),
    ("It stops working after suspend and resume of the laptop.", "suspend"),
    ("Training on 4 nodes with 8 GPUs each.", "multi_node"),
    ("    if args.local_rank == 0:", "rank0_only"),
    ("It hangs while saving the checkpoint.", "saving"),
    ("The GPU is overheating under load.", "overheat"),
    ("It always fails on one specific node.", "specific_node"),
    ("Only with a larger batch size; a smaller batch works.", "large_input"),
    ("    state = torch.load(path)", "loading_weights"),
    ("It fails as soon as the DataLoader starts its workers.", "dataloader"),
    ("Process ForkProcess-1:", "own_pool"),
])
def test_new_context_cues(sentence: str, cue: str) -> None:
    assert cue in [c.id for c in read_cues(sentence)]


@pytest.mark.parametrize("sentence", [
    "The loss is computed with a custom function.",
    "I saved the logs and the config.",
    "The dataset has 4 classes and 2 splits.",
    "It fails on GPU 0 as well.",
    "out = model.generate(ids, do_sample=True, temperature=0.7)",
])
def test_new_cues_stay_quiet_on_ordinary_words(sentence: str) -> None:
    new = {"tokenizer", "embedding_code", "loss_code", "driver_update", "new_gpu", "container", "wsl", "suspend", "multi_node",
           "rank0_only", "saving", "overheat", "specific_node", "large_input", "loading_weights", "dataloader", "own_pool"}
    assert not new & {c.id for c in read_cues(sentence)}
