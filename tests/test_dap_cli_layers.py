"""The logic `ppm` commands call in the dap layer: DP specification rules (dap.dp), the
admin API client (dap.admin_client) and provisioning with rollback (dap.provision); and
the import rule that nothing outside dap/cli imports the CLI."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from ppm_reference.dap import dp
from ppm_reference.dap.admin_client import AdminClient, AdminError, admin_base
from ppm_reference.dap.provision import Target, provision

ROOT = Path(__file__).resolve().parent.parent


def test_make_spec_defaults_and_errors() -> None:
    assert dp.make_spec("none") is None and dp.make_spec(None) is None
    assert dp.make_spec("HistogramWithAggregatorRandomization", epsilon=1) == {
        "policy": "HistogramWithAggregatorRandomization", "epsilon": 1.0,
        "delta": dp.DEFAULT_DELTA}
    assert dp.make_spec("HistogramWithAggregatorLaplace", epsilon=2, delta=0.5) == {
        "policy": "HistogramWithAggregatorLaplace", "epsilon": 2.0}
    with pytest.raises(dp.DpSpecError, match="needs epsilon"):
        dp.make_spec("SumVecWithAggregatorLaplace")
    with pytest.raises(dp.DpSpecError, match=r"delta must be in \(0, 1\), got 1.0"):
        dp.make_spec("SumVecWithAggregatorRandomization", epsilon=1, delta=1.0)
    with pytest.raises(dp.DpSpecError, match="eps0 must be positive"):
        dp.make_spec("MultiHotHistogramWithClientRandomization", eps0=float("inf"))


def test_required_max_weight() -> None:
    spec = dp.make_spec("MultiHotHistogramWithClientRandomization", eps0=3)
    assert dp.required_max_weight(None, "Prio3Histogram", 4) is None
    needed = dp.required_max_weight(spec, "Prio3MultihotCountVec", 10)
    assert needed == dp.multihot_max_weight(3.0, 10, dp.DEFAULT_FP) and needed is not None
    with pytest.raises(dp.DpSpecError, match="applies to Prio3MultihotCountVec, not Prio3Sum"):
        dp.required_max_weight(spec, "Prio3Sum", 10)
    with pytest.raises(dp.DpSpecError, match="needs length"):
        dp.required_max_weight(spec, "Prio3MultihotCountVec", None)
    assert dp.describe_spec(spec) == ("MultiHotHistogramWithClientRandomization"
                                      "(eps0=3, fp=1e-18)")


def test_admin_client_urls_and_errors() -> None:
    assert admin_base("http://h:1/a/internal/tasks") == "http://h:1/a/"
    assert admin_base("https://h") == "https://h/"
    with pytest.raises(ValueError, match="not an http"):
        AdminClient("ftp://h/", "t")
    client = AdminClient("http://127.0.0.1:9/", "t", timeout=5)
    with pytest.raises(AdminError, match="cannot reach the admin API at "
                       "http://127.0.0.1:9/internal/tasks"):
        client.put_task({})


class FakeTarget(Target):
    def __init__(self, role: str, fail_put: bool = False, fail_remove: bool = False) -> None:
        self.role = role
        self.fail_put, self.fail_remove = fail_put, fail_remove
        self.tasks: list[Any] = []

    def put(self, pt: Any) -> None:
        if self.fail_put:
            raise RuntimeError(f"{self.role} down")
        self.tasks.append(pt)

    def remove(self, pt: Any) -> None:
        if self.fail_remove:
            raise RuntimeError("gone")
        self.tasks.remove(pt)


def test_provision_helper_first_and_rollback() -> None:
    helper, leader = FakeTarget("helper"), FakeTarget("leader")
    provision("pt", helper, leader)  # type: ignore[arg-type]
    assert helper.tasks == ["pt"] and leader.tasks == ["pt"]

    helper, leader = FakeTarget("helper"), FakeTarget("leader", fail_put=True)
    with pytest.raises(RuntimeError, match="leader down"):
        provision("pt", helper, leader)  # type: ignore[arg-type]
    assert helper.tasks == []  # rolled back

    warnings: list[str] = []
    helper = FakeTarget("helper", fail_remove=True)
    with pytest.raises(RuntimeError, match="leader down"):
        provision("pt", helper, leader, warn=warnings.append)  # type: ignore[arg-type]
    assert warnings == ["could not remove the task from the helper: gone"]

    helper, leader = FakeTarget("helper", fail_put=True), FakeTarget("leader")
    with pytest.raises(RuntimeError, match="helper down"):
        provision("pt", helper, leader)  # type: ignore[arg-type]
    assert leader.tasks == []  # the Leader is never given a task its Helper lacks


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def test_only_the_cli_imports_the_cli() -> None:
    allowed: set[Path] = set()
    offenders = []
    for path in sorted((ROOT / "ppm_reference" / "dap").rglob("*.py")):
        if (ROOT / "ppm_reference" / "dap" / "cli") in path.parents or path in allowed:
            continue
        if any(_is_cli(m) for m in _imports(path)):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
    # dap/demo.py (the demo job) in particular, and the check would see such an import.
    assert "ppm_reference.dap.client" in _imports(ROOT / "ppm_reference" / "dap" / "demo.py")
    assert _is_cli("ppm_reference.dap.cli.errors") and not _is_cli("ppm_reference.dap.client")


def _is_cli(module: str) -> bool:
    return module == "ppm_reference.dap.cli" or module.startswith("ppm_reference.dap.cli.")
