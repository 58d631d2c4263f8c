"""Packaging: what a plain ``pip install`` (a wheel) and an sdist carry (issue 16).

Builds the sdist and the wheel once (``python -m build``, isolated: it needs PyPI or a
warm pip cache for setuptools) and checks:

- ``ppm --version`` is the distribution's version;
- the wheel carries ``py.typed`` for every package, the LICENSE, and the generated test
  vectors, and from it alone (outside the checkout) ``ppm vdaf vectors check`` and
  ``ppm dap vectors check`` pass with no path given;
- the sdist carries its tests and vectors and runs its own tests from its own sources.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from importlib import metadata
from pathlib import Path

import pytest

# One worker builds the distributions (python -m build writes build/ and *.egg-info in
# the source tree: two builds at once would race).
pytestmark = pytest.mark.xdist_group("packaging")

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("ppm_reference",)


def test_version_is_the_distribution_version(capsys: pytest.CaptureFixture[str]) -> None:
    from ppm_reference.cli import main

    try:
        code = main(["--version"])
    except SystemExit as exc:       # argparse's own exit, if main lets it through
        code = exc.code
    assert code == 0
    out = capsys.readouterr().out.strip()
    assert out.startswith(f"ppm-reference {metadata.version('ppm-reference')} ")
    assert "dap-09" in out and "dap-19" in out


def test_license_file_matches_metadata() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT"
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    for package in PACKAGES:
        assert (ROOT / package / "py.typed").exists(), package


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    try:
        import build  # noqa: F401
    except ImportError:
        pytest.skip("the `build` package is not installed (pip install -e '.[test]')")
    out = tmp_path_factory.mktemp("dist")
    # Built from a copy of the checkout: the other test workers write into it meanwhile
    # (compiled modules' temporary files under tests/ and ppm_reference/, which come and
    # go while the sdist lists and copies its files; seen failing the build once).
    src = tmp_path_factory.mktemp("src") / "checkout"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".venv", ".git", "__pycache__", "*.pyc*", ".hypothesis", ".mypy_cache",
        ".pytest_cache", ".ruff_cache", "*.egg-info", "build", "dist", "target",
        "node_modules"))
    proc = subprocess.run([sys.executable, "-m", "build", "-q", "-o", str(out), str(src)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and "Could not find a version" in proc.stderr + proc.stdout:
        pytest.skip("python -m build could not fetch setuptools (no PyPI, cold pip cache)")
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = out.glob("*.whl")
    (sdist,) = out.glob("*.tar.gz")
    return wheel, sdist


def _run_outside(args: list[str], pythonpath: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def test_wheel_carries_types_license_and_vectors(dists: tuple[Path, Path],
                                                 tmp_path: Path) -> None:
    wheel, _ = dists
    names = set(zipfile.ZipFile(wheel).namelist())
    for package in PACKAGES:
        assert f"{package}/py.typed" in names, package
    assert any(n.endswith("licenses/LICENSE") for n in names)
    shipped = {n for n in names if n.startswith("ppm_reference/vdaf/test_vectors/")}
    for folder in ("vdaf-08", "vdaf-18", "dap-09", "dap-18", "dap-19"):
        assert any(n.startswith(f"ppm_reference/vdaf/test_vectors/{folder}/") for n in shipped), folder
    # Unpacked alone (no checkout on the path: cwd and PYTHONPATH are elsewhere), the
    # installed code finds its own vectors and they pass.
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    work = tmp_path / "elsewhere"
    work.mkdir()
    probe = _run_outside(["-c", "import ppm_reference.vdaf.packaged as p; print(p.vectors_root())"],
                         site, work)
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.strip().startswith(str(site)), probe.stdout
    vdaf18 = _run_outside(["-m", "ppm_reference", "vdaf", "vectors", "check"], site, work)
    assert vdaf18.returncode == 0, vdaf18.stdout[-1500:] + vdaf18.stderr[-1500:]
    assert " 0 failed" in vdaf18.stdout
    vdaf08 = _run_outside(["-m", "ppm_reference", "vdaf", "vectors", "check", "--vdaf-version", "8"],
                          site, work)
    assert vdaf08.returncode == 0, vdaf08.stdout[-1500:]
    dap = _run_outside(["-m", "ppm_reference", "dap", "vectors", "check"], site, work)
    assert dap.returncode == 0, dap.stdout[-1500:] + dap.stderr[-1500:]
    assert dap.stdout.startswith("ok: "), dap.stdout


def test_sdist_runs_its_own_tests(dists: tuple[Path, Path], tmp_path: Path) -> None:
    _, sdist = dists
    with tarfile.open(sdist) as tar:
        tar.extractall(tmp_path, filter="data")
    (src,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    for needed in ("LICENSE", "setup.py", "MANIFEST.in", "tests/conftest.py",
                   "test_vectors/vdaf-18", "test_vectors/dap-19", "pyproject.toml"):
        assert (src / needed).exists(), needed
    # Its own sources first on the path: these tests exercise the sdist's code and
    # vectors, not the checkout's.
    proc = _run_outside(["-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider",
                         "tests/test_vdaf_vectors.py", "tests/test_dap_vectors.py",
                         "tests/test_packaging.py::test_license_file_matches_metadata"],
                        src, src)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout
