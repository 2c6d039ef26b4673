"""``orch runs logs`` checks what it fetches against what the store recorded (issue 10, found by a tester), over
real sshd with a 3-case ``command`` suite:

- an output removed from the host is one line per case ("case 1: gone from the host; stored: ...") and exit 1,
  in the human output, ``--json`` and the API alike — also with ``--case`` and with all of ``outputs/`` gone;
- an output changed on the host since it was stored is flagged with both sizes and both sha256, exit 1;
- bytes that are not UTF-8 come back as they are: byte for byte on a pipe and in ``--output DIR``'s files, base64 in
  JSON (``encoding``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import Orch
from tests.plugins.sshd import SshdBed, SshdHost

pytestmark = [pytest.mark.sshd]

NL = b"\n"
V2 = b"v: 2\n"

EC = """\
name: ec
description: prints the figure N (three cases)
command: ["sh", "-c", "echo 'v: {n}'"]
params:
  n: {type: list, default: [1, 2, 3], help: "the figure printed"}
parser: {name: regex, pattern: 'v: (?P<v>\\d+)'}
metrics:
  v: {path: v, unit: count}
warmup: 0
repeat: 1
timeout_s: 120
"""

BINARY = """\
name: noisy
description: writes 70,000 bytes that are not UTF-8 to stderr, then the figure
command: ["sh", "-c", "head -c 70000 /dev/urandom >&2; printf '\\\\377\\\\376 v: 1\\\\n'"]
params:
  n: {type: list, default: [1], help: "one case"}
parser: {name: regex, pattern: 'v: (?P<v>\\d+)'}
metrics:
  v: {path: v, unit: count}
warmup: 0
repeat: 1
timeout_s: 120
"""


def _setup(sshd_bed: SshdBed, tmp_path: Path, db_url: str | None = None) -> tuple[Orch, SshdHost, Path]:
    host = sshd_bed.add("gpu-a")
    doc = {
        "defaults": {"python": sys.executable},
        "groups": {"bed": {"hosts": {host.name: {"address": host.address, "port": host.port}}}},
    }
    inv = tmp_path / "inventory.yaml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "ec.yaml").write_text(EC)
    (suites / "noisy.yaml").write_text(BINARY)
    orch = Orch(inv, db_url or f"sqlite:///{tmp_path / 'orch.db'}", tmp_path)
    up = orch("db", "upgrade")
    assert up.returncode == 0, up.stdout + up.stderr
    return orch, host, suites


def _run(orch: Orch, suites: Path, suite: str) -> str:
    doc = orch.json("run", suite, "--hosts", "gpu-a", "--suite-dir", str(suites), timeout=600)
    assert doc["status"] == "completed", doc
    return str(doc["run_id"])


def _outputs(host: SshdHost, run_id: str) -> Path:
    return host.home / ".orch" / "runs" / run_id / "gpu-a" / "outputs"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _api(orch: Orch, run_id: str, **params: Any) -> Any:
    from fastapi.testclient import TestClient

    from orchestrator.api.app import create_app
    from orchestrator.settings import Settings

    with TestClient(create_app(Settings(db_url=orch.db_url, inventory=orch.inventory))) as client:
        r = client.get(f"/api/v1/runs/{run_id}/logs", params=params)
        assert r.status_code == 200, r.text
        return r.json()


def test_outputs_gone_from_the_host_are_named_per_case_and_exit_1(sshd_bed: SshdBed, tmp_path: Path) -> None:
    orch, host, suites = _setup(sshd_bed, tmp_path)
    run_id = _run(orch, suites, "ec")
    out = _outputs(host, run_id)
    gone = f"case 1: gone from the host; stored: run 0 stdout 5 bytes, sha256 {_sha(V2)}; run 0 stderr empty"

    shutil.rmtree(out / "1")
    human = orch("runs", "logs", run_id)
    assert human.returncode == 1, human.stdout + human.stderr
    assert "==> gpu-a case 0 run 0 stdout (5 bytes" in human.stdout and "v: 1\n" in human.stdout
    assert "==> gpu-a case 2 run 0 stdout (5 bytes" in human.stdout and "v: 3\n" in human.stdout
    err = " ".join(human.stderr.split())
    assert f"gpu-a {gone}" in err, err
    assert "keeps outputs only for command suites" not in err and "Traceback" not in err

    doc = orch.json("runs", "logs", run_id, expect_rc=1)
    (h,) = doc["hosts"]
    assert [c["case_index"] for c in h["cases"]] == [0, 2]
    assert h["problems"] == [gone] and h["error"] == "1 of 3 cases: outputs gone from the host or changed"
    assert h["missing"] == [
        {"case_index": 1, "run": 0, "stream": "stdout", "bytes": 5, "sha256": _sha(V2)},
        {"case_index": 1, "run": 0, "stream": "stderr", "bytes": 0, "sha256": _sha(b"")},
    ]
    assert _api(orch, run_id)["hosts"][0]["problems"] == [gone]

    one = orch("runs", "logs", run_id, "--case", "1")  # the host has no outputs/1: the same line, not a hint
    assert one.returncode == 1 and one.stdout == "", one.stdout + one.stderr
    err = " ".join(one.stderr.split())
    assert f"gpu-a {gone}" in err and "keeps outputs only for command suites" not in err, err
    api = _api(orch, run_id, case=1)["hosts"][0]
    assert api["cases"] == [] and api["problems"] == [gone]

    shutil.rmtree(out)  # all of outputs/ removed: every case named, nothing passes for an empty answer
    doc = orch.json("runs", "logs", run_id, expect_rc=1)
    (h,) = doc["hosts"]
    assert h["cases"] == [] and h["error"] == "3 of 3 cases: outputs gone from the host or changed"
    assert [p.split(":")[0] for p in h["problems"]] == ["case 0", "case 1", "case 2"]

    shutil.rmtree(out.parent)  # the run's whole directory removed on the host: the same, and the hint says so
    doc = orch.json("runs", "logs", run_id, expect_rc=1)
    (h,) = doc["hosts"]
    assert [p.split(":")[0] for p in h["problems"]] == ["case 0", "case 1", "case 2"] and len(h["missing"]) == 6
    assert "the run's directory was removed from the host" in h["hint"], h


def test_an_output_changed_on_the_host_is_flagged_with_both_digests(
    sshd_bed: SshdBed, tmp_path: Path, db_url: str
) -> None:
    """On SQLite and PostgreSQL: the stored sizes and digests are read from either."""
    orch, host, suites = _setup(sshd_bed, tmp_path, db_url)
    run_id = _run(orch, suites, "ec")
    (_outputs(host, run_id) / "2" / "0.stdout").write_bytes(b"v: 7000\n")
    changed = (f"case 2 run 0 stdout: changed on the host since it was stored: now 8 bytes, sha256 "
               f"{_sha(b'v: 7000' + NL)}; stored 5 bytes, sha256 {_sha(b'v: 3' + NL)}")  # fmt: skip

    human = orch("runs", "logs", run_id)
    assert human.returncode == 1, human.stdout + human.stderr
    assert f"gpu-a {changed}" in " ".join(human.stderr.split()), human.stderr
    head = "==> gpu-a case 2 run 0 stdout (8 bytes, sha256 "
    line = next(ln for ln in human.stdout.splitlines() if ln.startswith(head))
    assert "CHANGED since stored (5 bytes" in line, line

    doc = orch.json("runs", "logs", run_id, "--case", "2", expect_rc=1)
    (h,) = doc["hosts"]
    f = h["cases"][0]["runs"][0]["stdout"]
    assert f["check"] == "changed" and f["sha256"] == _sha(b"v: 7000\n") and f["bytes"] == 8
    assert f["stored"] == {"bytes": 5, "sha256": _sha(b"v: 3\n")}
    assert h["problems"] == [changed] and h["missing"] == []
    ok = orch.json("runs", "logs", run_id, "--case", "0")  # untouched: verified, exit 0
    assert ok["hosts"][0]["cases"][0]["runs"][0]["stdout"]["check"] == "ok" and ok["hosts"][0]["error"] is None
    assert _api(orch, run_id, case=2)["hosts"][0]["problems"] == [changed]


def test_bytes_that_are_not_utf8_come_back_as_they_are(sshd_bed: SshdBed, tmp_path: Path) -> None:
    orch, host, suites = _setup(sshd_bed, tmp_path)
    run_id = _run(orch, suites, "noisy")
    raw = (_outputs(host, run_id) / "0" / "0.stderr").read_bytes()
    stdout = b"\xff\xfe v: 1\n"
    assert len(raw) == 70000 and (_outputs(host, run_id) / "0" / "0.stdout").read_bytes() == stdout

    doc = orch.json("runs", "logs", run_id, "--case", "0")
    f = doc["hosts"][0]["cases"][0]["runs"][0]
    assert f["stderr"]["encoding"] == "base64" and base64.b64decode(f["stderr"]["text"]) == raw
    assert f["stderr"]["bytes"] == 70000 and f["stderr"]["sha256"] == _sha(raw) and f["stderr"]["check"] == "ok"
    assert base64.b64decode(f["stdout"]["text"]) == stdout
    api = _api(orch, run_id, case=0)["hosts"][0]["cases"][0]["runs"][0]["stderr"]
    assert api["encoding"] == "base64" and base64.b64decode(api["text"]) == raw

    res = subprocess.run(orch.argv("runs", "logs", run_id, "--case", "0"), cwd=orch.cwd, env=orch.env(),
                         capture_output=True, timeout=240)  # a pipe: the bytes as the tool wrote them
    assert res.returncode == 0, res.stderr
    head = f"==> gpu-a case 0 run 0 stderr (70000 bytes, sha256 {_sha(raw)}) <==\n".encode()
    assert stdout in res.stdout and res.stdout.endswith(head + raw + (b"" if raw.endswith(NL) else NL))
    assert len(res.stdout) < 70000 + 1000

    saved = tmp_path / "saved"  # --output DIR: each file as it is, in the host's layout
    res = subprocess.run(orch.argv("runs", "logs", run_id, "--output", str(saved)), cwd=orch.cwd, env=orch.env(),
                         capture_output=True, timeout=240)  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    assert (saved / "gpu-a" / "0" / "0.stderr").read_bytes() == raw
    assert (saved / "gpu-a" / "0" / "0.stdout").read_bytes() == stdout
    assert b"2 files written, byte for byte" in res.stdout and raw not in res.stdout
    again = orch("runs", "logs", run_id, "--output", str(saved))  # never overwritten: a usage error naming the file
    assert again.returncode == 2, again.stdout + again.stderr
    err = " ".join(again.stderr.split())
    assert f"--output: {saved / 'gpu-a' / '0'}/0." in err and "already exists; nothing was written" in err, err
    assert (saved / "gpu-a" / "0" / "0.stderr").read_bytes() == raw


def test_utf8_outputs_stay_text_in_json(sshd_bed: SshdBed, tmp_path: Path) -> None:
    orch, host, suites = _setup(sshd_bed, tmp_path)
    run_id = _run(orch, suites, "ec")
    doc = orch.json("runs", "logs", run_id, "--case", "0")
    f = doc["hosts"][0]["cases"][0]["runs"][0]
    assert f["stdout"] == {"text": "v: 1\n", "encoding": "utf-8", "bytes": 5, "sha256": _sha(b"v: 1\n"),
                           "check": "ok", "stored": {"bytes": 5, "sha256": _sha(b"v: 1\n")}}  # fmt: skip
    assert json.dumps(doc)


def test_a_case_directory_replaced_by_a_link_a_fifo_or_a_file_is_named_never_followed(
    sshd_bed: SshdBed, tmp_path: Path
) -> None:
    """The variant tester: a case's directory under ``outputs/`` replaced by a symbolic link to a directory
    elsewhere was followed (its files printed and checked as the run's); replaced by a FIFO or a plain file, the
    case was called "gone from the host". Now none is read or followed, each is named for what it is, exit 1,
    in the human output, ``--json``, ``--case`` and the API; with ``outputs/`` itself a link, every case says so."""
    orch, host, suites = _setup(sshd_bed, tmp_path)
    run_id = _run(orch, suites, "ec")
    out = _outputs(host, run_id)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "0.stdout").write_text("TOPSECRET\n")
    shutil.rmtree(out / "0")
    (out / "0").symlink_to(elsewhere)
    shutil.rmtree(out / "1")
    os.mkfifo(out / "1")
    shutil.rmtree(out / "2")
    (out / "2").write_text("v: 3\n")
    res = orch("runs", "logs", run_id, timeout=300)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "TOPSECRET" not in res.stdout + res.stderr
    err = " ".join(res.stderr.split())
    for case, figure, kind in ((0, b"v: 1\n", "a symbolic link"), (1, V2, "a FIFO"), (2, b"v: 3\n", "a regular file")):
        assert f"case {case}: its outputs directory is {kind} on the host, not a directory: not read; stored: run 0 " \
               f"stdout 5 bytes, sha256 {_sha(figure)}" in err, err  # fmt: skip
    assert "gone from the host;" not in err, err
    doc = orch.json("runs", "logs", run_id, expect_rc=1)
    assert "TOPSECRET" not in json.dumps(doc)
    got = {c["case_index"]: (c["not_read"], c["runs"]) for c in doc["hosts"][0]["cases"]}
    assert got == {0: ("a symbolic link", []), 1: ("a FIFO", []), 2: ("a regular file", [])}, got
    one = orch.json("runs", "logs", run_id, "--case", "0", expect_rc=1)
    assert one["hosts"][0]["problems"][0].startswith("case 0: its outputs directory is a symbolic link"), one
    api = _api(orch, run_id)
    assert [c.get("not_read") for c in api["hosts"][0]["cases"]] == ["a symbolic link", "a FIFO", "a regular file"]
    for case in ("0", "1", "2"):
        (out / case).unlink()
    out.rename(out.with_name("kept"))
    out.symlink_to(out.with_name("kept"))  # outputs/ itself a link: nothing under it is read
    doc = orch.json("runs", "logs", run_id, expect_rc=1)
    assert doc["hosts"][0]["not_read"] == "a symbolic link", doc
    assert [p.split(";")[0] for p in doc["hosts"][0]["problems"]] == [
        f"case {c}: the run's outputs/ is a symbolic link on the host, not a directory: not read" for c in range(3)
    ], doc
    one = orch.json("runs", "logs", run_id, "--case", "1", expect_rc=1)  # before: "case 1: gone from the host"
    assert one["hosts"][0]["problems"][0].startswith(
        "case 1: the run's outputs/ is a symbolic link on the host, not a directory: not read; stored: run 0 stdout"
    ), one


def test_entries_of_outputs_not_named_as_the_worker_names_cases_are_not_cases(
    sshd_bed: SshdBed, tmp_path: Path
) -> None:
    """The variant tester: an entry named ``²`` in ``outputs/`` made ``agent logs`` crash (``int('²')``: a
    traceback, no answer); ``01`` or ``١٢`` (Arabic-Indic digits) became cases 1 and 12. A case is a decimal
    number as the worker writes it; any other entry is not one of the run's cases."""
    orch, host, suites = _setup(sshd_bed, tmp_path)
    run_id = _run(orch, suites, "ec")
    out = _outputs(host, run_id)
    for name in ("²", "01", "١٢"):
        (out / name).mkdir()
        (out / name / "0.stdout").write_text("v: 9\n")
    doc = orch.json("runs", "logs", run_id)
    assert [c["case_index"] for c in doc["hosts"][0]["cases"]] == [0, 1, 2], doc
    assert all(f["stdout"]["check"] == "ok" for c in doc["hosts"][0]["cases"] for f in c["runs"]), doc


def test_an_output_replaced_by_a_fifo_a_link_or_a_directory_is_named_for_what_it_is_never_read(
    sshd_bed: SshdBed, tmp_path: Path
) -> None:
    """A tester replaced kept outputs on the host: a FIFO made ``orch runs logs`` hang (the agent's open waited for
    a writer), a symbolic link to a file outside the run directory was printed, a directory gave a bare
    IsADirectoryError. None of them is read now, exit 1; each is named for what is in its place (they were called
    "gone from the host", which sent the user looking for a removed file)."""
    orch, host, suites = _setup(sshd_bed, tmp_path)
    run_id = _run(orch, suites, "ec")
    out = _outputs(host, run_id)
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET\n")
    (out / "0" / "0.stdout").unlink()
    os.mkfifo(out / "0" / "0.stdout")
    (out / "1" / "0.stdout").unlink()
    (out / "1" / "0.stdout").symlink_to(secret)
    (out / "2" / "0.stdout").unlink()
    (out / "2" / "0.stdout").mkdir()
    res = orch("runs", "logs", run_id, timeout=300)  # before: no answer within 200 s (the FIFO)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "TOPSECRET" not in res.stdout + res.stderr and "IsADirectoryError" not in res.stderr
    err = " ".join(res.stderr.split())
    for case, figure, kind in ((0, b"v: 1\n", "a FIFO"), (1, V2, "a symbolic link"), (2, b"v: 3\n", "a directory")):
        assert f"case {case} run 0 stdout: {kind} is in its place on the host, not a regular file: not read; " \
               f"stored: run 0 stdout 5 bytes, sha256 {_sha(figure)}" in err, err  # fmt: skip
    assert "gone from the host;" not in err, err
    doc = orch.json("runs", "logs", run_id, expect_rc=1)
    assert [(m["case_index"], m["stream"]) for m in doc["hosts"][0]["missing"]] == [(0, "stdout"), (1, "stdout"),
                                                                                   (2, "stdout")]  # fmt: skip
