"""Build hook: ship the top-level knowledge/ folder inside the wheel as assistant/_knowledge.

The knowledge documents live at the repository root (where writers and reviewers expect them);
a non-editable install must still find them, so build_py copies them into the package.
"""
from pathlib import Path
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPyWithKnowledge(build_py):
    def run(self) -> None:
        super().run()
        source = Path(__file__).parent / "knowledge"
        target = Path(self.build_lib) / "assistant" / "_knowledge"
        if source.is_dir():
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("README.md"))


setup(cmdclass={"build_py": BuildPyWithKnowledge})
