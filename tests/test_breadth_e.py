"""Breadth families (helper e): quantized-op dispatch, library refusals a built-in exception carries, meta-device
models, quantized checkpoints.

Every text is real: printed by torch 2.13 on CPU on this machine, or a library's own message as it raises it.
"""

from __future__ import annotations

import pytest

from assistant.engine import Engine
from assistant.settings import load_settings


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Engine:
    home = tmp_path_factory.mktemp("home")
    return Engine(load_settings(env={"TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0"}, llm="none"))


def _titles(d) -> str:  # type: ignore[no-untyped-def]
    return " ".join(f.title for f in d.fixes)


# torch 2.13: a model converted with prepare/convert, called without a QuantStub.
QUANTIZED_LINEAR_ON_FLOAT = """Traceback (most recent call last):
  File "/work/q.py", line 5, in <module>
    c(torch.randn(3,2))
  File "/work/venv/lib/python3.11/site-packages/torch/ao/nn/quantized/modules/linear.py", line 175, in forward
    return torch.ops.quantized.linear(
NotImplementedError: Could not run 'quantized::linear' with arguments from the 'CPU' backend. This could be because the operator doesn't exist for this backend, or was omitted during the selective/custom build process (if using custom build)."""


def test_quantized_op_given_a_float_tensor_is_a_quantization_error(engine: Engine) -> None:
    d = engine.diagnose(QUANTIZED_LINEAR_ON_FLOAT)
    assert d.category == "dtype_mismatch"
    assert "quantization-backend-errors" in {s.id for s in d.sources}
    assert "QuantStub" in _titles(d)


# transformers' own refusal, raised as a ValueError, for a bitsandbytes model moved after loading.
BNB_TO = """Traceback (most recent call last):
  File "/home/u/run.py", line 12, in <module>
    model.to("cuda")
  File "/usr/lib/python3.10/site-packages/transformers/modeling_utils.py", line 2460, in to
    raise ValueError(
ValueError: `.to` is not supported for `4-bit` or `8-bit` bitsandbytes models. Please use the model as it is, since the model has already been set to the correct devices and casted to the correct `dtype`."""


def test_a_library_refusal_raised_as_value_error_is_answered_by_its_document(engine: Engine) -> None:
    d = engine.diagnose(BNB_TO)
    assert d.category == "device_mismatch"
    assert "bitsandbytes-quantized-models" in {s.id for s in d.sources}
    assert "from_pretrained" in _titles(d)


# torch 2.13: FSDP1 wrapping frozen and trainable parameters together (the message of flat_param.py).
FSDP_REQUIRES_GRAD = "ValueError: Must flatten tensors with uniform `requires_grad` when `use_orig_params=False`"


def test_fsdp_uniform_requires_grad_value_error_is_a_distributed_error(engine: Engine) -> None:
    d = engine.diagnose(FSDP_REQUIRES_GRAD)
    assert d.category == "ddp_error"
    assert "use_orig_params" in _titles(d)


# torch 2.13: a Linear built under torch.device("meta"), then .to("cpu").
META_TO = """Traceback (most recent call last):
  File "<string>", line 5, in <module>
  File "/work/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1376, in convert
    raise NotImplementedError(
NotImplementedError: Cannot copy out of meta tensor; no data! Please use torch.nn.Module.to_empty() instead of torch.nn.Module.to() when moving module from meta to a different device."""


def test_moving_a_meta_model_with_to_names_to_empty(engine: Engine) -> None:
    d = engine.diagnose(META_TO)
    assert d.category == "device_mismatch"
    assert "meta-device-materialise" in {s.id for s in d.sources}
    assert "to_empty" in _titles(d)


def test_item_on_a_meta_tensor_is_the_meta_device_family(engine: Engine) -> None:
    d = engine.diagnose("RuntimeError: Tensor.item() cannot be called on meta tensors")
    assert d.category == "device_mismatch"
    assert "meta-device-materialise" in {s.id for s in d.sources}


# torch 2.13: copy_ of a quantized tensor into a float one (what load_state_dict does with a quantized checkpoint).
QUANTIZED_COPY = ("RuntimeError: Copying from quantized Tensor to non-quantized Tensor is not allowed, please use dequantize "
                  "to get a float Tensor from a quantized Tensor")


def test_quantized_tensor_copied_into_a_float_model_is_a_checkpoint_loading_error(engine: Engine) -> None:
    d = engine.diagnose(QUANTIZED_COPY)
    assert d.category == "state_dict_loading"
    assert "quantized-checkpoint-loading" in {s.id for s in d.sources}


# Triton's own message (triton/runtime/build.py) as inductor re-raises it on a machine without gcc.
TRITON_NO_CC = """Traceback (most recent call last):
  File "/app/train.py", line 40, in <module>
    loss = model(x).sum()
torch._inductor.exc.InductorError: RuntimeError: Failed to find C compiler. Please specify via CC environment variable or set triton.knobs.build.impl."""


def test_triton_launcher_without_a_c_compiler_under_inductor_names_the_compiler(engine: Engine) -> None:
    d = engine.diagnose(TRITON_NO_CC)
    assert d.category == "compile_error"
    assert "triton-launcher-build" in {s.id for s in d.sources}
    assert "C compiler" in d.fixes[0].title


# torch's own TORCH_CHECK (ProcessGroup backend lookup) for a CPU tensor broadcast over an NCCL-only group.
NO_BACKEND_FOR_CPU = """  File "/usr/lib/python3.10/site-packages/torch/distributed/distributed_c10d.py", line 2726, in broadcast
    work = group.broadcast([tensor], opts)
RuntimeError: No backend type associated with device type cpu"""


def test_cpu_tensor_on_a_gpu_only_group_names_the_device_and_mixed_backends(engine: Engine) -> None:
    d = engine.diagnose(NO_BACKEND_FOR_CPU)
    assert d.category == "ddp_error"
    assert "backend-device-type" in {s.id for s in d.sources}
    assert "device" in d.fixes[0].title


# DeepSpeed's own assertion (deepspeed/comm/comm.py) when its communication layer is used before set-up.
DEEPSPEED_COMM_UNSET = "AssertionError: DeepSpeed backend not set, please initialize it using init_process_group()"


def test_deepspeed_backend_not_set_asks_for_deepspeed_distributed_setup(engine: Engine) -> None:
    d = engine.diagnose(DEEPSPEED_COMM_UNSET)
    assert d.category == "ddp_error"
    assert "deepspeed-config-validation" in {s.id for s in d.sources}
    assert "init_distributed" in " ".join(f"{f.title} {f.detail} {f.code or ''}" for f in d.fixes[:2])


# torch's own check (throwNullDataPtrError) as Dynamo wraps it when tracing reaches an extension kernel.
FAKE_DATA_PTR = (
    "torch._dynamo.exc.TorchRuntimeError: Dynamo failed to run FX node with fake tensors: call_function <built-in method "
    "fused_forward of PyCapsule object>(*(FakeTensor(..., device='cuda:0', size=(2, 8)),), **{}): got RuntimeError('Cannot "
    "access data pointer of Tensor (e.g. FakeTensor, FunctionalTensor). If you're using torch.compile/export/fx, it is likely "
    "that we are erroneously tracing into a custom kernel. To fix this, please wrap the custom kernel into an opaque custom op.')"
)


def test_tracing_into_a_custom_kernel_asks_for_a_custom_op(engine: Engine) -> None:
    d = engine.diagnose(FAKE_DATA_PTR)
    assert d.category == "compile_error"
    assert "compile-custom-kernel-fake-tensor" in {s.id for s in d.sources}
    assert "custom op" in d.fixes[0].title


def test_item_under_fake_tensors_is_the_item_graph_break_family(engine: Engine) -> None:
    d = engine.diagnose("torch._subclasses.fake_tensor.UnsupportedOperatorException: aten._local_scalar_dense.default")
    assert d.category == "compile_error"
    assert "dynamo-graph-break-constructs" in {s.id for s in d.sources}


# The loader's own refusal (transformers / optimum GPTQ integration) when device_map put layers on cpu or disk.
GPTQ_EXLLAMA_OFFLOAD = ("ValueError: Found modules on cpu/disk. Using Exllama or Exllamav2 backend requires all the modules to be "
                        "on GPU.You can deactivate exllama backend by setting `disable_exllama=True` in the quantization config object")


def test_gptq_exllama_with_offloaded_layers_names_the_two_ways_out(engine: Engine) -> None:
    d = engine.diagnose(GPTQ_EXLLAMA_OFFLOAD)
    assert d.category == "device_mismatch"
    assert "gptq-exllama-offload" in {s.id for s in d.sources}
    titles = _titles(d)
    assert "Exllama" in titles and "GPU" in titles


# transformers' own check in save_pretrained (the quantizer says the weights cannot be written).
BNB_NOT_SERIALIZABLE = ("ValueError: The model is quantized with QuantizationMethod.BITS_AND_BYTES and is not serializable - check "
                        "out the warnings from the logger on the traceback to understand the reason why the quantized model is not "
                        "serializable.")


def test_saving_a_quantized_model_that_cannot_be_serialised_asks_for_newer_releases(engine: Engine) -> None:
    d = engine.diagnose(BNB_NOT_SERIALIZABLE)
    assert d.category == "environment_error"
    assert "bitsandbytes-save-quantized" in {s.id for s in d.sources}
    assert "Upgrade" in d.fixes[0].title


def test_skipping_cudagraphs_leads_with_removing_the_capture_blocker(engine: Engine) -> None:
    # Inductor's own log line when reduce-overhead cannot capture the graph.
    d = engine.diagnose("skipping cudagraphs due to mutated inputs (2 instances). Found from :")
    assert d.category == "compile_error"
    assert d.fixes[0].title == "Remove what blocks capture"


# torch 2.13 on CPU: torch.export.export(M(), (torch.randn(4, 3),), dynamic_shapes={"y": {0: Dim("b")}}) where forward(self, x).
EXPORT_SPEC_KEYS = ("torch._dynamo.exc.UserError: When `dynamic_shapes` is specified as a dict, its top-level keys must be the arg "
                    "names ['x'] of `inputs`, but here they are ['y']. Alternatively, you could also ignore arg names entirely and "
                    "specify `dynamic_shapes` as a list/tuple matching `inputs`. For more information about this error, see: "
                    "https://pytorch.org/docs/main/generated/exportdb/index.html#dynamic-shapes-validation")

# torch 2.13 on CPU: dynamic_shapes=([Dim("b")],) for a 2-D input.
EXPORT_SPEC_LENGTH = ("torch._dynamo.exc.UserError: Expected dynamic shape spec [Dim('b', min=0)] specified at `dynamic_shapes[0]` "
                      "to have the same length as the actual tensor shape torch.Size([4, 3]) (expected 2, but got 1 instead)")


@pytest.mark.parametrize("text", [EXPORT_SPEC_KEYS, EXPORT_SPEC_LENGTH])
def test_dynamic_shapes_that_do_not_match_the_inputs_are_their_own_family(engine: Engine, text: str) -> None:
    d = engine.diagnose(text)
    assert d.category == "compile_error"
    assert "export-dynamic-shapes-spec" in {s.id for s in d.sources}
    assert "spec" in _titles(d)
