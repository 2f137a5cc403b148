"""Families tuned on the dev_fresh10 reports (tuner f10b), read from real texts.

Every text is a report of a dev split, read by id.
"""

from __future__ import annotations

from assistant.parse import parse_failure
from tuned_support import dev_reader, dev_report, fix_text, hit_of

report = dev_reader("dev_fresh10")


def test_cudnn_not_supported_past_a_size_threshold_leads_with_the_element_limit() -> None:
    found = hit_of(report("f10d-conv3d-cudnn-2pow31-elements"))
    assert found.category == "cudnn_error"
    first = fix_text(found.fixes[:1])
    assert "2**31 elements" in first and "chunks" in first
    assert "2**31" in found.cause


def test_cudnn_not_supported_with_a_smaller_batch_working_offers_the_element_limit() -> None:
    found = hit_of(dev_report("dev_fresh", "neuronblocks-cudnn-not-supported-batch128"))
    assert "2**31 elements" in fix_text(found.fixes)
    assert "batch size" in fix_text(found.fixes)


def test_cudnn_not_supported_without_a_size_threshold_keeps_the_usual_fixes() -> None:
    for part, rid in (("dev_fresh5", "f5c-convtranspose3d-cudnn-not-supported"), ("dev", "dpgn-cudnn-not-supported-cudatoolkit")):
        found = hit_of(dev_report(part, rid))
        assert found.category == "cudnn_error"
        assert "2**31 elements" not in fix_text(found.fixes)


def test_undefined_symbol_after_installing_from_a_torch_version_index_names_that_version() -> None:
    found = hit_of(report("f10c-scatter-wheel-wrong-torch-minor"))
    assert found.category == "environment_error"
    first = found.fixes[0]
    assert "wheel index for the installed torch version" in first.title
    assert "1.9.1" in first.detail and "torch_scatter" in (first.code or "")


def test_undefined_symbol_without_an_index_in_the_text_keeps_the_reinstall_fixes() -> None:
    found = hit_of(dev_report("dev", "extcpp-undefined-symbol-parseschema"))
    assert found.category == "environment_error"
    assert "wheel index for the installed torch version" not in fix_text(found.fixes)


def test_old_wording_of_the_cat_size_error_is_read_as_a_skip_connection_off_by_one() -> None:
    found = hit_of(report("f10d-monai-unet-odd-spatial-size"))
    assert found.category == "shape_mismatch"
    assert "dimension 4" in found.cause and "differ by one" in found.cause
    text = fix_text(found.fixes)
    assert "divisible" in text and "Pad or crop" in text


def test_new_wording_of_the_cat_size_error_still_names_the_tensor_in_the_list() -> None:
    found = hit_of(dev_report("dev_fresh5", "f5b-pix2pix-640x480-unet-cat-size"))
    assert found.category == "shape_mismatch"
    assert "torch.cat" in found.cause


def test_collapsed_notebook_traceback_takes_its_message_from_the_error_line_pasted_above() -> None:
    text = report("f10c-riffusion-hfhub-cached-download-removed")
    failure = parse_failure(text)
    assert failure.exc_type == "ImportError"
    assert failure.message.startswith("cannot import name 'cached_download' from 'huggingface_hub'")
    found = hit_of(text)
    assert found.category == "environment_error"
    assert "huggingface_hub==" in fix_text(found.fixes)
