"""Families tuned on the dev_fresh5 reports (tuner f5c), read from real texts.

Every text is real: an error printed by torch 2.13 here, a corpus file, or a report of the dev_fresh5 split.
"""

from __future__ import annotations

from pathlib import Path

from assistant import rules
from assistant.kb.remedies import remedies_of
from assistant.parse import parse_failure
from tuned_support import dev_reader, fix_text as _fixes, hit_of as _hit_text

ROOT = Path(__file__).resolve().parents[1]


_dev_fresh5 = dev_reader("dev_fresh5")


def test_ssl_certificate_failure_is_not_read_as_missing_network() -> None:
    found = _hit_text(_dev_fresh5("f5c-facenet-pretrained-ssl-self-signed"))
    assert found.rule == "env.ssl_certificate"
    assert found.category == "environment_error"
    text = _fixes(found.fixes)
    assert "certificate" in text.lower() and "SSL_CERT_FILE" in text


def test_name_resolution_failure_still_reads_as_network() -> None:
    text = "urllib.error.URLError: <urlopen error [Errno -3] Temporary failure in name resolution>"
    assert _hit_text(text).rule == "env.network"


def test_undefined_torch_symbol_in_torch_own_library_reads_as_two_builds() -> None:
    found = _hit_text(_dev_fresh5("f5c-nightly-mixed-install-undefined-symbol"))
    assert found.category == "environment_error"
    assert "two different builds" in found.title
    assert "uninstall" in _fixes(found.fixes).lower()


def test_undefined_symbol_in_extension_still_reads_as_rebuild() -> None:
    text = ("ImportError: /usr/lib/python3/site-packages/torchvision/_C.so: undefined symbol: _ZN3c104cuda20CUDACachingAllocator9allocatorE")
    found = _hit_text(text)
    assert "two different builds" not in found.title


def test_is_available_false_in_an_interpreter_session() -> None:
    found = _hit_text(_dev_fresh5("f5c-cuda-false-driver-410-too-old"))
    assert found.rule == "devices.cuda_reported_unavailable"
    assert found.category == "cuda_unavailable"
    assert "driver" in _fixes(found.fixes).lower()


def test_is_available_false_in_words() -> None:
    found = _hit_text("After installing with pip, torch.cuda.is_available() returns False on my machine with a GTX 1080.")
    assert found.rule == "devices.cuda_reported_unavailable"


def test_is_available_true_is_not_read() -> None:
    found = rules.match(parse_failure(">>> torch.cuda.is_available()\nTrue\n")).hit
    assert found is None or found.rule != "devices.cuda_reported_unavailable"


def test_new_documents_link_their_fixes() -> None:
    for stem, fix_ids in (("download-failures", {"trust-local-ca-bundle", "upgrade-library-for-mirrors", "download-file-manually"}),
                          ("openmp-duplicate-runtime", {"one-openmp-runtime", "kmp-duplicate-lib-ok"})):
        rem = remedies_of(stem)
        assert rem is not None
        assert fix_ids <= {f.id for f in rem.fixes}


def test_private_torch_module_names_the_importing_library() -> None:
    found = _hit_text(_dev_fresh5("f5c-bolts-torch-six-py3-import"))
    assert found.rule == "env.cannot_import_name"
    text = _fixes(found.fixes)
    assert "Upgrade pl_bolts" in text


def test_public_module_cannot_import_name_keeps_the_version_advice() -> None:
    found = _hit_text("ImportError: cannot import name 'GradScaler' from 'torch.amp' (/usr/lib/python3/site-packages/torch/amp/__init__.py)")
    assert "private torch module" not in _fixes(found.fixes)


def test_cudnn_not_supported_offers_the_other_benchmark_setting_first_when_named() -> None:
    found = _hit_text(_dev_fresh5("f5c-convtranspose3d-cudnn-not-supported"))
    assert found.rule == "cuda.cudnn_not_supported"
    assert [f.title for f in found.fixes].index("Try another algorithm choice") <= 1
    assert "benchmark = True" in _fixes(found.fixes)


def test_cudnn_not_supported_without_benchmark_words_keeps_the_toggle_last() -> None:
    found = _hit_text("RuntimeError: CUDNN_STATUS_NOT_SUPPORTED. This error may appear if you passed in a non-contiguous input.")
    assert found.rule == "cuda.cudnn_not_supported"
    assert found.fixes[-2].title == "Try another algorithm choice" or found.fixes[-1].title == "Try another algorithm choice"
