"""Terminal escape injection (issue 12, defect 2): a hostile log never drives the user's terminal.

A corpus of escape payloads is planted in a real captured traceback and rendered by ``torchhelp ask``
on a real pseudo-terminal. The bytes our process writes to that terminal may carry rich's own colour
codes (SGR, ``ESC [ … m``) and nothing else: once those are removed no ESC, C1 or other control
character may remain, and the error's visible text must still be there (no text swallowed). The one
sanitiser behind it (:mod:`assistant.render.safe_text`) is checked with properties as well: total,
idempotent, no control characters out.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from conftest import CAPTURED

CAPTURE = json.loads((CAPTURED / "cpu" / "linear-after-conv-flatten.json").read_text(encoding="utf-8"))
LAST_LINE = "RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x2048 and 1568x10)"
HEAD = "mat1 and mat2 shapes cannot be multiplied"
TAIL = "(8x2048 and 1568x10)"
assert LAST_LINE in CAPTURE["stderr"]

# name -> (payload bytes, where it goes in the error line: between HEAD and TAIL, or at the very end)
PAYLOADS: dict[str, tuple[bytes, str]] = {
    "issue-split-osc52": (b"\x1b\x1b[0m]52;c;cm0gLXJmIH4K\x1b\x1b[0m\\", "mid"),
    "osc52-bel": (b"\x1b]52;c;cm0gLXJmIH4K\x07", "mid"),
    "osc52-st": (b"\x1b]52;c;cm0gLXJmIH4K\x1b\\", "mid"),
    "osc0-title-bel": (b"\x1b]0;pwned title\x07", "mid"),
    "osc0-title-st": (b"\x1b]0;pwned title\x1b\\", "mid"),
    "osc2-title": (b"\x1b]2;pwned\x07", "mid"),
    "osc8-link-bel": (b"\x1b]8;;https://evil.example/\x07click me\x1b]8;;\x07", "mid"),
    "osc8-link-st": (b"\x1b]8;id=1;https://evil.example/\x1b\\click me\x1b]8;;\x1b\\", "mid"),
    "osc4-palette": (b"\x1b]4;1;rgb:ff/00/00\x07", "mid"),
    "osc1337-file": (b"\x1b]1337;File=name=eA==;inline=1:AAAA\x07", "mid"),
    "nested-osc-in-csi": (b"\x1b[\x1b]52;c;eA==\x07", "mid"),
    "split-csi": (b"\x1b[\x1b[38;2;1;2;3m38;2;1;2;3m", "mid"),
    "double-split-osc52": (b"\x1b\x1b\x1b[0m[0m]52;c;eA==\x07", "mid"),
    "csi-truecolour": (b"\x1b[38;2;1;2;3mred\x1b[0m", "mid"),
    "csi-alt-screen": (b"\x1b[?1049h", "mid"),
    "csi-clear-home": (b"\x1b[2J\x1b[H", "mid"),
    "csi-device-status": (b"\x1b[6n\x1b[>c\x1b[=5u", "mid"),
    "csi-huge-params": (b"\x1b[1;99999999999999999999999r\x1b[ q", "mid"),
    "dcs-decrqss": (b"\x1bP$q m\x1b\\", "mid"),
    "dcs-sixel": (b"\x1bPq#0;2;0;0;0#0!10~\x1b\\", "mid"),
    "apc-kitty-graphics": (b"\x1b_Gf=100,a=T;AAAA\x1b\\", "mid"),
    "pm": (b"\x1b^private message\x1b\\", "mid"),
    "sos": (b"\x1bXstart of string\x1b\\", "mid"),
    "c1-csi": ("\u009b2J\u009b31m".encode(), "mid"),
    "c1-osc52": ("\u009d52;c;eA==\u009c".encode(), "mid"),
    "c1-dcs": ("\u0090$q m\u009c".encode(), "mid"),
    "c1-apc": ("\u009fGf=100;AAAA\u009c".encode(), "mid"),
    "c1-lone": ("\u0085\u008d\u0084".encode(), "mid"),
    "raw-8bit-csi": (b"\x9b2J", "mid"),
    "esc-c-reset": (b"\x1bc", "mid"),
    "esc-charset-dec": (b"\x1b(0", "mid"),
    "esc-decaln": (b"\x1b#8", "mid"),
    "esc-keypad": (b"\x1b=\x1b>", "mid"),
    "esc-save-restore": (b"\x1b7\x1b8", "mid"),
    "bell-backspace-del": (b"\x07\x08\x08\x08\x7f", "mid"),
    "bidi-override": ("\u202eevil\u202c\u2066x\u2069".encode(), "mid"),
    "unterminated-osc": (b"\x1b]0;", "mid"),
    "unterminated-osc52": (b"\x1b]52;c;", "mid"),
    "unterminated-dcs": (b"\x1bP", "mid"),
    "lone-esc-at-end": (b"\x1b", "end"),
    "unterminated-osc-at-end": (b"\x1b]0;title", "end"),
}
# Colour codes a payload plants that rich never emits for our styles: they must not come out verbatim.
PLANTED_SGR = (b"\x1b[38;2;1;2;3m",)
RICH_SGR = re.compile(rb"\x1b\[[0-9;]*m")


def hostile_log(payload: bytes, where: str) -> bytes:
    """The captured traceback with ``payload`` planted in its final error line."""
    line = LAST_LINE.encode()
    planted = (f"RuntimeError: {HEAD} ".encode() + payload + f" {TAIL}".encode()) if where == "mid" else line + payload
    return CAPTURE["stderr"].encode().replace(line, planted)


def run_on_pty(argv: list[str], env: dict[str, str], cols: int = 200, rows: int = 60, timeout: float = 120.0) -> tuple[int, bytes]:
    """Run ``torchhelp <argv>`` (the CLI's main) in a forked child whose stdio is a new pseudo-terminal.

    Forking from this warm process keeps the corpus fast; the child is a real process on a real pty
    (it sees a tty of ``cols`` columns, the line discipline translates its newlines).
    """
    pid, fd = pty.fork()
    if pid == 0:  # the child: stdio is the pty's slave side
        code = 99
        try:
            os.environ.update(env)
            for name in ("NO_COLOR", "COLUMNS", "LINES", "TORCHHELP_LLM_URL", "OPENAI_API_KEY", "TORCHHELP_LLM"):
                os.environ.pop(name, None)
            fcntl.ioctl(1, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
            sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - the child's whole life
            sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
            from assistant.cli import main

            code = main(argv)
        except BaseException:  # noqa: BLE001 - the child must always reach _exit
            code = 98
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                raise TimeoutError(f"torchhelp {' '.join(argv)} did not finish in {timeout} s")
            try:
                data = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        _, status = os.waitpid(pid, 0)
        os.close(fd)
    return os.waitstatus_to_exitcode(status), b"".join(chunks)


def leftover_controls(out: bytes) -> list[str]:
    """Control characters in the terminal output once rich's own colour codes are removed."""
    text = RICH_SGR.sub(b"", out).decode("utf-8", errors="replace")
    return [f"U+{ord(c):04X}" for c in text if (ord(c) < 0x20 and c not in "\r\n\t") or 0x7F <= ord(c) <= 0x9F]


def visible(out: bytes) -> str:
    return " ".join(RICH_SGR.sub(b"", out).decode("utf-8", errors="replace").split())


@pytest.fixture(scope="module")
def warm(th_home: Path) -> Iterator[dict[str, str]]:
    """The environment for the children (no LLM, lexical retrieval), with everything `ask` imports and
    its index loaded once in this process: the forked children inherit it warm."""
    env = {"TORCHHELP_HOME": str(th_home), "TORCHHELP_DENSE": "0", "TERM": "xterm-256color"}
    unset = ("TORCHHELP_LLM_URL", "OPENAI_API_KEY", "TORCHHELP_LLM")
    saved = {k: os.environ.get(k) for k in (*env, *unset)}
    os.environ.update(env)
    for k in unset:
        os.environ.pop(k, None)
    try:
        log = th_home / "warm-up.log"
        log.write_text(CAPTURE["stderr"], encoding="utf-8")
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            from assistant.cli import main

            assert main(["ask", str(log)]) == 0  # imports everything `ask` needs, before the forks
        yield env
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_the_corpus_is_large_enough() -> None:
    assert len(PAYLOADS) >= 25


@pytest.mark.parametrize("name", sorted(PAYLOADS))
def test_payload_is_rendered_as_text_on_a_real_terminal(name: str, warm: dict[str, str], tmp_path: Path) -> None:
    payload, where = PAYLOADS[name]
    log = tmp_path / "e.log"
    log.write_bytes(hostile_log(payload, where))
    code, out = run_on_pty(["ask", str(log)], warm)
    assert code == 0, out[-2000:]
    assert b"\x1b[" in out, "rich styles the answer on a terminal (the harness really is a tty)"
    assert leftover_controls(out) == [], f"{name}: escapes or controls reached the terminal"
    for sgr in PLANTED_SGR:
        assert sgr not in out
    shown = visible(out)
    assert HEAD in shown and TAIL in shown, f"{name}: the error's own text was swallowed"


def test_issue_reproduction_through_the_console_script(warm: dict[str, str], tmp_path: Path) -> None:
    """The exact reproduction from the issue, through the installed `torchhelp` script on a pty."""
    log = tmp_path / "e.log"
    log.write_bytes(b"RuntimeError: \x1b\x1b[0m]52;c;cm0gLXJmIH4K\x1b\x1b[0m\\\n")
    script = Path(sys.executable).with_name("torchhelp")
    argv = [str(script)] if script.exists() else [sys.executable, "-m", "assistant"]
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 120, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "COLUMNS", "LINES", "TORCHHELP_LLM_URL", "OPENAI_API_KEY")}
    proc = subprocess.Popen([*argv, "ask", str(log)], stdin=secondary, stdout=secondary, stderr=secondary, env={**env, **warm}, close_fds=True)
    os.close(secondary)
    chunks = []
    while True:
        ready, _, _ = select.select([primary], [], [], 120)
        if not ready:
            proc.kill()
            pytest.fail("torchhelp ask did not finish")
        try:
            data = os.read(primary, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    os.close(primary)
    assert proc.wait(30) == 0
    out = b"".join(chunks)
    assert b"\x1b[" in out
    assert leftover_controls(out) == []
    assert b"52;c;" not in out and b"cm0gLXJmIH4K" not in out, "the clipboard payload is removed whole"
    assert "RuntimeError" in visible(out)


@pytest.mark.parametrize("fmt", ["markdown", "json"])
@pytest.mark.parametrize("name", ["issue-split-osc52", "c1-csi", "esc-c-reset", "bidi-override"])
def test_markdown_and_json_outputs_carry_no_controls(fmt: str, name: str, warm: dict[str, str], tmp_path: Path) -> None:
    log = tmp_path / "e.log"
    log.write_bytes(hostile_log(*PAYLOADS[name]))
    code, out = run_on_pty(["ask", "--format", fmt, str(log)], warm)
    assert code == 0
    # JSON escapes C0 itself (as \u001b: inert, but a consumer may print it decoded); C1 and DEL it passes raw.
    assert leftover_controls(out) == [], fmt
    text = out.decode("utf-8").replace("\r\n", "\n")
    assert "\\u001b" not in text and "\\u0007" not in text and "\u202e" not in text
    assert HEAD in " ".join(text.split())


# --- the one sanitiser -------------------------------------------------------------------------

from assistant.render.safe_text import safe_text, strip_escapes  # noqa: E402

FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
FRAGMENTS = ["\x1b", "[", "]", "\\", "\x07", "\x9b", "\x9c", "\x9d", "\x90", "52;c;", "0;", "8;;", "31m", "0m", "?1049h", "P", "_", "^",
             "X", "(", "0", "#", "8", "c", "=", "\r", "\n", "\t", "\x00", "\x7f", "\u202e", "\ud800", "text", " ", "é"]
HOSTILE = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=8), max_size=40).map("".join)
ANY_TEXT = st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()), max_size=200)
PROPS = hsettings(deadline=None, database=None, derandomize=True, max_examples=400, suppress_health_check=list(HealthCheck))


@PROPS
@given(st.one_of(HOSTILE, ANY_TEXT))
def test_safe_text_is_total_idempotent_and_control_free(text: str) -> None:
    out = safe_text(text)
    assert isinstance(out, str)
    assert not FORBIDDEN.search(out)
    assert safe_text(out) == out
    out.encode("utf-8")  # lone surrogates are gone: the result can always be written
    stripped = strip_escapes(text)
    assert "\x1b" not in stripped and not re.search("[\x80-\x9f]", stripped)
    assert strip_escapes(stripped) == stripped


@PROPS
@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.sampled_from("\n\té…×—"), max_size=200))
def test_plain_text_is_left_alone(text: str) -> None:
    assert safe_text(text) == text
    assert strip_escapes(text) == text


def test_safe_text_never_raises_on_odd_inputs() -> None:
    class Hostile:
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert safe_text(None) == ""
    assert safe_text(b"a\x1b[31mb\xff") == "ab\ufffd"
    assert safe_text(Hostile()) == ""


def test_the_parser_and_the_triage_reader_share_the_core() -> None:
    from assistant.parse.normalize import strip_ansi
    from assistant.triage.reading import clean

    issue = "RuntimeError: \x1b\x1b[0m]52;c;cm0gLXJmIH4K\x1b\x1b[0m\\"
    assert strip_ansi(issue) == clean(issue) == safe_text(issue) == "RuntimeError: "
    # The parser keeps \r for its own progress-bar logic; the renderers turn it into a newline.
    assert strip_ansi("a\x1b[1mb\rc") == "ab\rc"
    # An unterminated OSC loses its introducer only: the text after it is not swallowed.
    assert clean("\x1b]0;RuntimeError: real text") == "0;RuntimeError: real text"
    from assistant.triage.render_terminal import clean_text

    assert clean_text(issue) == "RuntimeError: "


def test_sanitising_is_linear() -> None:
    """A megabyte of nested introducers is cleaned in well under a few seconds (measured ~0.3 s)."""
    for unit in ("\x1b]", "\x9d", "\x1b\x1b[", "\x1bP", "\x1b[1;"):
        text = unit * (1_000_000 // len(unit))
        start = time.perf_counter()
        assert "\x1b" not in safe_text(text)
        assert time.perf_counter() - start < 10.0, repr(unit)
