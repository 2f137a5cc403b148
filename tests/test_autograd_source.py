"""Autograd diagnoses that fit the user's code: real programs run under `torchhelp run`.

Two losses with no loop are not "state carried across iterations"; a loop is. The in-place operation
in the user's forward (``h.mul_(2)``, ``nn.ReLU(inplace=True)``) is named, with its out-of-place
form; torch's own frame locals (``t_outputs``) never reach the user.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from assistant.rules.autograd_source import failing_line_fix, out_of_place, statement_kind

TWO_LOSSES = """\
import torch
import torch.nn as nn

torch.manual_seed(0)
trunk = nn.Linear(8, 16)
head_a = nn.Linear(16, 1)
head_b = nn.Linear(16, 1)
x = torch.randn(4, 8)
features = torch.tanh(trunk(x))
loss_a = head_a(features).pow(2).mean()
loss_b = head_b(features).abs().mean()
loss_a.backward()
loss_b.backward()
"""

LOOP_HIDDEN = """\
import torch
import torch.nn as nn

rnn = nn.RNN(4, 8, batch_first=True)
head = nn.Linear(8, 1)
opt = torch.optim.SGD(list(rnn.parameters()) + list(head.parameters()), lr=0.1)
hidden = torch.zeros(1, 2, 8)
for step in range(3):
    out, hidden = rnn(torch.randn(2, 5, 4), hidden)
    loss = head(out[:, -1]).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

INPLACE_IN_FORWARD = """\
import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = nn.ReLU(inplace=True)

    def forward(self, x):
        h = torch.sigmoid(self.fc(x))
        h.mul_(2)
        return self.act(h)


def main():
    model = Block()
    model(torch.randn(4, 8)).sum().backward()


main()
"""


def _run(tmp_path: Path, name: str, script: str) -> str:
    path = tmp_path / name
    path.write_text(script, encoding="utf-8")
    env = {**os.environ, "TORCHHELP_HOME": str(tmp_path / "home"), "TORCHHELP_DENSE": "0", "TORCHHELP_LLM": "none", "COLUMNS": "100", "NO_COLOR": "1"}
    out = subprocess.run([sys.executable, "-m", "assistant", "run", "--", sys.executable, name], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 1, out.stderr[-3000:]
    return out.stderr


def _fixes(stderr: str) -> str:
    return stderr.split("Fixes", 1)[1].split("Why", 1)[0]


def test_two_losses_without_a_loop_lead_with_summing_them(tmp_path: Path) -> None:
    err = _run(tmp_path, "two_losses.py", TWO_LOSSES)
    fixes = _fixes(err)
    assert fixes.index("(loss_a + loss_b).backward()") < fixes.index("loss_a.backward(retain_graph=True)")
    assert "Detach state carried between iterations" not in fixes  # no loop: that story does not fit this code
    assert "nothing is carried across iterations" in err and "line 12" in err


def test_a_loop_keeps_the_carried_state_story_first(tmp_path: Path) -> None:
    err = _run(tmp_path, "loop_hidden.py", LOOP_HIDDEN)
    fixes = _fixes(err)
    assert "1.  Detach state carried between iterations" in fixes
    assert fixes.index("Detach state carried between iterations") < fixes.index("(loss_a + loss_b)")
    assert "(inside a loop)" in err


def test_inplace_operation_in_forward_is_named_and_torch_locals_hidden(tmp_path: Path) -> None:
    err = _run(tmp_path, "inplace_forward.py", INPLACE_IN_FORWARD)
    fixes = _fixes(err)
    first = fixes.split("2.", 1)[0]
    assert "h.mul_(2)" in first and "h = h.mul(2)" in first
    assert "nn.ReLU(inplace=False)" in fixes
    assert "act (ReLU(inplace=True))" in err  # the module probe names the layer
    assert "t_outputs" not in err and "grad_tensors" not in err  # torch's own frame locals


@pytest.mark.parametrize(("line", "kind", "expected"), [
    ("h.mul_(2)", "method", "h = h.mul(2)"),
    ("self.buf[0].add_(delta, alpha=0.5)", "method", "self.buf[0] = self.buf[0].add(delta, alpha=0.5)"),
    ("x += residual", "augmented", "x = x + residual"),
    ("out *= mask.float()", "augmented", "out = out * mask.float()"),
    ("self.act = nn.ReLU(inplace=True)", "inplace_flag", "self.act = nn.ReLU(inplace=False)"),
])
def test_out_of_place_spelling(line: str, kind: str, expected: str) -> None:
    assert statement_kind(line) == kind
    assert out_of_place(line, kind) == expected


@pytest.mark.parametrize("line", ["loss.backward()", "p.data.mul_(0.9)", "optimizer.step()", "y = model(x)", "for x in xs:"])
def test_lines_that_are_not_in_place_edits_get_no_fix(line: str) -> None:
    assert failing_line_fix(line) is None
