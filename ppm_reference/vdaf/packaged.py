"""Where the test vectors this project generates live, installed or in a checkout.

A wheel carries them as package data in ``vdaf/test_vectors/`` (``setup.py`` copies the
repository's ``test_vectors/`` there at build time), so that ``ppm vdaf vectors check``
and ``ppm dap vectors check`` work from a plain ``pip install``. In a source checkout
(or an editable install) they are the repository's ``test_vectors/``.
"""

from __future__ import annotations

from pathlib import Path

_MARKER = "vdaf-18"


def vectors_root() -> Path | None:
    """The folder holding ``vdaf-08/``, ``vdaf-18/``, ``dap-09/``, ... or None."""
    here = Path(__file__).resolve().parent
    candidates = [here / "test_vectors"] + [p / "test_vectors" for p in here.parents[:3]]
    for candidate in candidates:
        if (candidate / _MARKER).is_dir():
            return candidate
    return None


def vdaf_vectors_dir(version: int) -> Path | None:
    """The packaged VDAF vectors of wire version ``version`` (``vdaf-08``, ``vdaf-18``)."""
    root = vectors_root()
    if root is None:
        return None
    folder = root / f"vdaf-{version:02d}"
    return folder if folder.is_dir() else None
