"""Breadth families (helper g): torch.vmap / torch.func transform errors.

Every text is real: printed by torch 2.13 on CPU on this machine.
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


def _frame(line: str) -> str:
    return ("Traceback (most recent call last):\n"
            '  File "/work/v.py", line 3, in <module>\n'
            "    out = torch.vmap(f)(x)\n" + line)


# torch 2.13: torch.vmap(lambda x: x.item())(torch.randn(3))
VMAP_ITEM = _frame("RuntimeError: vmap: It looks like you're calling .item() on a Tensor. We don't support vmap over "
                   "calling .item() on a Tensor, please try to rewrite what you're doing with other operations. If error "
                   "is occurring somewhere inside PyTorch internals, please file a bug report.")
# torch 2.13: an if on x.sum() > 0 inside the vmapped function.
VMAP_CONTROL_FLOW = _frame("RuntimeError: vmap: It looks like you're attempting to use a Tensor in some data-dependent "
                           "control flow. We don't support that yet, please file an issue at "
                           "https://github.com/pytorch/pytorch/issues .")
# torch 2.13: torch.rand inside the vmapped function, default randomness.
VMAP_RANDOM = _frame("RuntimeError: vmap: called random operation while in randomness error mode. Please either use the "
                     "'same' or 'different' randomness flags on vmap or perform the randomness operation out of vmap")
# torch 2.13: torch.zeros(2).copy_(x) inside the vmapped function.
VMAP_INPLACE = _frame("RuntimeError: vmap: inplace arithmetic(self, *extra_args) is not possible because there exists a "
                      "Tensor `other` in extra_args that has more elements than `self`. This happened due to `other` being "
                      "vmapped over but `self` not being vmapped over in a vmap. Please try to use out-of-place operators "
                      "instead of inplace arithmetic. If said operator is being called inside the PyTorch framework, please "
                      "file a bug report instead.")
# torch 2.13: x[x > 0] inside the vmapped function.
VMAP_MASK = _frame("RuntimeError: vmap: We do not support batching operators that can support dynamic shape. Attempting "
                   "to batch over indexing with a boolean mask.")


@pytest.mark.parametrize(("text", "fix"), [
    (VMAP_ITEM, "Index with tensor operations"),
    (VMAP_CONTROL_FLOW, "torch.where"),
    (VMAP_MASK, "torch.where"),
    (VMAP_RANDOM, "randomness mode"),
    (VMAP_INPLACE, "out-of-place"),
])
def test_vmap_refusals_name_the_transform_family_and_its_rewrite(engine: Engine, text: str, fix: str) -> None:
    d = engine.diagnose(text)
    assert d.category == "python_error"
    assert "vmap-func-transforms" in {s.id for s in d.sources}
    assert fix in _titles(d)


def test_vmap_randomness_refusal_leads_with_the_randomness_flag(engine: Engine) -> None:
    d = engine.diagnose(VMAP_RANDOM)
    assert "randomness mode" in d.fixes[0].title


# torch 2.13: StepLR given the model instead of its optimizer.
SCHEDULER_NOT_AN_OPTIMIZER = """Traceback (most recent call last):
  File "/work/s.py", line 4, in <module>
    scheduler = torch.optim.lr_scheduler.StepLR(model, 1)
  File "/work/venv/lib/python3.11/site-packages/torch/optim/lr_scheduler.py", line 1234, in __init__
    super().__init__(optimizer, last_epoch)
  File "/work/venv/lib/python3.11/site-packages/torch/optim/lr_scheduler.py", line 130, in __init__
    raise TypeError(f"{type(optimizer).__name__} is not an Optimizer")
TypeError: Linear is not an Optimizer"""
# torch 2.13: MultiplicativeLR given a number for lr_lambda.
SCHEDULER_LAMBDA_NUMBER = """Traceback (most recent call last):
  File "/work/s.py", line 3, in <module>
    scheduler = torch.optim.lr_scheduler.MultiplicativeLR(optimizer, 0.95)
  File "/work/venv/lib/python3.11/site-packages/torch/optim/lr_scheduler.py", line 512, in __init__
    raise TypeError(
TypeError: lr_lambda should be a function, but got float"""


@pytest.mark.parametrize("text", [SCHEDULER_NOT_AN_OPTIMIZER, SCHEDULER_LAMBDA_NUMBER])
def test_scheduler_type_checks_go_to_the_scheduler_family_not_the_generic_type_error(engine: Engine, text: str) -> None:
    d = engine.diagnose(text)
    assert d.category == "python_error"
    assert "lr-scheduler-errors" in {s.id for s in d.sources}
    assert "real torch optimizer" in d.fixes[0].title


def test_plain_type_errors_in_user_code_keep_the_generic_reading(engine: Engine) -> None:
    # Python's own message for a wrong argument count: no PyTorch document signs it.
    d = engine.diagnose('Traceback (most recent call last):\n  File "/work/t.py", line 2, in <module>\n    f(1, 2)\n'
                        "TypeError: f() takes 1 positional argument but 2 were given")
    assert d.category == "python_error"
    assert "lr-scheduler-errors" not in {s.id for s in d.sources[:1]}


# torch 2.13: nn.AdaptiveAvgPool2d((2, 2)) on a 1-D tensor; nn.AvgPool1d(2) on a 1-D tensor.
POOL_RANK_ADAPTIVE = """Traceback (most recent call last):
  File "/work/p.py", line 4, in <module>
    y = pool(x)
  File "/work/venv/lib/python3.11/site-packages/torch/nn/functional.py", line 1380, in adaptive_avg_pool2d
    _output_size = _list_with_default(output_size, input.size())
ValueError: Input dimension should be at least 3"""
POOL_RANK_1D = ("RuntimeError: Expected 2 to 3 dimensions, but got 1-dimensional tensor for argument #1 'self' "
                "(while checking arguments for avg_pool1d)")


@pytest.mark.parametrize("text", [POOL_RANK_ADAPTIVE, POOL_RANK_1D])
def test_pooling_on_too_few_dimensions_is_a_pooling_rank_error(engine: Engine, text: str) -> None:
    d = engine.diagnose(text)
    assert d.category == "shape_mismatch"
    assert d.sources[0].id == "pooling-output-size"
    assert "unsqueeze" in " ".join((f.detail or "") + (f.code or "") for f in d.fixes)


# torch 2.13: nn.ReLU(inplace=True) with a full backward hook registered on it.
BACKWARD_HOOK_INPLACE = """Traceback (most recent call last):
  File "/work/h.py", line 6, in <module>
    out = model(x)
RuntimeError: Output 0 of BackwardHookFunction is a view and is being modified inplace. This view was created inside a \
custom Function (or because an input was returned as-is) and the autograd logic to handle view+inplace would override the \
custom backward associated with the custom Function, leading to incorrect gradients. This behavior is forbidden. You can fix \
this by cloning the output of the custom Function."""


def test_full_backward_hook_before_an_inplace_layer_offers_turning_inplace_off(engine: Engine) -> None:
    d = engine.diagnose(BACKWARD_HOOK_INPLACE)
    assert d.category == "inplace_autograd"
    assert "leaf-inplace" in {s.id for s in d.sources}
    titles = _titles(d)
    assert "Turn off in-place activations" in titles or "tensor hook instead of a module backward hook" in titles


# torch 2.13: a tensor hook returning torch.zeros(3) for a gradient of shape [2]; a full backward hook
# returning two grad_input entries for a module with one input.
HOOK_SIZE = 'Traceback (most recent call last):\n  File "/work/h.py", line 4, in <module>\n    y.sum().backward()\n' \
            "RuntimeError: hook '<lambda>' has changed the size of value"
HOOK_COUNT = "RuntimeError: Backward hook returned an invalid number of grad_input, got 2, but expected 1"


@pytest.mark.parametrize("text", [HOOK_SIZE, HOOK_COUNT])
def test_gradient_hook_returning_a_different_shape_is_named_as_the_hook(engine: Engine, text: str) -> None:
    d = engine.diagnose(text)
    assert d.category == "shape_mismatch"
    assert "custom-function-invalid-gradient" in {s.id for s in d.sources}
    assert "shaped like the one the hook received" in d.fixes[0].title
