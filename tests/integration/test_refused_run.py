"""A run refused before it started stores nothing (README, What a run leaves): after a host key change,
``orch run ... --hosts lab`` stored a failed run with 0 results, which ``runs show``/``latest`` then picked, and
printed "run state on the hosts: box-0: .../runs/<id>/box-0/" for a directory never made. Real sshd, real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.integration import peers
from tests.integration.peers import entry
from tests.plugins.sshd import ClientHome, SshdBed

pytestmark = pytest.mark.sshd


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_every_host_refused_stores_no_run(sshd_bed: SshdBed, client_home: ClientHome, tmp_path: Path) -> None:
    h = sshd_bed.add("rf-box-0")
    h.reinstall("ed25519")  # the host was reinstalled: the key on file no longer matches
    inv = tmp_path / "inventory.yaml"
    inv.write_text(peers.inventory_text({"rf-box-0": entry(h)}, group="lab"))

    def orch(*args: str) -> tuple[int, str, str]:
        res = peers.orch_cli(*args, home=client_home.home, inventory=inv, cwd=tmp_path)
        return res.returncode, res.stdout, res.stderr

    code, out, err = orch("run", "noop", "--hosts", "lab")
    text = _flat(out + err)
    assert code == 1, text
    assert "rf-box-0: failed" in text and "changed" in text
    assert "no run stored: every host failed before starting" in text
    assert "/runs/" not in text and "run state" not in text  # no directory was made on the host
    assert "Traceback" not in text

    code, out, err = orch("run", "noop", "--hosts", "lab", "--json")
    doc = json.loads(out)
    assert code == 1 and doc["run_id"] is None and doc["stored"] is False and doc["status"] == "failed"
    assert [(x["host"], x["status"], x["results"], x["state_dir"]) for x in doc["hosts"]] == [
        ("rf-box-0", "failed", 0, None)
    ]
    assert "records a different ssh-ed25519 key" in doc["hosts"][0]["error"] and doc["hosts"][0]["hint"]

    code, out, err = orch("runs", "list", "--json")
    assert code == 0 and json.loads(out)["items"] == [], out
    code, out, err = orch("runs", "show", "latest")
    assert code == 2 and "Traceback" not in err, out + err


def test_a_refused_host_in_a_stored_run_names_no_directory(
    sshd_bed: SshdBed, client_home: ClientHome, tmp_path: Path
) -> None:
    h = sshd_bed.add("rf-box-1")
    h.reinstall("ed25519")
    home = tmp_path / "local-home"
    inv = tmp_path / "inventory.yaml"
    hosts = {"rf-box-1": entry(h), "rf-local": {"connection": "local", "orch_home": str(home)}}
    inv.write_text(peers.inventory_text(hosts, group="lab"))
    res = peers.orch_cli("run", "noop", "--hosts", "lab", "--json", home=client_home.home, inventory=inv,
                         cwd=tmp_path)  # fmt: skip
    doc = json.loads(res.stdout)
    assert res.returncode == 1 and doc["run_id"], res.stdout + res.stderr
    dirs = {x["host"]: x["state_dir"] for x in doc["hosts"]}
    assert dirs == {"rf-box-1": None, "rf-local": f"{home}/runs/{doc['run_id']}/rf-local/"}
    assert Path(dirs["rf-local"]).is_dir()
    res = peers.orch_cli("runs", "show", doc["run_id"], home=client_home.home, inventory=inv, cwd=tmp_path)
    assert res.returncode == 0
