"""Families tuned on the dev_fresh3 reports (tuner e): each reader behaviour on real texts.

Texts are corpus files (a real torch 2.13 CPU run or a public report with its URL) or dev reports.
The assertions check the family's story and where its remedy ranks, not one report's wording.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from assistant import diagnose
from assistant.eval.examples import example_text
from assistant.types import Diagnosis

_DEV3 = Path(__file__).resolve().parents[1] / "eval" / "realworld" / "dev_fresh3.jsonl"


def _dev3(ident: str) -> str:
    for line in _DEV3.read_text(encoding="utf-8").splitlines():
        report = json.loads(line)
        if report["id"] == ident:
            return str(report["error_text"])
    pytest.skip(f"dev report {ident} not present")
    return ""


def _fixes(d: Diagnosis) -> str:
    return " ".join(f"{f.title} {f.detail} {f.code or ''}" for f in d.fixes)


# -- a Dataset method returning the wrong type, raised in torch.utils.data ---------------------


@pytest.mark.parametrize("name", ["data/dataset_len_float_sampler_captured.txt", "data/dataset_len_float_random_sampler_captured.txt"])
def test_len_returning_float_is_a_dataset_bug(name: str) -> None:
    d = diagnose(example_text(f"corpus/{name}"))
    assert (d.category, d.rule) == ("dataloader_error", "data.len_wrong_type")
    assert "__len__" in d.cause and "float" in d.cause
    assert "int" in d.fixes[0].title and "__len__" in d.fixes[0].title


def test_len_float_from_an_old_python_sampler_frame() -> None:
    d = diagnose(_dev3("f3c-dataset-len-returns-float-sampler"))
    assert d.category == "dataloader_error"
    assert re.search(r"__len__", d.fixes[0].title)


def test_a_float_in_user_code_is_not_a_dataset_bug() -> None:
    text = ('Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n    for i in range(n / 2):\n'
            "TypeError: 'float' object cannot be interpreted as an integer")
    assert diagnose(text).rule != "data.len_wrong_type"


# -- item()/float() on a tensor of several elements ------------------------------------------------


@pytest.mark.parametrize("name", ["python/item_multi_element_loss_captured.txt", "python/float_multi_element_tensor_captured.txt"])
def test_multi_element_to_scalar_reduces_first(name: str) -> None:
    d = diagnose(example_text(f"corpus/{name}"))
    assert (d.category, d.rule) == ("python_error", "python.tensor_to_scalar")
    assert ".mean()" in _fixes(d) and d.fixes[0].title.startswith("Reduce")


def test_multi_element_loss_names_dataparallel_when_the_text_does() -> None:
    d = diagnose(example_text("corpus/python/item_multi_element_loss_captured.txt")
                 + "\nThe model is wrapped in nn.DataParallel on 2 GPUs.")
    assert "one value per GPU" in d.cause


# -- 'NoneType' object is not callable after `x = x.method()` ---------------------------------------


def test_none_not_callable_points_at_reassignment_from_in_place_method() -> None:
    d = diagnose(_dev3("f3c-model-eval-reassign-none-not-callable"))
    assert d.category == "python_error"
    assert "return self" in d.fixes[0].title
    assert "model.eval()" in (d.fixes[0].code or "")


def test_none_not_callable_reassignment_in_the_text() -> None:
    text = ("model = model.eval()\n"
            'Traceback (most recent call last):\n  File "val.py", line 9, in <module>\n    out = model(x)\n'
            "TypeError: 'NoneType' object is not callable")
    d = diagnose(text)
    assert "`model`" in d.cause and "return self" in d.fixes[0].title


# -- host RAM growing with many DataLoader workers -------------------------------------------------


def test_host_ram_growth_with_workers_ranks_fewer_workers_first() -> None:
    d = diagnose("During training the CPU memory keeps increasing and the machine is killed after a day. "
                 "I use num_workers=32 in the DataLoader.")
    assert (d.category, d.rule) == ("cpu_oom", "memory.cpu_oom_growth")
    assert "workers" in d.fixes[0].title and "num_workers" in d.fixes[0].detail


def test_host_ram_growth_dev_report() -> None:
    d = diagnose(_dev3("f3b-pasd-cpu-ram-explodes-workers"))
    assert d.category == "cpu_oom" and "workers" in d.fixes[0].title


def test_host_ram_growth_without_workers_keeps_accumulation_first() -> None:
    d = diagnose(example_text("corpus/memory/host_ram_growth_prose_killed.txt"))
    assert d.rule == "memory.cpu_oom_growth"
    assert not d.fixes[0].title.startswith("Use fewer workers")


# -- DataParallel/DDP `module.` prefix described in words ------------------------------------------


@pytest.mark.parametrize("name", ["distributed/state_dict_module_prefix_prose_posenet.txt", "distributed/state_dict_module_prefix_prose_reload.txt"])
def test_module_prefix_described_in_prose(name: str) -> None:
    d = diagnose(example_text(f"corpus/{name}"))
    assert (d.category, d.rule) == ("state_dict_loading", "distributed.wrapper_prefix_described")
    assert "module." in d.fixes[0].title and "DataParallel" in d.cause


def test_module_prefix_dev_report() -> None:
    d = diagnose(_dev3("f3b-dorn-module-prefix-single-gpu"))
    assert d.category == "state_dict_loading" and "module." in d.fixes[0].title


# -- Address already in use beside an NCCL error ----------------------------------------------------


def test_address_in_use_with_nccl_error_is_the_port() -> None:
    d = diagnose(_dev3("f3a-accelerate-two-jobs-address-in-use"))
    assert (d.category, d.rule) == ("ddp_error", "distributed.port_in_use")
    assert "port" in d.fixes[0].title.lower()
    assert "--main_process_port" in (d.fixes[0].code or "") and "MASTER_PORT" in (d.fixes[0].code or "")


def test_plain_port_in_use_unchanged() -> None:
    d = diagnose(example_text("corpus/distributed/port_in_use_tcpstore_2_13.txt"))
    assert d.rule == "distributed.port_in_use"


# -- out of memory with repeated backward(retain_graph=True) --------------------------------------


def test_oom_described_with_retain_graph() -> None:
    d = diagnose(_dev3("f3a-retain-graph-layerwise-kd-oom"))
    assert d.category == "cuda_oom"
    assert "autograd.grad" in _fixes(d) and "retain_graph" in d.cause


def test_oom_traceback_through_torch_backward_is_not_retain_graph() -> None:
    text = ("THCudaCheck FAIL file=/pytorch/torch/lib/THC/generic/THCStorage.cu line=58 error=2 : out of memory\n"
            'Traceback (most recent call last):\n  File "main.py", line 357, in train\n    loss.backward()\n'
            '  File "/usr/lib/python2.7/site-packages/torch/autograd/__init__.py", line 99, in backward\n    variables, grad_variables, retain_graph)\n'
            "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/torch/lib/THC/generic/THCStorage.cu:58")
    d = diagnose(text)
    assert d.category == "cuda_oom" and "retain_graph" not in d.title
