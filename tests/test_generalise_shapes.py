"""Family-level behaviour of the shape, index, device, collate and plain-Python rules on real texts.

Every text is a real one: a corpus file copied from a public report (its `# source:` URL in the file) or
captured from a real torch run (`# captured:`), or a captured case of eval/captured.
"""

from __future__ import annotations

import re

import pytest

from assistant import rules
from assistant.eval.examples import example_text
from assistant.parse import parse_failure
from assistant.types import RuleHit


def _hit(source: str) -> RuleHit:
    found = rules.match(parse_failure(example_text(source))).hit
    assert found is not None, source
    return found


def _fixes(h: RuleHit) -> str:
    return " ".join(f"{f.title} {f.detail} {f.code or ''}" for f in h.fixes)


# --- 1. view/reshape: never state one factorisation of the element count as fact -----------------------------------

def test_reshape_with_two_readings_names_both_and_states_neither() -> None:
    # [1000, 1024, 1] for 8192000 elements: 1000 rows of 8192 or 8000 rows of 1024 both divide.
    h = _hit("corpus/shapes/reshape_per_sample_resolution_fno.txt")
    assert h.rule == "shapes.view_ambiguous"
    assert "8192" in h.cause and "8000" in h.cause
    assert "does not tell" in h.cause
    assert not re.search(r"hard-coded to 1000 while", h.cause)
    assert "print(x.shape" in (h.fixes[0].code or "")
    assert re.search(r"resolution|subsampl", _fixes(h))


def test_reshape_hardcoded_batch_captured_also_lists_the_per_sample_reading() -> None:
    h = _hit("captured/cpu/reshape-hardcoded-batch-size")  # [32, 20, 8] for 640 elements
    assert h.rule == "shapes.view_ambiguous"
    assert "holds 4 rows" in h.cause and "holds 20 elements" in h.cause
    # The leading size comes from a batch-size setting on the user's line: the row reading is named first.
    assert h.cause.index("holds 4 rows") < h.cause.index("holds 20 elements")
    assert "drop_last" in _fixes(h)


def test_reshape_with_only_the_row_reading_states_it() -> None:
    h = _hit("corpus/shapes/view_rows_only_reading_captured.txt")  # [32, 784] for 5488 = 7 x 784
    assert h.rule == "shapes.view_batch"
    assert "Only one reading" in h.cause and "7 rows" in h.cause


def test_reshape_with_only_the_per_sample_reading_states_it() -> None:
    h = _hit("corpus/shapes/view_keep_lead_per_sample_captured.txt")  # [10, 3, 3] for 70 = 10 x 7
    assert h.rule == "shapes.view_per_sample"
    assert "Only one reading" in h.cause and "7 elements" in h.cause
    assert "the tensor holds" not in h.cause  # the row reading does not divide, so it is not offered


def test_reshape_with_inferred_size_keeps_the_plain_answer() -> None:
    assert _hit("corpus/shapes/view_invalid.txt").rule == "shapes.view_invalid"


# --- 2. old "size mismatch" inside a library classifier's head: the input resolution --------------------------------

@pytest.mark.parametrize("source", ["corpus/shapes/old_size_mismatch_resnet_fc_mobilepose.txt",
                                    "corpus/shapes/old_size_mismatch_resnet_fc_stanford_cars.txt"])
def test_old_size_mismatch_in_library_classifier_head_points_to_input_resolution(source: str) -> None:
    h = _hit(source)
    assert h.rule == "shapes.matmul_input_resolution"
    assert "224" in h.cause
    fixes = _fixes(h)
    assert "Resize((224, 224))" in fixes and "AdaptiveAvgPool2d" in fixes
    assert not re.search(r"batch size|num_classes|checkpoint", h.cause + fixes, re.I)


def test_old_size_mismatch_without_library_head_keeps_the_linear_answer() -> None:
    assert _hit("realworld/dev/hybridsn-old-size-mismatch-cuda").rule == "shapes.matmul"


# --- 3. too many indices: samples that arrive with one dimension fewer ---------------------------------------------

@pytest.mark.parametrize("source", ["corpus/indexing/too_many_indices_1d_feature_mvts.txt",
                                    "corpus/indexing/too_many_indices_1d_feature_window_captured.txt"])
def test_too_many_indices_names_the_missing_dimension_and_unsqueeze(source: str) -> None:
    h = _hit(source)
    assert h.rule == "index.too_many"
    assert "one fewer" in h.cause and "single feature" in h.cause
    assert "unsqueeze" in _fixes(h)
    assert "print(t.shape" in (h.fixes[0].code or "")


# --- 4. a bare `x.to(device)` whose result is thrown away --------------------------------------------------------

def test_unassigned_tensor_move_is_named_with_the_users_variable() -> None:
    h = _hit("corpus/devices/tensor_to_not_assigned_effnet.txt")
    assert h.rule == "devices.move_not_assigned"
    assert "returns a new tensor" in h.cause and "in place" in h.cause
    assert h.fixes[0].code == "img = img.to(device)"
    assert h.facts.names == ("img",)


def test_device_mismatch_without_a_bare_move_keeps_its_answer() -> None:
    assert _hit("captured/cuda/device-mismatch-cnn-batch-on-cpu").rule == "devices.mismatch"


# --- 5. collate: samples that differ only in their channel count -------------------------------------------------

@pytest.mark.parametrize("source", ["corpus/data/collate_gt_mask_channels_musc.txt", "corpus/data/collate_mask_1ch_vs_3ch_captured.txt",
                                    "corpus/data/collate_rgb_vs_rgba_captured.txt", "corpus/data/collate_gray_vs_rgb_srgan.txt"])
def test_collate_channel_only_difference_means_mixed_colour_modes(source: str) -> None:
    h = _hit(source)
    assert h.rule == "data.collate_channels"
    assert "channel" in h.cause and re.search(r"grayscale|RGBA", h.cause)
    fixes = _fixes(h)
    assert ".convert('RGB')" in fixes and ".convert('L')" in fixes
    # Resizing cannot change a channel count: not offered here.
    assert not re.search(r"resize|image size|batch.size", h.cause + fixes, re.I)


@pytest.mark.parametrize("source", ["captured/cpu/collate-variable-image-sizes", "realworld/dev/kohya-getitem-stack-latents"])
def test_collate_spatial_difference_keeps_the_image_size_answer(source: str) -> None:
    assert _hit(source).rule == "data.collate_image_sizes"


# --- 6. NoneType from a reader that returns None (cv2.imread) -----------------------------------------------------

def test_nonetype_from_cv2_imread_points_to_the_path() -> None:
    h = _hit("corpus/python/imread_none_from_numpy_yolact.txt")
    assert h.rule == "python.reader_none"
    assert "returns None" in h.cause and "extension" in h.cause
    assert "os.path.isfile(path)" in _fixes(h)
    assert not re.search(r"\bgpu\b|numpy version|opencv version|reinstall", h.cause + _fixes(h), re.I)


@pytest.mark.parametrize("source", ["corpus/python/imread_none_subscript_gradcam.txt", "corpus/python/imread_none_subscript_contournet.txt"])
def test_nonetype_subscript_of_cv2_imread_points_to_the_path(source: str) -> None:
    h = _hit(source)
    assert h.rule == "python.reader_none"
    assert h.facts.call == "cv2.imread"
    # The argument written on the user's line is the path to check (an expression is bound to `path` first).
    assert "os.path.isfile(" in _fixes(h)


def test_opencv_cannot_read_warning_before_a_nonetype_error_names_the_file() -> None:
    h = _hit("corpus/python/imread_warning_none_subscript_dcgan.txt")
    assert h.rule == "python.reader_none"
    assert "./datasets/mobile_data_img" in h.cause


def test_nonetype_without_reader_on_the_failing_line_keeps_the_general_answer() -> None:
    assert _hit("corpus/python/nonetype_shape_image_tcmr.txt").rule == "python.none_attribute"
