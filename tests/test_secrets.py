"""Secrets (issue 12, defect 8): credentials found in a log never leave in any output or LLM request.

Planted in a real captured traceback (and printed by a real failing script), each known token format
must be masked in ``torchhelp ask`` (terminal, Markdown, JSON), ``run --report``, ``run
--evidence-out``, ``torchhelp env``, the triage renderers, and in the request a real loopback LLM
server receives. Ordinary PyTorch text (every captured traceback, the development reports) must come
out of the redactor unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from assistant import diagnose
from assistant.probes.redact import REDACTED, redact_env, redact_text
from conftest import CAPTURED, CAPTURES, ROOT
from llm_servers import MisbehavingServer
from test_escapes import RICH_SGR, run_on_pty, warm  # noqa: F401 - warm is a fixture used by name

PY = sys.executable
CAPTURE = json.loads((CAPTURED / "cpu" / "linear-after-conv-flatten.json").read_text(encoding="utf-8"))
LAST_LINE = "RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x2048 and 1568x10)"

# Each format from the issue: (the text as it appears in a log, the part that must never come out).
PLANTED: dict[str, tuple[str, str]] = {
    "aws-access-key-id": ("aws key AKIAQ3EXAMPLE7TOKEN2 rejected", "AKIAQ3EXAMPLE7TOKEN2"),
    "aws-secret-key": ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY"),
    "github-classic": ("remote: ghp_R4nd0mT0k3nV4lu3F0rT3st1ngXyZ0123 denied", "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngXyZ0123"),
    "github-oauth": ("gho_16C7e42F292c6912E7710c838347Ae178B4a", "gho_16C7e42F292c6912E7710c838347Ae178B4a"),
    "github-fine-grained": ("GH=github_pat_11AABBCCD0Qw3rTy5UiOp7_AsDfGhJkLzXcVbNm1234567890QwErTyUiOpAsDfGhJkLzXcVbN",
                            "github_pat_11AABBCCD0Qw3rTy5UiOp7_AsDfGhJkLzXcVbNm1234567890QwErTyUiOpAsDfGhJkLzXcVbN"),
    "gitlab": ("pushing with glpat-Xy9zQ8wV7uT6sR5pO4nM to origin", "glpat-Xy9zQ8wV7uT6sR5pO4nM"),
    "slack": ("hook xoxb-2048-4096-Zq8Xw7Vu6Ts5Rq4Po3Nm", "xoxb-2048-4096-Zq8Xw7Vu6Ts5Rq4Po3Nm"),
    "openai": ("client(api_key='sk-proj-Tq2Wv9Xy4Za7Bc3De8Fg1Hi6Jk0Lm5No')", "sk-proj-Tq2Wv9Xy4Za7Bc3De8Fg1Hi6Jk0Lm5No"),
    "anthropic": ("key sk-ant-api03-Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz1Xc3Vb5Nm7-AbCdEfAA", "sk-ant-api03-Qw3Er5Ty7Ui9Op1As3Df5Gh7Jk9Lz1Xc3Vb5Nm7-AbCdEfAA"),
    "huggingface": ("hub token hf_QwErTyUiOpAsDfGhJkLzXcVbNm12345678", "hf_QwErTyUiOpAsDfGhJkLzXcVbNm12345678"),
    "google": ("maps key AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY", "AIzaSyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
    "azure-connection-string": ("DefaultEndpointsProtocol=https;AccountName=ml;AccountKey=Qm9ndXNLZXlGb3JUZXN0aW5nT25seQ+/Zz09==;EndpointSuffix=core.windows.net",
                                "Qm9ndXNLZXlGb3JUZXN0aW5nT25seQ+/Zz09=="),
    "azure-key-value": ("AZURE_STORAGE_KEY: az7Kq2Lm9Np4Rs6Tu8Vw0Xy", "az7Kq2Lm9Np4Rs6Tu8Vw0Xy"),
    "jwt": ("cookie eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ0ZXN0In0.c2lnbmF0dXJlX25vdF9yZWFs",
            "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiJ0ZXN0In0.c2lnbmF0dXJlX25vdF9yZWFs"),
    "url-password": ("db postgres://trainer:Sup3rS3cretPw@db.internal:5432/runs unreachable", "Sup3rS3cretPw"),
    "password-kv": ("password=hunter2plain", "hunter2plain"),
    "token-kv": ("token=t0k3nPlainValue", "t0k3nPlainValue"),
    "secret-kv": ('"client_secret": "cl13ntS3cr3tV4l"', "cl13ntS3cr3tV4l"),
    "api-key-kv": ("api_key: apiK3yPlainValue", "apiK3yPlainValue"),
    "bearer": ("Authorization: Bearer b34r3rT0k3nPlainValue42", "b34r3rT0k3nPlainValue42"),
    "basic-auth": ("Authorization: Basic dHJhaW5lcjpodW50ZXIy", "dHJhaW5lcjpodW50ZXIy"),
}
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAqPlantedKeyMaterialLine1\nQm9ndXNLZXlNYXRlcmlhbExpbmUy\n-----END RSA PRIVATE KEY-----"
PEM_SECRET = "MIIEowIBAAKCAQEAqPlantedKeyMaterialLine1"
SECRETS = [s for _, s in PLANTED.values()] + [PEM_SECRET]


def leaky_log(texts: list[str]) -> str:
    """The captured traceback with secrets in its final error message (which every output echoes)
    and a private key printed before it."""
    message = LAST_LINE + " while " + " ; ".join(texts)
    return PEM + "\n" + CAPTURE["stderr"].replace(LAST_LINE, message)


def leaked(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


# --- the redactor itself -------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(PLANTED))
def test_each_format_is_redacted(name: str) -> None:
    text, secret = PLANTED[name]
    out = redact_text(text)
    assert secret not in out and REDACTED in out, out
    assert redact_text(out) == out  # stable: redacting twice changes nothing more


def test_private_key_blocks_whole_and_cut() -> None:
    out = redact_text(f"before\n{PEM}\nafter")
    assert PEM_SECRET not in out and "Qm9ndXNLZXlNYXRlcmlhbExpbmUy" not in out and out.startswith("before\n") and out.endswith("\nafter")
    cut = redact_text("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\nTraceback (most recent call last):")
    assert "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU" not in cut and cut.endswith("Traceback (most recent call last):")


ORDINARY = [
    "RuntimeError: CUDA error: an illegal memory access was encountered at 0x7f3a2c001000",
    "KeyError: 'token'", "KeyError: 'weight'", "tokenizer(pad_token='<pad>', eos_token='</s>', pad_token_id=0)",
    "max_new_tokens=20 token_type_ids=None num_tokens: 512", "  File \"/home/u/.cache/huggingface/hub/models--gpt2/snapshots/607a30d783dfa663caf39e06633721c8d4cfcd7e/modeling.py\", line 3",
    "torch.Size([8, 2048]) vs (1568x10)", "Missing key(s) in state_dict: \"fc.weight\", \"fc.bias\".", "git commit 9f8e7d6c5b4a39281706f5e4d3c2b1a098765432",
    "monkey: 3", "task-scheduler-worker-0123456789abcdef", "--tokenizer-path /data/tok", "url https://download.pytorch.org/whl/cu121",
]


@pytest.mark.parametrize("text", ORDINARY)
def test_ordinary_pytorch_text_is_unchanged(text: str) -> None:
    assert redact_text(text) == text


def test_every_captured_traceback_is_unchanged_by_redaction() -> None:
    assert len(CAPTURES) > 50
    changed = [c["slug"] for c in CAPTURES if redact_text(c["stderr"]) != c["stderr"]]
    assert changed == []


# Reports whose text holds a capability on purpose masked: a file-sharing link's id lets anyone read the file.
CAPABILITY_LINKS = {"f2a-siamfc-unexpected-num-batches-tracked-strict"}


def test_development_reports_are_unchanged_by_redaction() -> None:
    lines = [ln for p in sorted((ROOT / "eval" / "realworld").glob("dev*.jsonl")) for ln in p.read_text(encoding="utf-8").splitlines()]
    assert lines
    changed = [ln for ln in lines if redact_text(ln) != ln]
    assert [ln[:80] for ln in changed if json.loads(ln)["id"] not in CAPABILITY_LINKS] == []
    for ln in changed:  # only the link's id goes; the parameter's name and the rest of the text stay
        masked = redact_text(ln)
        assert "open?id=[REDACTED]" in masked and masked.count("[REDACTED]") == 1


@pytest.mark.parametrize("unit", ["a", "a_", "token='", "://a:b", "sk-", "github_pat_", "eyJ", "-----BEGIN PRIVATE KEY-----\n", "A1b2" * 10 + " ", "Bearer "])
def test_redaction_stays_linear_on_adversarial_text(unit: str) -> None:
    """Measured ~0.3–1.8 s per MB on a loaded 2-core machine; the bound is generous (no quadratic blow-up)."""
    text = unit * (200_000 // len(unit))
    start = time.perf_counter()
    redact_text(text)
    assert time.perf_counter() - start < 8.0


# --- every output door ---------------------------------------------------------------------------

# Four formats per log: the error line that every output echoes stays short enough to be shown whole.
NAMES = sorted(PLANTED)
GROUPS = [NAMES[i:i + 4] for i in range(0, len(NAMES), 4)]


@pytest.fixture(scope="module")
def log_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    folder = tmp_path_factory.mktemp("secrets")
    paths = []
    for i, group in enumerate(GROUPS):
        path = folder / f"leaky{i}.log"
        path.write_text(leaky_log([PLANTED[n][0] for n in group]), encoding="utf-8")
        paths.append(path)
    return paths


def th(args: list[str], home: Path, cwd: Path | None = None, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHHELP_LLM_URL", "OPENAI_API_KEY")}
    env.update({"TORCHHELP_HOME": str(home), "TORCHHELP_DENSE": "0", "PYTHONPATH": str(ROOT), "COLUMNS": "1000", **(env_extra or {})})
    return subprocess.run([PY, "-m", "assistant", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_planted_logs_really_carry_the_secrets_into_the_diagnosis(log_files: list[Path], th_home: Path) -> None:
    """Without redaction each log's error line (with its secrets) is echoed: the tests below mean something."""
    from assistant.settings import load_settings

    settings = load_settings(env={"TORCHHELP_HOME": str(th_home)}, llm="none", dense=False)
    for group, path in zip(GROUPS, log_files, strict=True):
        raw = json.dumps(diagnose(path.read_text(encoding="utf-8"), settings=settings).to_dict(), ensure_ascii=False)
        assert [PLANTED[n][1] for n in group if PLANTED[n][1] not in raw] == []


@pytest.mark.parametrize("fmt", ["terminal", "markdown", "json"])
def test_ask_output_has_no_secrets(fmt: str, log_files: list[Path], warm: dict[str, str]) -> None:  # noqa: F811 - the fixture
    """`torchhelp ask` on a real pseudo-terminal, 1000 columns wide so that no secret is wrapped apart."""
    for group, path in zip(GROUPS, log_files, strict=True):
        code, out = run_on_pty(["ask", "--format", fmt, str(path)], warm, cols=1000)
        assert code == 0, out[-2000:]
        text = RICH_SGR.sub(b"", out).decode("utf-8", errors="replace")
        assert leaked(text) == [], group
        assert REDACTED in text
        assert "mat1 and mat2 shapes cannot be multiplied" in " ".join(text.split())  # the error itself is still shown


def test_run_report_evidence_and_terminal_have_no_secrets(tmp_path: Path, th_home: Path) -> None:
    script = tmp_path / "leak.py"
    script.write_text(textwrap.dedent("""
        import os, sys
        import torch
        db_url = "postgres://trainer:Sup3rS3cretPw@db.internal:5432/runs"
        gitlab = "glpat-Xy9zQ8wV7uT6sR5pO4nM"
        print("config: password=hunter2plain token=" + os.environ["GH_TOKEN"], flush=True)
        print("config: " + gitlab, file=sys.stderr, flush=True)
        x = torch.zeros(8, 2048)
        w = torch.zeros(1568, 10)
        try:
            x @ w
        except RuntimeError as exc:
            raise RuntimeError(f"{exc} while saving to {db_url} with {gitlab} password=hunter2plain "
                               f"{os.environ['GH_TOKEN']}") from None
    """), encoding="utf-8")
    report = tmp_path / "report.json"
    evidence = tmp_path / "evidence.json"
    gh = "github_pat_11AABBCCD0Qw3rTy5UiOp7_AsDfGhJkLzXcVbNm1234567890QwErTyUiOpAsDfGhJkLzXcVbN"
    res = th(["run", "--report", str(report), "--evidence-out", str(evidence), "--", PY, str(script), "--password", "argvPassw0rd"],
             th_home, cwd=tmp_path, env_extra={"GH_TOKEN": gh})
    assert res.returncode == 1, res.stderr[-2000:]
    assert report.exists() and evidence.exists()
    # The program's own output passes through untouched (it is the user's); what torchhelp writes must be clean.
    ours = res.stderr.split("torchhelp", 1)[-1] if "╭" not in res.stderr else res.stderr.split("╭", 1)[-1]
    for name, text in (("report", report.read_text()), ("evidence", evidence.read_text()), ("terminal", ours)):
        for secret in ("Sup3rS3cretPw", "glpat-Xy9zQ8wV7uT6sR5pO4nM", "hunter2plain", gh, "argvPassw0rd"):
            assert secret not in text, (name, secret)
    assert "mat1 and mat2 shapes cannot be multiplied" in report.read_text()


def test_env_report_has_no_secrets(th_home: Path) -> None:
    planted = {
        "TORCH_HOME": "https://trainer:Sup3rS3cretPw@cache.internal/torch",
        "PYTORCH_EXTRA": "glpat-Xy9zQ8wV7uT6sR5pO4nM",
        "NCCL_DEBUG_FILE": "/tmp/nccl password=hunter2plain",
        "HF_HUB_URL": "https://hub.example/?token=t0k3nPlainValue",
        "CUDA_CACHE_NOTE": "github_pat_11AABBCCD0Qw3rTy5UiOp7_AsDfGhJkLzXcVbNm1234567890QwErTyUiOpAsDfGhJkLzXcVbN",
        "NCCL_SOCKET_IFNAME": "eth0",
    }
    for args in (["env"], ["env", "--json"]):
        res = th(args, th_home, env_extra=planted)
        assert res.returncode == 0, res.stderr
        assert leaked(res.stdout) == [], args
        assert "eth0" in res.stdout and "NCCL_SOCKET_IFNAME" in res.stdout


def test_env_values_cannot_drive_the_terminal() -> None:
    from assistant.probes.env import format_environment

    text = format_environment({"env": redact_env({"TORCH_X": "\x1b]52;c;eA==\x07ok\x1b[2J"})})
    assert "\x1b" not in text and "\x07" not in text and "TORCH_X=ok" in text


def test_triage_renderers_mask_secrets() -> None:
    from assistant.triage.render_terminal import clean_text

    for text, secret in PLANTED.values():
        assert secret not in clean_text(text)
        assert secret not in clean_text(text, oneline=True, limit=400)


def test_the_llm_request_has_no_secrets(log_files: list[Path], th_home: Path) -> None:
    """A real HTTP server on loopback records the request body the openai backend sends."""
    from assistant.settings import load_settings

    reply = json.dumps({"category": "shape_mismatch", "title": "Linear layer input size does not match",
                        "cause": "The classifier expects 1568 input features but receives 2048.",
                        "fixes": [{"title": "Build the Linear layer with 2048 inputs", "detail": "", "code": "nn.Linear(2048, 10)", "sources": []}],
                        "citations": []})
    settings = load_settings(env={"TORCHHELP_HOME": str(th_home)}, llm="none", dense=False)
    with MisbehavingServer("ok", reply) as server:
        for path in log_files:
            diagnose(path.read_text(encoding="utf-8"), settings=settings, llm="openai", llm_url=server.url)
        assert len(server.requests) >= len(log_files), "the backend was called for every log"
        body = json.dumps(server.requests, ensure_ascii=False)
    assert leaked(body) == []
    assert REDACTED in body
