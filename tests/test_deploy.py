"""The container image and the compose file (deploy/): what can be checked without a
Docker engine (the machines have only the client; `docker build` runs where one is).

- every path the Dockerfile copies exists, and it installs the PostgreSQL extra;
- every file the compose file mounts exists, and the services run `ppm leader`/`helper`
  with the configuration file it mounts;
- the mounted configurations pass the same checks as `ppm leader --check`: their
  datastores are PostgreSQL URLs kept as URLs (not taken for relative paths).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ppm_reference.dap.server.config import load_config_file

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"


def test_dockerfile_copies_what_exists() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    sources = []
    for line in text.splitlines():
        m = re.match(r"COPY\s+(.+)\s+\S+$", line.strip())
        if m:
            sources += m.group(1).split()
    assert sources, "no COPY lines"
    for src in sources:
        assert (ROOT / src).exists(), src
    assert '".[postgresql]"' in text
    assert re.search(r'ENTRYPOINT \["ppm"\]', text)


def test_compose_mounts_and_commands() -> None:
    text = (DEPLOY / "compose.yaml").read_text()
    mounts = re.findall(r"-\s+\./([\w.-]+):", text)
    assert {"leader.json", "helper.json", "postgres-init.sql"} <= set(mounts)
    for name in mounts:
        assert (DEPLOY / name).exists(), name
    assert "dockerfile: deploy/Dockerfile" in text and (DEPLOY / "Dockerfile").exists()
    for role in ("leader", "helper"):
        assert f'command: ["{role}", "--config", "/etc/ppm/config.json"]' in text
        assert f"./{role}.json:/etc/ppm/config.json:ro" in text
    databases = re.findall(r"CREATE DATABASE (\w+);", (DEPLOY / "postgres-init.sql").read_text())
    assert databases == ["ppm_leader", "ppm_helper"]


@pytest.mark.parametrize("role", ["leader", "helper"])
def test_compose_configurations_are_valid(role: str) -> None:
    config = load_config_file(DEPLOY / f"{role}.json", role=role)
    assert config.datastore == f"postgresql://postgres@postgres:5432/ppm_{role}"
    assert config.listen_host == "0.0.0.0" and config.listen_port == 8080
    # What the container runs, with --check: the same validation, exit 0.
    from ppm_reference.cli import main

    assert main([role, "--config", str(DEPLOY / f"{role}.json"), "--check"]) == 0
