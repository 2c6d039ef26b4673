"""Settings: ORCH_* from the environment (pydantic-settings' rules for these fields), arguments winning."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from pydantic import SecretStr

from orchestrator.errors import ConfigError
from orchestrator.settings import DEFAULT_DB_URL, Settings


def test_defaults_without_environment() -> None:
    s = Settings(env={})
    assert (s.db_url, s.inventory, s.api_token, s.suite_dir) == (DEFAULT_DB_URL, Path("inventory.yaml"), None, None)
    assert (s.connect_timeout_s, s.command_timeout_s, s.max_concurrency) == (10.0, 60.0, 64)
    assert s.worker_stopped_s == 300.0
    assert Settings(env={"ORCH_WORKER_STOPPED_S": "2.5"}).worker_stopped_s == 2.5
    assert s.follower_silent_s == 60.0
    assert Settings(env={"ORCH_FOLLOWER_SILENT_S": "10"}).follower_silent_s == 10.0


def test_environment_is_read_case_insensitively_and_arguments_win() -> None:
    env = {"ORCH_DB_URL": "sqlite:///a.db", "orch_inventory": "inv.yaml", "ORCH_API_TOKEN": "t0k3n-abcdefghijkl",
           "ORCH_MAX_CONCURRENCY": "8", "ORCH_SUITE_DIR": "/s", "ORCH_UNKNOWN": "ignored", "OTHER": "x"}  # fmt: skip
    s = Settings(env=env)
    assert (s.db_url, s.inventory, s.max_concurrency) == ("sqlite:///a.db", Path("inv.yaml"), 8)
    assert s.suite_dir == Path("/s")
    assert isinstance(s.api_token, SecretStr) and s.api_token.get_secret_value() == "t0k3n-abcdefghijkl"
    assert "t0k3n" not in repr(s)
    s = Settings(db_url="sqlite:///b.db", api_token=None, env=env)
    assert (s.db_url, s.api_token) == ("sqlite:///b.db", None)


@pytest.mark.parametrize(
    ("name", "value", "why"),
    [("ORCH_CONNECT_TIMEOUT_S", "0", "> 0"), ("ORCH_COMMAND_TIMEOUT_S", "soon", "> 0"),
     ("ORCH_MAX_CONCURRENCY", "0", ">= 1"), ("ORCH_MAX_CONCURRENCY", "2.5", ">= 1"),
     ("ORCH_WORKER_STOPPED_S", "0", "> 0"), ("ORCH_WORKER_STOPPED_S", "-1", "> 0"),
     ("ORCH_FOLLOWER_SILENT_S", "0", "> 0"), ("ORCH_FOLLOWER_SILENT_S", "never", "> 0")],
)  # fmt: skip
def test_a_bad_number_names_the_variable(name: str, value: str, why: str) -> None:
    with pytest.raises(ConfigError) as err:
        Settings(env={name: value})
    assert err.value.message == f"{name} / {name[5:].lower()}={value!r} is not a number {why}"


def test_fields_are_the_constructor_arguments() -> None:
    params = set(inspect.signature(Settings.__init__).parameters) - {"self", "env"}
    assert set(Settings.FIELDS) == params
