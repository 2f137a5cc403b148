"""The investigation's pieces without running programs: the catalogue, choosing, classifying, re-ranking, rendering."""

from __future__ import annotations

import re

from assistant.investigate.catalogue import applicable, by_id, catalogue, matches
from assistant.investigate.protocol import apply_results, command_for, settles
from assistant.investigate.readers import READERS
from assistant.investigate.rerun import Rerun, classify, experiment_env, pass_point
from assistant.investigate.switches import KNOWN
from assistant.types import Diagnosis, ExperimentResult, Hypothesis

# A real message (torch 2.13, CPU) of the kind the rules read.
KEYERROR_TEXT = """Traceback (most recent call last):
  File "/job/train.py", line 12, in __getitem__
    return torch.tensor(self.by_name[self.names[i]])
KeyError: 'Dog'
"""


def _diagnosis(category: str, hypotheses: tuple[tuple[str, float], ...]) -> Diagnosis:
    hyps = tuple(Hypothesis(h, f"cause {h}.", p, f"print({h.replace('.', '_')})") for h, p in hypotheses)
    return Diagnosis(category, "t", "s", hyps[0].cause if hyps else "", (), (), (), 0.9, hypotheses=hyps)


def test_every_experiment_is_complete_and_names_known_switches_and_readers() -> None:
    ids = [s.id for s in catalogue()]
    assert len(ids) == len(set(ids)) >= 10
    for spec in catalogue():
        assert spec.title and spec.change and spec.question and (spec.env or spec.switches), spec.id
        assert set(spec.switches) <= set(KNOWN), spec.id
        assert not spec.reader or spec.reader in READERS, spec.id
        if spec.when:
            re.compile(spec.when)


def test_oom_experiments_need_cuda_and_lead_with_what_moves_most() -> None:
    d = _diagnosis("cuda_oom", (("oom.peak_too_large", 0.5), ("oom.fragmentation", 0.3)))
    assert applicable(d, used_cuda=False) == []
    chosen = [s.id for s in applicable(d, used_cuda=True)]
    assert chosen[0] in ("expandable_segments", "memory_history") and "expandable_segments" in chosen


def test_an_experiment_whose_question_the_numbers_answered_is_not_run() -> None:
    from dataclasses import replace

    from assistant.types import Facts

    d = _diagnosis("cuda_oom", (("memory.cuda_oom_impossible", 0.9),))
    assert "expandable_segments" in [s.id for s in applicable(d, used_cuda=True)]
    settled = replace(d, facts=Facts(flags=frozenset({"request_exceeds_card", "fragmentation_ruled_out"})))
    assert [s.id for s in applicable(settled, used_cuda=True)] == ["memory_history"]
    # Little cached memory makes fragmentation unlikely, but only a re-run settles it: that experiment still runs.
    inferred = replace(d, facts=Facts(flags=frozenset({"fragmentation_ruled_out"})))
    assert "expandable_segments" in [s.id for s in applicable(inferred, used_cuda=True)]


def test_when_pattern_skips_anomaly_for_a_forward_only_failure() -> None:
    d = _diagnosis("inplace_autograd", (("autograd.leaf_inplace", 0.8),))
    leaf = "RuntimeError: a leaf Variable that requires grad is being used in an in-place operation."
    assert "anomaly" not in [s.id for s in applicable(d, False, text=leaf)]
    backward = "RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation"
    assert "anomaly" in [s.id for s in applicable(d, False, text=backward)]


def test_prefixes_match_whole_segments() -> None:
    assert matches("dataloader.shared_memory", ("dataloader.",))
    assert not matches("dataloaderx.y", ("dataloader.",))
    assert matches("oom.fragmentation", ("oom.fragmentation",))


def test_classify() -> None:
    base = Rerun(1, 2.0, KEYERROR_TEXT, {}, cut=False)
    assert classify(base, KEYERROR_TEXT, 2.0) == "same"
    other = Rerun(1, 2.0, KEYERROR_TEXT.replace("KeyError: 'Dog'", "ValueError: bad value 3"), {}, cut=False)
    assert classify(other, KEYERROR_TEXT, 2.0) == "other"
    assert classify(Rerun(0, 1.0, "", {}, cut=False), KEYERROR_TEXT, 2.0) == "passed"
    assert classify(Rerun(None, pass_point(2.0), "", {}, cut=True), KEYERROR_TEXT, 2.0) == "passed"
    assert classify(Rerun(None, 0.5, "", {}, cut=True), KEYERROR_TEXT, 2.0) == "stopped"
    # Numbers in the message do not make a failure different.
    renumbered = Rerun(1, 2.0, KEYERROR_TEXT.replace("line 12", "line 13"), {}, cut=False)
    assert classify(renumbered, KEYERROR_TEXT, 2.0) == "same"


def test_the_allocator_experiment_keeps_the_users_other_options() -> None:
    spec = by_id("expandable_segments")
    env = experiment_env(spec, {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128,expandable_segments:False"})
    assert env["PYTORCH_CUDA_ALLOC_CONF"] == "max_split_size_mb:128,expandable_segments:True"
    assert experiment_env(by_id("guard_index"), {})["TORCHHELP_SWITCHES"] == "guard_index"


def test_commands_to_repeat() -> None:
    argv = ["python", "train.py", "--name", "my run"]
    assert command_for(by_id("launch_blocking"), argv) == "CUDA_LAUNCH_BLOCKING=1 python train.py --name 'my run'"
    assert command_for(by_id("guard_index"), argv).startswith("torchhelp run --investigate --experiment guard_index --yes -- python")


def test_verified_leads_and_ruled_out_falls_with_the_total_kept() -> None:
    d = _diagnosis("cuda_oom", (("oom.peak_too_large", 0.5), ("oom.growth", 0.2), ("oom.fragmentation", 0.1)))
    result = ExperimentResult("expandable_segments", "Allocator", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "?", "passed", "cmd",
                              verified=("oom.fragmentation",), ruled_out=("oom.growth",))
    after = apply_results(d, (result,))
    assert after.hypotheses[0].id == "oom.fragmentation" and after.cause == "cause oom.fragmentation."
    assert abs(sum(h.likelihood for h in after.hypotheses) - 0.8) < 1e-6
    growth = next(h for h in after.hypotheses if h.id == "oom.growth")
    assert growth.likelihood < 0.05 and growth.weakens
    assert after.to_dict()["experiments"][0]["verified"] == ["oom.fragmentation"]


def test_rendering_shows_each_experiment_and_how_to_repeat_it() -> None:
    from rich.console import Console

    from assistant.render.markdown import render_markdown
    from assistant.render.terminal import render_terminal

    d = _diagnosis("nan_inf", (("nan.bad_input_or_op", 0.6), ("nan.learning_rate", 0.3)))
    result = ExperimentResult("nonfinite", "First non-finite value", "anomaly detection", "?", "other",
                              "torchhelp run --investigate --experiment nonfinite --yes -- python t.py",
                              finding="the input of Net.fc already holds NaN", verified=("nan.bad_input_or_op",), ruled_out=("nan.learning_rate",))
    d = apply_results(d, (result,))
    console = Console(record=True, width=120)
    render_terminal(d, console)
    text = console.export_text()
    assert "Experiments (re-runs with one change)" in text and "different failure" in text
    assert "verified: cause nan.bad_input_or_op" in text and "ruled out: cause nan.learning_rate" in text
    assert "repeat: torchhelp run --investigate --experiment nonfinite" in text
    md = render_markdown(d)
    assert "### Experiments" in md and "the input of Net.fc already holds NaN" in md


def test_an_oom_whose_fragmentation_an_experiment_ruled_out_is_read_again_in_the_users_numbers() -> None:
    """The real H100 capture of a long-sequence OOM: its numbers look like fragmentation, and the memory rule says so;
    given a re-run with expandable segments that failed the same way, the rule reads the full-card branch instead,
    keeps the user's numbers and the attention reading, and flags fragmentation as ruled out."""
    import json
    from pathlib import Path

    from assistant.engine import default_engine
    from assistant.types import Evidence

    capture = json.loads((Path(__file__).resolve().parents[1] / "eval/captured/cuda/cuda-oom-seqlen-curriculum.json").read_text())
    engine = default_engine()
    plain = engine.diagnose(capture["stderr"])
    assert plain.rule == "memory.cuda_oom_fragmented"
    retried = ExperimentResult("expandable_segments", "Allocator", "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True", "?", "same", "cmd",
                               ruled_out=("oom.fragmentation",))
    again = engine.diagnose(capture["stderr"], evidence=Evidence(experiments=(retried,)))
    assert again.rule == "memory.cuda_oom" and again.category == "cuda_oom"
    assert "failed again with expandable segments" in again.cause and "quadratically" in again.cause
    assert "fragmentation_ruled_out" in again.facts.flags
    assert not any(h.id == "oom.fragmentation" and h is again.hypotheses[0] for h in again.hypotheses)


def _guard_result(**values) -> ExperimentResult:  # type: ignore[no-untyped-def]
    return ExperimentResult("guard_index", "Index and label bounds checked on the host", "guards", "?", "other", "cmd", values=values)


def test_a_device_assert_is_read_again_with_the_value_the_guard_found() -> None:
    """Real H100 captures of two device asserts, with the values the host-side guard found in the GPU re-runs
    (eval/gpu_runs/2026-11-27-investigate.json): the cause says which value, where, and what its place in the range means."""
    import json
    from pathlib import Path

    from assistant.engine import default_engine
    from assistant.types import Evidence

    root = Path(__file__).resolve().parents[1] / "eval/captured/cuda"
    engine = default_engine()
    labels = json.loads((root / "cuda-assert-ce-one-based-labels.json").read_text())["stderr"]
    one_based = _guard_result(op="cross_entropy", value=10, position=0, shape=[128], low=0, high=10, ignored=-100, location="repro.py:60 in main")
    d = engine.diagnose(labels, evidence=Evidence(experiments=(one_based,)))
    assert d.category == "device_side_assert"
    assert "`cross_entropy` got 10 at flat position 0 of a [128] argument (from repro.py:60 in main); valid values are 0 to 9" in d.cause
    assert "one past the last valid value" in d.cause
    padded = json.loads((root / "cuda-assert-nll-pad-label-minus-one.json").read_text())["stderr"]
    pad = _guard_result(op="nll_loss", value=-1, position=26, shape=[1248], low=0, high=17, ignored=-100)
    d = engine.diagnose(padded, evidence=Evidence(experiments=(pad,)))
    assert "ignore_index (-100)" in d.cause and "one past" not in d.cause
    plain = engine.diagnose(padded)
    assert "checked on the host" not in plain.cause  # nothing is claimed without the experiment


def test_an_experiment_that_can_verify_a_present_cause_goes_before_one_that_only_locates() -> None:
    """Of experiments equally worth running, the one naming a present hypothesis runs first: the host-side
    guard can verify an out-of-range label, synchronous launches only show where the kernel failed."""
    assert_d = _diagnosis("device_side_assert", (("assert.label_range", 0.6), ("assert.embedding_ids", 0.3)))
    assert [s.id for s in applicable(assert_d, used_cuda=True)][:2] == ["guard_index", "launch_blocking"]
    # When the rule already read which kind of assert it is from the message, what it lacks is where: the real
    # op under synchronous launches comes first, then the guard's value.
    read_by_rule = _diagnosis("device_side_assert", (("cuda.assert_label", 0.9),))
    assert [s.id for s in applicable(read_by_rule, used_cuda=True)][:2] == ["launch_blocking", "guard_index"]
    cublas = _diagnosis("cublas_error", (("cublas.earlier_error", 0.5), ("cublas.out_of_memory", 0.4)))
    assert [s.id for s in applicable(cublas, used_cuda=True)][0] == "launch_blocking"


def test_one_verified_cause_settles_the_question_two_do_not() -> None:
    def result(outcome: str, verified: tuple[str, ...], ruled_out: tuple[str, ...] = ()) -> ExperimentResult:
        return ExperimentResult("x", "t", "c", "q", outcome, "cmd", verified=verified, ruled_out=ruled_out)

    assert settles(result("other", ("cuda.assert_label",)))
    assert settles(result("same", ("ddp.unused_parameters",), ("ddp.other",)))
    assert settles(result("passed", ("oom.fragmentation",)))
    assert not settles(result("other", ("cudnn.earlier_error", "cudnn.out_of_memory")))
    assert not settles(result("same", (), ("oom.fragmentation",)))
    assert not settles(result("passed", ()))


def test_cases_are_chosen_by_several_globs() -> None:
    from assistant.eval.cases import load_cases

    slugs = [c.slug for c in load_cases(device="cuda", pattern="cuda-oom-frag*, cuda-assert-ce-*")]
    assert slugs == ["cuda-assert-ce-one-based-labels", "cuda-oom-fragmentation"]


def test_a_flight_dump_that_names_code_or_is_torn_is_no_evidence(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The dump is a pickle: one that would call a function when loaded is refused, as is a cut one."""
    import os
    import pickle

    from assistant.investigate.flight import load_dump, read_flight_dumps

    class Hostile:
        def __reduce__(self):  # type: ignore[no-untyped-def]
            return (os.system, ("touch " + str(tmp_path / "ran"),))

    (tmp_path / "nccl_trace_rank_0").write_bytes(pickle.dumps({"entries": [Hostile()]}))
    plain = {"version": "2.10", "pg_config": {"0": {"name": "0", "desc": "default_pg", "ranks": "[0, 1]"}},
             "entries": [{"collective_seq_id": 1, "profiling_name": "nccl:all_reduce", "state": "completed", "is_p2p": False},
                         {"collective_seq_id": 2, "profiling_name": "nccl:all_reduce", "state": "scheduled", "is_p2p": False,
                          "input_sizes": [[1024]]}]}
    (tmp_path / "nccl_trace_rank_1").write_bytes(pickle.dumps(plain)[:-7])
    assert load_dump(tmp_path / "nccl_trace_rank_0") is None and not (tmp_path / "ran").exists()
    assert read_flight_dumps(tmp_path) is None
    (tmp_path / "nccl_trace_rank_1").write_bytes(pickle.dumps(plain))
    summary = read_flight_dumps(tmp_path)
    assert summary == {"ranks": {"1": {"last_completed": 1, "recorded": 2, "waiting": {"op": "all_reduce", "seq": 2, "state": "scheduled",
                                                                                           "sizes": [[1024]], "dtypes": None}}},
                       "missing_ranks": [0]}


def test_a_real_nccl_dump_names_the_collective_rank_0_waited_in_and_the_rank_that_left() -> None:
    """tests/data/flight_nccl: the dump NCCL itself wrote at a watchdog timeout (torch 2.11, two H200s)."""
    from pathlib import Path

    from assistant.investigate.flight import read_flight_dumps
    from assistant.investigate.readers import RerunView, read
    from assistant.rules.distributed import _flight_sentence

    summary = read_flight_dumps(Path(__file__).parent / "data" / "flight_nccl")
    assert summary == {"ranks": {"0": {"last_completed": 14, "recorded": 15, "waiting": {
        "op": "all_reduce", "seq": 15, "state": "scheduled", "sizes": [[35594]], "dtypes": ["Float"]}}}, "missing_ranks": [1]}
    view = RerunView("stopped", "", {}, "", "", "", "nccl_error", {"flight": summary})
    finding = read("flight_recorder", view)
    assert finding.text.startswith("rank 0 was waiting in all_reduce #15 on inputs [[35594]] after 14 completed collectives; rank 1 left no trace")
    assert finding.rules_out == ("nccl.transport",) and not finding.verifies
    sentence, apart = _flight_sentence(finding.values)  # type: ignore[misc]
    assert "rank 0 in all_reduce #15 after 14 completed" in sentence and "Rank 1 left no trace" in sentence and not apart
