"""Families tuned on the dev_fresh9 reports (tuner f9x), read from real texts.

Every text is real: a report of the dev_fresh9 split or a message printed by torch 2.13 on this machine.
"""

from __future__ import annotations

from tuned_support import dev_report, fix_text, hit_of


def test_four_against_three_on_the_channel_dimension_offers_dropping_the_alpha_channel() -> None:
    # Printed by torch 2.13: a 4-channel batch minus a 3-channel per-channel mean.
    found = hit_of("RuntimeError: The size of tensor a (4) must match the size of tensor b (3) at non-singleton dimension 1")
    assert found.category == "shape_mismatch"
    assert 'convert("RGB")' in fix_text(found.fixes)
    report = hit_of(dev_report("dev_fresh9", "f9b-cliption-rgba-4-vs-3-channels"))
    assert 'convert("RGB")' in fix_text(report.fixes)


def test_other_sizes_on_the_channel_dimension_do_not_mention_alpha() -> None:
    # Printed by torch 2.13: 5 channels against 3.
    found = hit_of("RuntimeError: The size of tensor a (5) must match the size of tensor b (3) at non-singleton dimension 1")
    assert "alpha" not in fix_text(found.fixes)


def test_traceback_ending_in_a_position_embedding_lookup_leads_with_truncation() -> None:
    found = hit_of(dev_report("dev_fresh9", "f9b-transformer-pos-embedding-untruncated"))
    assert found.category == "index_error"
    first = fix_text(found.fixes[:1])
    assert "Truncate" in first


def test_ddp_unused_parameters_on_a_single_gpu_offers_training_without_ddp() -> None:
    found = hit_of(dev_report("dev_fresh9", "f9a-ddp-single-gpu-unused-params"))
    assert found.category == "ddp_error"
    assert "DistributedSampler" in fix_text(found.fixes[:1])


def test_ddp_unused_parameters_without_a_gpu_count_keeps_the_usual_fixes() -> None:
    text = ("RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. This error indicates "
            "that your module has parameters that were not used in producing loss.")
    found = hit_of(text)
    assert found.category == "ddp_error"
    assert "DistributedSampler" not in fix_text(found.fixes)


def test_busy_or_unavailable_gpu_offers_one_gpu_per_process() -> None:
    found = hit_of(dev_report("dev_fresh9", "f9a-busy-unavailable-exclusive-mode-multiproc"))
    assert found.category == "cuda_unavailable"
    assert "DEFAULT" in fix_text(found.fixes)


def test_nccl_system_error_mentions_preset_nccl_settings() -> None:
    found = hit_of(dev_report("dev_fresh9", "f9a-nccl-graph-file-azure"))
    assert found.category == "nccl_error"
    assert "nccl.conf" in fix_text(found.fixes)


def test_oom_after_some_iterations_also_offers_a_smaller_batch() -> None:
    found = hit_of(dev_report("dev_fresh9", "f9b-scenegen-oom-variable-objects"))
    assert found.category == "cuda_oom"
    assert "batch size" in fix_text(found.fixes).lower()


def test_anomaly_warning_quoted_alone_is_read_as_a_nan_in_backward() -> None:
    found = hit_of(dev_report("dev_fresh9", "f9b-sahp-softmaxbackward-nan-batch"))
    assert found.category == "nan_inf"
    assert "SoftmaxBackward" in found.title or "SoftmaxBackward" in found.cause


def test_anomaly_warning_beside_an_in_place_error_keeps_the_in_place_reading() -> None:
    # Printed by torch 2.13 with anomaly detection on: sigmoid's output modified in place before backward.
    text = ("/work/venv/lib/python3.11/site-packages/torch/autograd/graph.py:979: UserWarning: Error detected in SigmoidBackward0. "
            "Traceback of forward call that caused the error:\n"
            "RuntimeError: one of the variables needed for gradient computation has been modified by an inplace operation: "
            "[torch.FloatTensor [3]], which is output 0 of Sigmoid, is at version 1; expected version 0 instead. Hint: the backtrace "
            "further above shows the operation that failed to compute its gradient. The variable in question was changed in there or "
            "anywhere later. Good luck!")
    found = hit_of(text)
    assert found.category != "nan_inf"
