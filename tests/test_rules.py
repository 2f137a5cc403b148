"""Rules: every rule fires on real error text, and its answer is specific to the values in that text.

Error texts come from real runs: the committed captures (eval/captured), real reports pasted by
users on GitHub (eval/realworld, verbatim), and snippets run right here with the installed torch.
"""

from __future__ import annotations

import json
import traceback

import pytest
import torch

from assistant import rules
from assistant.parse import parse_failure
from conftest import CAPTURES, ROOT

# Only the dev split: the frozen test split is never used to build or check rules.
REALWORLD = [json.loads(line) for line in (ROOT / "eval" / "realworld" / "dev.jsonl").read_text().splitlines() if line.strip()]


def _raise_text(fn) -> str:  # type: ignore[no-untyped-def]
    """Run a failing snippet and return its real traceback text."""
    try:
        fn()
    except BaseException:  # noqa: BLE001 - we want the text of whatever torch raises
        return traceback.format_exc()
    raise AssertionError("snippet did not fail")


def _first_rule(text: str):  # type: ignore[no-untyped-def]
    """(registered rule id, answer) of the rule set for a text, (None, None) when nothing answers."""
    found = rules.match(parse_failure(text), strict=True).hit
    return (found.rule_id, found) if found else (None, None)


def _empty_loader() -> None:
    list(torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(0, 2)), shuffle=True))


def _script_unsupported() -> None:
    def f(x: torch.Tensor) -> torch.Tensor:
        return torch.tensor([len({1: x}[1].shape)]) + x  # dict of tensors with int keys: fine; use an unsupported builtin below

    def g(x: torch.Tensor):  # type: ignore[no-untyped-def]
        return [i for i in map(lambda v: v, x)]

    torch.jit.script(g)


def _half_overflow() -> None:
    scores = torch.zeros(2, 2, dtype=torch.half)
    scores.masked_fill(torch.ones(2, 2, dtype=torch.bool), -1e9)


LOCAL_SNIPPETS = {
    "amp.autocast_misc": _half_overflow,
    "data.dataset_misc": _empty_loader,
    "compile.torchscript": _script_unsupported,
    "shapes.generic_shape": lambda: torch.randn(2, 3).permute(0, 1, 2),
}


@pytest.mark.parametrize("name", sorted(LOCAL_SNIPPETS))
def test_local_snippet_rules(name: str) -> None:
    rule, hit = _first_rule(_raise_text(LOCAL_SNIPPETS[name]))
    assert rule == name
    assert hit.fixes and hit.cause


def _capture(slug: str) -> dict:
    return next(c for c in CAPTURES if c["slug"] == slug)


def test_linear_mismatch_names_layer_numbers_and_fixes() -> None:
    text = _raise_text(lambda: torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8192, 10))(torch.randn(4, 8, 30, 30)))
    _, hit = _first_rule(text)
    answer = hit.cause + " ".join(f.title + (f.code or "") for f in hit.fixes)
    assert hit.category == "shape_mismatch"
    assert "in_features=8192" in answer and "7200" in answer
    assert "nn.Linear(7200, 10)" in answer and "LazyLinear" in answer
    assert "8×30×30" in hit.full_cause or "32×15×15" in hit.full_cause  # 7200 explained as a flattened C×H×W map


def test_conv_grayscale_gives_both_fixes() -> None:
    _, hit = _first_rule(_capture("conv-grayscale-input-rgb-model")["stderr"])
    titles = " ".join(f.title for f in hit.fixes)
    assert "3 channels" in titles and "in_channels=1" in titles
    assert "grayscale" in hit.cause.lower()


@pytest.mark.parametrize("report_id", [r["id"] for r in REALWORLD if r["category"] == "cuda_oom"])
def test_cuda_oom_numbers_and_fragmentation_advice(report_id: str) -> None:
    report = next(r for r in REALWORLD if r["id"] == report_id)
    _, hit = _first_rule(report["error_text"])
    assert hit.category == "cuda_oom"
    fragmented = "(fragmentation)" in hit.title
    if fragmented:
        assert hit.fixes[0].code and "expandable_segments" in hit.fixes[0].code
    else:
        # expandable_segments is never the first advice when fragmentation is not significant
        assert "expandable_segments" not in (hit.fixes[0].code or "")
    if "Tried to allocate" in report["error_text"]:
        assert any(f.kind == "memory" and "requested" in f.text for f in hit.evidence)


def test_oom_fragmentation_decision_uses_the_numbers() -> None:
    base = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.50 GiB is free. "
            "Including non-PyTorch memory, this process has 77.68 GiB memory in use. Of the allocated memory {alloc} GiB is allocated by PyTorch, "
            "and {unalloc} GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.")
    _, frag = _first_rule(base.format(alloc="52.10", unalloc="25.40"))
    _, full = _first_rule(base.format(alloc="77.10", unalloc="0.40"))
    assert "fragmentation" in frag.title and "expandable_segments" in (frag.fixes[0].code or "")
    assert "fragmentation" not in full.title
    assert "batch size" in full.fixes[0].title.lower() or "inference" in full.fixes[0].title.lower()
    assert "will not help" in full.cause
    assert "fragmentation_ruled_out" in full.facts.flags and "fragmentation_ruled_out" not in frag.facts.flags


def test_old_oom_wording_maps_to_the_same_rule() -> None:
    old = next(r for r in REALWORLD if "cuda runtime error (2)" in r["error_text"].lower() or "already allocated" in r["error_text"])
    rule, hit = _first_rule(old["error_text"])
    assert hit.category == "cuda_oom" and rule == "memory.cuda_oom"


@pytest.mark.parametrize(
    "needle,category",
    [("size mismatch, m1:", "shape_mismatch"), ("Expected object of scalar type", "dtype_mismatch")],
)
def test_old_and_new_wordings_share_a_rule(needle: str, category: str) -> None:
    olds = [r for r in REALWORLD if needle in r["error_text"]]
    assert olds, f"no real report with {needle!r}"
    for report in olds:
        _, hit = _first_rule(report["error_text"])
        assert hit is not None and hit.category == category, report["id"]


def test_device_side_assert_reads_the_kernel() -> None:
    report = next(r for r in REALWORLD if "t >= 0 && t < n_classes" in r["error_text"])
    _, hit = _first_rule(report["error_text"])
    assert hit.category == "device_side_assert"
    assert "label" in hit.cause and "n_classes" in hit.cause
    assert "asynchronous" in hit.cause.lower()
    assert any("CUDA_LAUNCH_BLOCKING=1" in (f.code or "") for f in hit.fixes)


def test_embedding_assert_points_at_vocabulary() -> None:
    report = next(r for r in REALWORLD if "srcIndex < srcSelectDimSize" in r["error_text"])
    _, hit = _first_rule(report["error_text"])
    assert hit.category == "device_side_assert" and "num_embeddings" in hit.cause


@pytest.mark.parametrize("slug,category", [
    ("missing-apex-amp-import", "environment_error"),
    ("dataset-relative-path-not-found", "environment_error"),
    ("config-key-renamed-keyerror", "python_error"),
    ("module-missing-super-init", "python_error"),
])
def test_non_pytorch_failures(slug: str, category: str) -> None:
    _, hit = _first_rule(_capture(slug)["stderr"])
    assert hit.category == category and hit.fixes


def test_keyerror_names_the_key_and_the_config() -> None:
    _, hit = _first_rule(_capture("config-key-renamed-keyerror")["stderr"])
    assert "'learning_rate'" in hit.cause and "config" in hit.cause.lower()


def test_every_cited_document_exists() -> None:
    from assistant.kb.documents import load_builtin

    ids = {d.id for d in load_builtin()}
    texts = [c["stderr"] for c in CAPTURES] + [r["error_text"] for r in REALWORLD]
    for text in texts:
        hit = rules.match(parse_failure(text)).hit
        if hit:
            assert set(hit.doc_ids) <= ids, (hit.rule, set(hit.doc_ids) - ids)


# -- memory / cuda / distributed: branches chosen from the numbers and words in the text ---------------------------

def _corpus_hit(source: str):  # type: ignore[no-untyped-def]
    from assistant.eval.examples import example_text

    return _first_rule(example_text(source))[1]


def test_oom_container_listing_itself_is_not_another_process() -> None:
    """In a container PyTorch lists its own pid as "Process N"; that entry is this process, not a neighbour."""
    hit = _corpus_hit("corpus/memory/oom_container_own_process_listed.txt")
    assert hit.rule == "memory.cuda_oom" and "other_processes_bytes" not in hit.facts.numbers


def test_oom_old_numbers_reveal_memory_held_elsewhere() -> None:
    hit = _corpus_hit("corpus/memory/oom_other_process_old_wording.txt")
    assert hit.rule == "memory.cuda_oom_other_processes"
    assert "nvidia-smi" in (hit.fixes[0].code or "") and "expandable_segments" not in (hit.fixes[0].code or "")
    assert hit.facts.number("other_processes_bytes") and hit.facts.number("other_processes_bytes") > 10 * 2**30


def test_oom_request_larger_than_the_card_is_a_shape_problem() -> None:
    hit = _corpus_hit("corpus/memory/oom_impossible_grid_sample.txt")
    assert hit.rule == "memory.cuda_oom_impossible" and "fragmentation_ruled_out" in hit.facts.flags
    assert not any("batch size" in f.title.lower() for f in hit.fixes)


def test_oom_prose_growth_and_batch_one_get_their_own_answers() -> None:
    growth = _corpus_hit("corpus/memory/oom_growth_prose_each_iteration.txt")
    assert growth.rule == "memory.cuda_oom_growth" and "memory_growth" in growth.facts.flags
    assert any("memory_allocated" in (f.code or "") for f in growth.fixes)
    one = _corpus_hit("corpus/memory/oom_batch1_prose_tdn.txt")
    assert one.rule == "memory.cuda_oom_batch_one" and "batch_size_one" in one.facts.flags
    assert not any(f.title.lower().startswith("reduce the batch size") for f in one.fixes)


def test_host_oom_branches_and_how_to_confirm_the_killer() -> None:
    killed = _corpus_hit("corpus/memory/killed_progress_bar.txt")
    assert killed.rule == "memory.cpu_oom_killed" and killed.category == "cpu_oom"
    assert any("dmesg" in (f.code or "") for f in killed.fixes)
    absurd = _corpus_hit("corpus/memory/cpu_alloc_absurd_size_torch_empty.txt")
    assert absurd.rule == "memory.cpu_oom_absurd_size" and absurd.facts.number("requested_bytes") == 4e15
    torchrun = _corpus_hit("corpus/distributed/torchrun_sigkill_rank7.txt")
    assert torchrun.rule == "distributed.child_killed" and torchrun.category == "cpu_oom"
    assert torchrun.facts.number("rank") == 7 and torchrun.facts.number("exit_code") == -9


def test_nccl_timeout_facts_and_first_collective() -> None:
    report = next(r for r in REALWORLD if r["id"] == "basicsr-nccl-watchdog-rankprefix")
    _, hit = _first_rule(report["error_text"])
    assert hit.rule == "distributed.nccl_timeout"
    assert hit.facts.number("seq_num") == 808 and hit.facts.number("timeout_ms") == 600000 and "ALLREDUCE" in hit.facts.names
    first = _corpus_hit("corpus/distributed/nccl_timeout_first_collective.txt")
    assert first.rule == "distributed.nccl_timeout_first_collective" and "NCCL_SOCKET_IFNAME" in " ".join(f.code or "" for f in first.fixes)


def test_collective_mismatch_reads_both_shapes() -> None:
    hit = _corpus_hit("corpus/distributed/collective_mismatch_shape_allgather.txt")
    assert hit.facts.shapes == ((359, 1, 1435, 16), (359, 1, 1436, 16))
    assert "[359, 1, 1435, 16]" in hit.cause and "rank 1" in hit.cause
    op = _corpus_hit("corpus/distributed/collective_mismatch_op_type.txt")
    assert "ALLGATHER" in op.cause and "REDUCE" in op.cause and "order" in op.cause


def test_device_side_assert_facts_name_kernel_and_condition() -> None:
    _, hit = _first_rule(_capture("cuda-assert-ce-one-based-labels")["stderr"])
    assert hit.rule == "cuda.assert_label"
    assert "t >= 0 && t < n_classes" in hit.facts.names and hit.facts.number("thread_reports")


def test_library_status_rows() -> None:
    bf16 = _corpus_hit("corpus/cuda/cublas_not_supported_bf16_old_gpu.txt")
    assert bf16.rule == "cuda.cublas_not_supported" and "bfloat16" in bf16.facts.dtypes and "bfloat16" in bf16.cause
    alloc = _corpus_hit("corpus/cuda/cudnn_alloc_failed_lowercase_title.txt")
    assert alloc.rule == "cuda.cudnn_no_memory" and alloc.fixes[0].title == "Rule out out-of-memory"


# --- shapes / dtypes / amp / indexing: answers read the values in the message -----------------------------------

def _corpus(name: str) -> str:
    from assistant.eval.examples import example_text

    return example_text(f"corpus/{name}")


def test_segmentation_target_with_channel_axis_is_squeezed_along_that_axis() -> None:
    _, hit = _first_rule(_corpus("shapes/seg_target_size_singleton_ssl.txt"))
    assert hit.rule == "shapes.seg_target_singleton"
    assert "(8, 1, 224, 224)" in hit.cause and hit.facts.shapes == ((8, 1, 224, 224),)
    assert "squeeze(1)" in (hit.fixes[0].code or "")


def test_segmentation_colour_masks_get_colour_and_one_hot_fixes() -> None:
    _, hit = _first_rule(_corpus("shapes/seg_target_old_rgb_mask_unet.txt"))
    assert hit.rule == "shapes.seg_target_multichannel"
    codes = " ".join(f.code or "" for f in hit.fixes)
    assert "argmax(dim=-1)" in codes and "palette" in codes


def test_rnn_hidden_batch_mismatch_reads_both_shapes() -> None:
    lstm = torch.nn.LSTM(10, 20)
    text = _raise_text(lambda: lstm(torch.randn(5, 3, 10), (torch.zeros(1, 4, 20), torch.zeros(1, 4, 20))))
    _, hit = _first_rule(text)
    assert hit.rule == "shapes.rnn_hidden"
    assert hit.facts.shapes == ((1, 3, 20), (1, 4, 20))
    assert "batch_first" in hit.cause and "3" in hit.title and "4" in hit.title


def test_rnn_hidden_layers_and_width_are_told_apart() -> None:
    gru = torch.nn.GRU(10, 20, num_layers=2)
    _, layers = _first_rule(_raise_text(lambda: gru(torch.randn(5, 3, 10), torch.zeros(1, 3, 20))))
    assert layers.rule == "shapes.rnn_hidden_layers" and "num_layers" in layers.cause
    _, width = _first_rule(_corpus("shapes/rnn_hidden_size_repair.txt"))
    assert width.rule == "shapes.rnn_hidden_size" and "bidirectional" in width.cause


def test_half_on_cpu_offers_float32_gpu_and_bfloat16() -> None:
    _, hit = _first_rule(_corpus("dtypes/half_cpu_layernorm_onediff.txt"))
    assert hit.rule == "dtypes.half_cpu" and hit.facts.devices == ("cpu",)
    text = " ".join(f"{f.title} {f.code or ''}" for f in hit.fixes)
    assert "float32" in text and "cuda" in text and "bfloat16" in text


def test_one_hot_long_target_to_cross_entropy() -> None:
    text = _raise_text(lambda: torch.nn.functional.cross_entropy(torch.randn(4, 3), torch.nn.functional.one_hot(torch.tensor([0, 1, 2, 1]), 3)))
    _, hit = _first_rule(text)
    assert hit.rule == "dtypes.ce_prob_target" and hit.category == "dtype_mismatch"
    assert "argmax(dim=1)" in (hit.fixes[0].code or "") and "float()" in (hit.fixes[1].code or "")


def test_gradscaler_state_errors_get_distinct_outcomes() -> None:
    def scaler_run(calls: str) -> str:
        m = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler("cpu")

        def run() -> None:
            loss = m(torch.randn(2, 4)).sum()
            if "scale" in calls:
                scaler.scale(loss).backward()
            else:
                loss.backward()
            for name in calls.split()[1:]:
                getattr(scaler, name)(opt) if name != "update" else scaler.update()

        return _raise_text(run)

    assert _first_rule(scaler_run("scale step step"))[1].rule == "amp.order"
    assert _first_rule(scaler_run("scale unscale_ unscale_"))[1].rule == "amp.unscale_twice"
    assert _first_rule(scaler_run("plain step"))[1].rule == "amp.no_scale"


def test_index_wording_stays_generic_unless_an_embedding_is_named() -> None:
    _, plain = _first_rule(_raise_text(lambda: torch.randn(5, 3).index_select(0, torch.tensor([7]))))
    assert plain.rule == "index.out_of_range_self"
    words = (plain.cause + " ".join(f"{f.title} {f.detail} {f.code or ''}" for f in plain.fixes)).lower()
    assert "vocab" not in words and "embedding" not in words
    _, emb = _first_rule(_raise_text(lambda: torch.nn.Embedding(10, 3)(torch.tensor([3, 10]))))
    assert emb.rule == "index.embedding" and "num_embeddings" in emb.cause
    assert not any("resize_token_embeddings" in (f.code or "") for f in emb.fixes)  # no tokenizer in this text



# --- devices / autograd / data / multiprocessing: the cause follows what the text shows ----------------------------

def test_device_mismatch_names_the_factory_call_only_when_the_failing_line_shows_it() -> None:
    _, created = _first_rule(_corpus("devices/arange_positions_in_forward_gpu.txt"))
    assert created.rule == "devices.created_in_forward" and created.facts.call == "torch.arange"
    assert "device=" in created.fixes[0].title and "cuda:0" in created.facts.devices
    # The tensor was built on an earlier line: no specific call is blamed, the family advice is given.
    _, plain = _first_rule(_corpus("devices/ones_in_forward_without_device_gpu.txt"))
    assert plain.rule == "devices.mismatch_other" and plain.facts.call is None
    assert "torch.ones" not in plain.cause and "torch.arange" not in plain.cause


def test_device_mismatch_without_device_call_does_not_raise_on_a_meta_capture() -> None:
    text = _raise_text(lambda: torch.randn(2, 4, device="meta") + torch.arange(4))
    rule, found = _first_rule(text)
    assert rule == "devices.device_mismatch" and found.rule == "devices.created_in_forward"
    assert set(found.facts.devices) == {"cpu", "meta"}


def test_worker_killed_by_sigkill_is_host_oom_with_ways_to_confirm_it() -> None:
    _, found = _first_rule(_corpus("data/worker_sigkill_during_getitem.txt"))
    assert found.rule == "data.worker_oom"
    codes = " ".join((f.code or "") + f.detail for f in found.fixes)
    assert "dmesg" in codes and "journalctl" in codes and "prefetch_factor" in codes and "np.array" in codes


def test_unpicklable_handles_are_opened_lazily_and_lambdas_moved_to_top_level() -> None:
    _, h5 = _first_rule(_corpus("multiprocessing/h5py_pickle_spawn_win_sst.txt"))
    assert h5.rule == "mp.unpicklable_handle" and "__getitem__" in h5.fixes[0].detail
    _, lam = _first_rule(_corpus("multiprocessing/local_lambda_win_mutualnet.txt"))
    assert lam.rule == "mp.unpicklable" and "top level" in lam.fixes[0].title
    _, main_attr = _first_rule(_corpus("multiprocessing/spawn_main_class_not_importable.txt"))
    assert main_attr.rule == "mp.main_attribute" and main_attr.facts.names == ("Squares",)


def test_inplace_error_reads_shape_and_versions() -> None:
    text = _raise_text(lambda: torch.sigmoid(torch.randn(4, 3, requires_grad=True)).mul_(2).sum().backward())
    _, found = _first_rule(text)
    assert found.rule == "autograd.inplace"
    assert found.facts.shapes == ((4, 3),) and found.facts.number("version") == 1


# --- compile / io / env / python rules: typed facts and message-specific advice ---------------


def test_onnx_opset_advice_uses_the_version_the_message_names() -> None:
    _, found = _first_rule(_corpus("compile/onnx_unsupported_op_added_in_later_opset.txt"))
    assert found.rule == "compile.onnx_opset_too_low" and found.category == "compile_error"
    assert found.facts.names == ("aten::tril",) and found.facts.number("required_opset") == 14
    assert "opset_version=14" in (found.fixes[0].code or "")
    _, other = _first_rule(_corpus("compile/onnx_unsupported_op_no_symbolic.txt"))
    assert other.rule == "compile.onnx_unsupported_op"
    assert any("dynamo=True" in (f.code or "") for f in other.fixes)
    assert any("register_custom_op_symbolic" in (f.code or "") for f in other.fixes)


def test_torch_export_data_dependent_names_the_user_line() -> None:
    _, found = _first_rule(_corpus("compile/export_data_dependent_branch_captured.txt"))
    assert found.rule == "compile.export_data_dependent"
    assert "x.sum() > 0" in found.cause
    codes = " ".join(f.code or "" for f in found.fixes)
    assert "torch.cond" in codes and "torch._check" in codes
    _, dim = _first_rule(_corpus("compile/export_constraints_violated_dim_captured.txt"))
    assert dim.rule == "compile.dynamic_constraint" and dim.facts.names == ("batch",)
    assert dim.facts.number("specialized_to") == 4


def test_torchscript_answers_name_what_the_message_names() -> None:
    _, builtin = _first_rule(_corpus("compile/ts_python_builtin_next_captured.txt"))
    assert builtin.rule == "compile.torchscript_builtin" and builtin.facts.call == "next"
    _, arg = _first_rule(_corpus("compile/ts_expected_value_type_int_captured.txt"))
    assert arg.rule == "compile.torchscript_arg_type" and arg.facts.argument == "n"
    assert "n: int" in (arg.fixes[0].code or "")
    _, loaded = _first_rule(_corpus("compile/ts_unknown_builtin_op_jit_load.txt"))
    assert loaded.rule == "compile.torchscript_op_on_load" and loaded.facts.names[0] == "aten::scaled_dot_product_attention"


def test_state_dict_facts_carry_keys_and_shapes() -> None:
    _, renamed = _first_rule(_corpus("io/state_dict_renamed_layer_captured.txt"))
    assert renamed.rule == "io.state_dict"
    assert {"backbone.weight", "encoder.weight"} <= set(renamed.facts.names)
    _, head = _first_rule(_capture("finetune-head-size-mismatch")["stderr"])
    assert head.rule == "io.state_dict_head_size" and head.facts.shapes and len(head.facts.shapes) % 2 == 0
    stripped = next(r for r in REALWORLD if r["id"] == "rrl-bad-prefix-strip")
    _, found = _first_rule(stripped["error_text"])
    assert found.rule == "io.state_dict_stripped" and found.facts.number("stripped_chars") == 7


def test_weights_only_allowlists_the_blocked_global() -> None:
    _, found = _first_rule(_corpus("io/weights_only_unsupported_global_hparams.txt"))
    assert found.rule == "io.weights_only" and found.facts.names == ("utils.HParams",)
    assert "add_safe_globals([HParams])" in (found.fixes[0].code or "")
    assert any("weights_only=False" in (f.code or "") for f in found.fixes)


def test_env_binary_rows_and_module_kinds_are_distinct_answers() -> None:
    assert _first_rule(_corpus("env/libcudnn_so_missing.txt"))[1].rule == "env.shared_library"
    assert _first_rule(_corpus("env/glibcxx_not_found.txt"))[1].rule == "env.glibc"
    assert _first_rule(_corpus("env/torch_six_removed.txt"))[1].rule == "env.torch_submodule_missing"
    _, cv2 = _first_rule(_corpus("env/module_not_found_cv2_captured.txt"))
    assert cv2.rule == "env.module_not_found" and "opencv-python" in (cv2.fixes[0].code or "")


def test_python_builtin_variants_name_the_culprit() -> None:
    _, name = _first_rule(_corpus("python/nameerror_undefined_criterion_captured.txt"))
    assert name.rule == "python.name_error" and name.facts.names == ("criterion",)
    _, wrapper = _first_rule(_corpus("python/dataparallel_attribute_captured.txt"))
    assert wrapper.rule == "python.wrapper_attribute" and "model.module.predict" in (wrapper.fixes[0].code or "")


def test_mps_oom_quotes_the_message_figures() -> None:
    hit = _corpus_hit("corpus/memory/mps_oom_backward.txt")
    assert hit.rule == "memory.mps_oom" and hit.facts.devices == ("mps",)
    assert "14.76 GB" in hit.cause and "20.40 GB" in hit.cause and "other allocations" in hit.cause
    assert not any("expandable_segments" in (f.code or "") for f in hit.fixes)


def test_prose_oom_at_batch_size_one_without_cuda_wording() -> None:
    hit = _corpus_hit("corpus/memory/oom_batch1_prose_vram_chinese.txt")
    assert hit.rule == "memory.cuda_oom_batch_one" and hit.category == "cuda_oom"


def test_unknown_error_at_first_cuda_call_is_an_environment_problem() -> None:
    start = _corpus_hit("corpus/cuda/unknown_error_first_cuda_tensor.txt")
    assert start.rule == "cuda.unknown_error_at_start" and start.category == "cuda_unavailable"
    mid = _corpus_hit("corpus/cuda/unknown_error_mid_training.txt")
    assert mid.rule == "cuda.hardware_unknown_error" and mid.category == "hardware_error"


def test_nccl_unique_id_wait_names_both_ranks() -> None:
    hit = _corpus_hit("corpus/distributed/nccl_unique_id_socket_timeout.txt")
    assert hit.rule == "distributed.nccl_unique_id" and hit.facts.names == ("rank 2", "rank 0")
    assert "rank 0" in hit.cause.lower() and "Socket Timeout" in hit.cause
