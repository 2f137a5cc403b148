"""Print (or, with --write, put into README.md) the table of environment variables, generated from assistant/settings.py."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from assistant.settings_doc import environment_table, with_table  # noqa: E402


def main(argv: list[str]) -> int:
    if "--write" in argv:
        readme = ROOT / "README.md"
        readme.write_text(with_table(readme.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"wrote the settings table into {readme}")
    else:
        sys.stdout.write(environment_table())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
