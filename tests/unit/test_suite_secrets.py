"""Suite env values are secrets unless marked public (issue 11 item 6): the agent's cases keep them, everything orch
stores or shows gets '***', and events are scrubbed of them."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from orchestrator.cli.suites import app
from orchestrator.errors import SuiteError
from orchestrator.protocol import Event
from orchestrator.suites.loader import parse_suite
from orchestrator.suites.registry import resolve
from orchestrator.suites.secrets import REDACTED, redact_spec, scrub_event, secret_values

SUITE = """\
name: gated-model
description: a benchmark that downloads a gated model
command: ["bench", "--model", "{model}"]
params:
  model: {type: str, default: "org/model", help: "model id"}
  batch: {type: list, default: [1, 2], help: "batch"}
env:
  HF_TOKEN: "hf_abcdefSECRET"
  TOKEN_FILE: "/run/{model}/hf_abcdefSECRET.txt"
  CUDA_VISIBLE_DEVICES: {value: "0", public: true}
  SHORT: "on"
parser: vllm-serve
"""
PUBLIC = frozenset({"CUDA_VISIBLE_DEVICES"})


def test_cases_keep_the_values_for_the_host_describe_redacts_them() -> None:
    sd = parse_suite(SUITE, "gated.yaml")
    assert sd.command is not None and sd.command.public_env == PUBLIC
    spec = resolve(sd, {}, cuda=False, run_id="r")
    assert spec["cases"][0]["env"] == {
        "HF_TOKEN": "hf_abcdefSECRET", "TOKEN_FILE": "/run/org/model/hf_abcdefSECRET.txt",
        "CUDA_VISIBLE_DEVICES": "0", "SHORT": "on",
    }  # fmt: skip
    assert sd.describe()["env"] == {"HF_TOKEN": REDACTED, "TOKEN_FILE": REDACTED, "CUDA_VISIBLE_DEVICES": "0",
                                    "SHORT": REDACTED}  # fmt: skip
    stored = redact_spec(spec, PUBLIC)
    assert [c["env"] for c in stored["cases"]] == [sd.describe()["env"]] * 2
    assert spec["cases"][0]["env"]["HF_TOKEN"] == "hf_abcdefSECRET"  # the spec sent to the host is not changed
    # longest first: the token file path is replaced whole; "on" is too short to search free text for
    assert secret_values(spec, PUBLIC) == ("/run/org/model/hf_abcdefSECRET.txt", "hf_abcdefSECRET")


def test_events_are_scrubbed() -> None:
    secrets = secret_values(resolve(parse_suite(SUITE, "g.yaml"), {}, cuda=False, run_id="r"), PUBLIC)
    ev = Event(seq=4, type="error", data={
        "message": "bench exited with status 1; stderr: 401 for hf_abcdefSECRET "
                   "(read /run/org/model/hf_abcdefSECRET.txt)",
        "case": {"batch": 1}, "info": {"output_tail": ["token=hf_abcdefSECRET", {"hf_abcdefSECRET": 1}], "n": 3},
    })  # fmt: skip
    out = scrub_event(ev, secrets)
    assert out.data["message"] == "bench exited with status 1; stderr: 401 for *** (read ***)"
    assert out.data["info"] == {"output_tail": ["token=***", {"***": 1}], "n": 3}
    assert out.data["case"] == {"batch": 1} and out.seq == 4 and out.type == "error"
    clean = Event(seq=5, type="log", data={"message": "on and on"})
    assert scrub_event(clean, secrets) is clean


def test_suites_show_prints_redacted_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "gated.yaml").write_text(SUITE)
    monkeypatch.setenv("ORCH_SUITE_DIR", str(tmp_path))
    for argv in (["show", "gated-model"], ["show", "gated-model", "--json"]):
        out = CliRunner().invoke(app, argv, env={"COLUMNS": "200"}).output
        assert "hf_abcdefSECRET" not in out and "***" in out, out
    out = CliRunner().invoke(app, ["show", "gated-model"], env={"COLUMNS": "200"}).output
    assert "env: HF_TOKEN=*** TOKEN_FILE=*** CUDA_VISIBLE_DEVICES=0 SHORT=***" in out


def test_a_malformed_env_entry_names_the_key() -> None:
    with pytest.raises(SuiteError) as exc:
        parse_suite(SUITE.replace('{value: "0", public: true}', '{value: "0", public: maybe}'), "g.yaml")
    assert "env" in exc.value.message and "CUDA_VISIBLE_DEVICES" in exc.value.message, exc.value.message
