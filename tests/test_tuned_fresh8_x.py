"""Families tuned on the dev_fresh8 reports (tuner f8x), read from real texts.

Every text is real: a report of the dev_fresh8 split or a message printed by torch 2.13 on this machine.
"""

from __future__ import annotations

from tuned_support import dev_report, fix_text, hit_of


def _first(fixes) -> str:  # type: ignore[no-untyped-def]
    return fix_text(fixes[:1])


def test_undefined_symbol_without_a_space_after_the_library_still_names_the_package() -> None:
    found = hit_of(dev_report("dev_fresh8", "f8b-mmdet-mmcv-ext-undefined-symbol-fromqualstring"))
    assert found.category == "environment_error"
    assert "mmcv" in _first(found.fixes)


def test_error_loading_a_dll_without_the_winerror_code_is_a_windows_dll_failure() -> None:
    found = hit_of(dev_report("dev_fresh8", "f8a-fbgemm-dll-vcredist"))
    assert found.category == "environment_error"
    assert "fbgemm.dll" in found.title
    assert "Visual C++ Redistributable" in fix_text(found.fixes)


def test_import_error_rewrapped_by_a_lazy_import_is_read_as_the_missing_module() -> None:
    found = hit_of(dev_report("dev_fresh8", "f8b-alpaca-lora-torch2-six-import"))
    assert found.category == "environment_error"
    assert "torch._six" in found.title
    assert "torch._six" in fix_text(found.fixes)


def test_other_runtime_errors_are_not_read_as_import_failures() -> None:
    # Printed by torch 2.13: torch.stack on tensors of different sizes.
    found = hit_of("RuntimeError: stack expects each tensor to be equal size, but got [3] at entry 0 and [4] at entry 1")
    assert found.category == "shape_mismatch"


def test_timm_configuration_keyword_rejected_is_a_timm_release_mismatch() -> None:
    found = hit_of(dev_report("dev_fresh8", "f8b-detic-timm-default-cfg-version"))
    assert found.category == "environment_error"
    first = _first(found.fixes)
    assert "timm" in first and "install" in first


def test_keyword_forwarded_by_timm_create_model_asks_the_constructor_to_accept_it() -> None:
    found = hit_of(dev_report("dev_fresh8", "f8b-mae-timm-create-model-num-classes-kwarg"))
    assert found.category == "python_error"
    assert "**kwargs" in _first(found.fixes)


def test_unexpected_keyword_outside_timm_keeps_the_plain_reading() -> None:
    # Printed by torch 2.13: nn.Linear(4, 2, foo=1).
    found = hit_of("TypeError: Linear.__init__() got an unexpected keyword argument 'foo'")
    assert found.category == "python_error"
    assert "timm" not in fix_text(found.fixes)


def test_bare_stack_of_images_of_different_sizes_is_the_dataloader_collate() -> None:
    found = hit_of(dev_report("dev_fresh8", "f8a-collate-stack-different-image-sizes"))
    assert found.category == "dataloader_error"
    assert "fixed size" in _first(found.fixes)


def test_diffusion_training_out_of_memory_offers_memory_efficient_attention() -> None:
    found = hit_of(dev_report("dev_fresh8", "f8b-diffusers-dreambooth-altdiffusion-oom"))
    assert found.category == "cuda_oom"
    assert "xformers" in fix_text(found.fixes[:3])


def test_plain_out_of_memory_message_does_not_offer_attention_kernels() -> None:
    found = hit_of(dev_report("dev_fresh8", "f8b-kohya-lora-started-dreambooth-oom"))
    assert found.category == "cuda_oom"
    assert "xformers" not in fix_text(found.fixes)


def test_nccl_network_error_with_a_pinned_interface_checks_that_interface_first() -> None:
    found = hit_of(dev_report("dev_fresh8", "f8b-deepspeed-multinode-nccl-wrong-ifname"))
    assert found.category == "nccl_error"
    first = _first(found.fixes)
    assert "NCCL_SOCKET_IFNAME" in first and "ip -brief addr" in first


def test_nccl_network_error_without_a_pinned_interface_keeps_its_first_fix() -> None:
    # The error line of the dev report f8b-deepspeed-multinode-nccl-wrong-ifname, without the report's settings around it.
    found = hit_of("torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333, "
                   "remote process exited or there was a network error, NCCL version 2.18.6")
    assert "ip -brief addr" not in _first(found.fixes)


def test_device_mismatch_under_cpu_offloading_that_worked_at_an_earlier_commit_pins_that_version() -> None:
    found = hit_of(dev_report("dev_fresh8", "f8b-diffusers-flux-seq-offload-regression"))
    assert found.category == "device_mismatch"
    assert "worked" in _first(found.fixes) and "pin" in _first(found.fixes)
    assert "offloading" in fix_text(found.fixes[1:2])


def test_device_mismatch_without_offloading_keeps_the_plain_reading() -> None:
    # The error line of the dev report f8b-diffusers-flux-seq-offload-regression, without the report's words around it.
    found = hit_of("RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!")
    assert "worked" not in fix_text(found.fixes) and "offloading" not in fix_text(found.fixes)
