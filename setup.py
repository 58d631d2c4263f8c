"""Build hook: ship the generated test vectors inside the wheel.

Everything else is in pyproject.toml. The repository keeps its vectors in
``test_vectors/`` (beside the packages, where the tests and the docs name them); a wheel
carries a copy as package data of ``ppm_reference.vdaf`` (``ppm_reference/vdaf/test_vectors/``, found by
``vdaf.packaged``), so ``ppm vdaf vectors check`` and ``ppm dap vectors check`` work from
a plain ``pip install``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildPyWithVectors(build_py):
    def run(self) -> None:
        super().run()
        source = ROOT / "test_vectors"
        if not source.is_dir():         # building from an sdist that lacks them
            return
        target = Path(self.build_lib) / "ppm_reference" / "vdaf" / "test_vectors"
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))


setup(cmdclass={"build_py": BuildPyWithVectors})
