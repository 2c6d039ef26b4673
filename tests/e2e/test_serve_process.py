"""``orch serve`` as its own process (uvicorn, as a user starts it) over the results of a real ``orch run`` on the
sshd test bed — SQLite and PostgreSQL: health, runs, results, series, a write with the token, a clean stop."""

from __future__ import annotations

import signal
import socket
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import Orch
from tests.e2e.test_run_lifecycle import STEP_SUITE
from tests.plugins.timing import scaled, wait_for

pytestmark = [pytest.mark.sshd]

TOKEN = "serve-e2e-token-0123456789abcdef"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _healthy(base: str) -> bool:
    try:
        return httpx.get(base + "/healthz", timeout=scaled(5)).status_code == 200
    except httpx.TransportError:
        return False


def test_orch_serve_answers_about_a_real_run(two_hosts_any_db: tuple[Orch, list[Any]], tmp_path: Path) -> None:
    orch, _ = two_hosts_any_db
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "step.yaml").write_text(STEP_SUITE)
    run = orch.json("run", "step-sweep", "--hosts", "ct200,b300", "--suite-dir", str(suites), "--label", "first")
    assert run["status"] == "completed", run
    rid = run["run_id"]

    port = _free_port()
    env = {**orch.env(), "ORCH_API_TOKEN": TOKEN}
    proc = subprocess.Popen(
        orch.argv("serve", "--port", str(port)), cwd=orch.cwd, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: proc.poll() is not None or _healthy(base), timeout_s=60, what="orch serve to answer")
        assert proc.poll() is None, proc.communicate()[0][-3000:]
        with httpx.Client(base_url=base, timeout=scaled(30)) as c:
            health = c.get("/healthz").json()
            dialect = "sqlite" if orch.db_url.startswith("sqlite") else "postgresql"
            assert (health["status"], health["database"]) == ("ok", dialect)
            runs = c.get("/api/v1/runs").json()
            assert runs["total"] == 1
            assert [(r["id"], r["suite"], r["status"], r["label"]) for r in runs["items"]] == [
                (rid, "step-sweep", "completed", "first")
            ]
            results = c.get(f"/api/v1/runs/{rid}/results", params={"limit": 100}).json()
            assert results["total"] == 14
            got = sorted((x["host"], x["case"]["M"], x["metrics"]["time_ms"]["value"]) for x in results["items"])
            expected = [(h, m, float(min(m, 8))) for h in ("gpu-a", "gpu-b") for m in (1, 2, 4, 8, 16, 32, 64)]
            assert got == expected
            assert {x["metrics"]["time_ms"]["unit"] for x in results["items"]} == {"ms"}
            series = c.get("/api/v1/series", params={"suite": "step-sweep", "metric": "time_ms", "x": "M"}).json()
            assert (series["unit"], series["x"]) == ("ms", "M")
            assert sorted(line["host"] for line in series["lines"]) == ["gpu-a", "gpu-b"]
            steps = [(m, float(min(m, 8))) for m in (1, 2, 4, 8, 16, 32, 64)]
            for line in series["lines"]:
                assert [(p["x"], p["y"]) for p in line["points"]] == steps
            assert c.post(f"/api/v1/runs/{rid}/label", json={"label": "x"}).status_code == 401  # no token
            auth = {"Authorization": f"Bearer {TOKEN}"}
            relabel = c.post(f"/api/v1/runs/{rid}/label", json={"label": "checked"}, headers=auth)
            assert relabel.status_code == 200 and relabel.json()["label"] == "checked"
            assert c.get(f"/api/v1/runs/{rid}").json()["label"] == "checked"
            missing = c.get("/api/v1/runs/00000000-0000-7000-8000-000000000000")
            assert (missing.status_code, set(missing.json())) == (404, {"detail"})
        shown = orch.json("runs", "show", rid)  # the CLI reads what the API wrote
        assert shown["run"]["label"] == "checked"
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=scaled(60))[0]
    # uvicorn shuts down cleanly on SIGTERM, then re-raises it (so a supervisor sees the signal it sent)
    assert proc.returncode == -signal.SIGTERM, out[-3000:]
    assert "Application shutdown complete." in out and "Traceback" not in out, out[-3000:]
