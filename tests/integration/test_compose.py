"""docker-compose.yml parses (Debian's docker-compose, no daemon) and names the real commands and env."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from orchestrator.cli.main import app
from orchestrator.settings import Settings
from tests.plugins.services import service_unavailable
from tests.plugins.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = shutil.which("docker-compose")
TOKEN = "compose-test-token-0123456789abcdef"


def _config(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    if COMPOSE is None:
        service_unavailable("docker-compose", "no docker-compose on PATH", "apt-get install docker-compose")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ORCH_")}
    return subprocess.run(
        [COMPOSE, "-f", str(ROOT / "docker-compose.yml"), "config"],
        cwd=ROOT, env={**clean, **env}, capture_output=True, text=True, timeout=scaled(60),
    )  # fmt: skip


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    proc = _config({"ORCH_API_TOKEN": TOKEN})
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = yaml.safe_load(proc.stdout)
    return doc


def test_services_and_order(compose: dict[str, Any]) -> None:
    svc = compose["services"]
    assert set(svc) == {"postgres", "migrate", "api"}
    assert svc["postgres"]["healthcheck"]["test"]
    assert any("/var/lib/postgresql/data" in str(v) for v in svc["postgres"]["volumes"])
    assert svc["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert svc["api"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_commands_are_real_orch_commands(compose: dict[str, Any]) -> None:
    svc = compose["services"]
    assert svc["migrate"]["command"] == ["orch", "db", "upgrade"]
    serve = svc["api"]["command"]
    assert serve[:2] == ["orch", "serve"]
    runner = CliRunner()
    for argv in (svc["migrate"]["command"][1:], serve[1:]):
        options = [a for a in argv if a.startswith("--")]
        subcommand = [a for a in argv if not a.startswith("-")][: 2 if argv[0] == "db" else 1]
        result = runner.invoke(app, [*subcommand, "--help"])
        assert result.exit_code == 0, result.output
        for opt in options:
            assert opt in result.output, f"{opt} is not an option of orch {' '.join(subcommand)}"


def test_env_names_are_real_settings(compose: dict[str, Any]) -> None:
    fields = {f"ORCH_{name.upper()}" for name in Settings.FIELDS}
    for name in ("migrate", "api"):
        env = compose["services"][name]["environment"]
        orch_vars = {k for k in env if k.startswith("ORCH_")}
        assert orch_vars <= fields, orch_vars - fields
        assert (
            env["ORCH_DB_URL"].startswith("postgresql+psycopg://orch:")
            and "@postgres:5432/orch" in env["ORCH_DB_URL"]
        )
    assert compose["services"]["api"]["environment"]["ORCH_API_TOKEN"] == TOKEN


def test_api_token_is_required() -> None:
    proc = _config({})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "set ORCH_API_TOKEN to a random secret of 16+ characters" in proc.stderr


def test_dockerfile_runs_orch() -> None:
    text = (ROOT / "Dockerfile").read_text()
    assert 'CMD ["orch", "serve", "--host", "0.0.0.0", "--port", "8000"]' in text
    assert '".[postgres]"' in text and "USER orch" in text
