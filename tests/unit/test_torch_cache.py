"""The agent's torch-probe cache (``sysinfo.cached_torch_facts``): reused only while nothing torch's answer depends
on has changed, never for a failed probe. A fake ``torch`` package on PYTHONPATH counts its imports in a file, so
each test sees exactly how many real probes ran. Real interpreters, real files; no mocks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

AGENT_DIR = Path(__file__).resolve().parents[2] / "agents" / "orch_agent"

FAKE_TORCH = """
import os
with open(os.environ["FAKE_TORCH_COUNTER"], "a") as f:
    f.write("import\\n")
{fail}
__version__ = "2.9.0+fake"
class version:
    cuda = None
class cuda:
    @staticmethod
    def is_available():
        return False
"""


def _fake_torch(root: Path, *, fail: bool = False) -> Path:
    pkg = root / "torch"
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text(FAKE_TORCH.format(fail="raise RuntimeError('CUDA driver broken')" if fail else ""))
    return root


def _call(home: Path, site: Path, counter: Path, *, env: dict[str, str] | None = None, now: float | None = None,
          max_age_s: float | None = None) -> dict:
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import sysinfo; "
        "kw = json.loads(sys.argv[3]); print(json.dumps(sysinfo.cached_torch_facts(sys.argv[2], **kw)))"
    )
    kw: dict[str, float] = {}
    if now is not None:
        kw["now"] = now
    if max_age_s is not None:
        kw["max_age_s"] = max_age_s
    full_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home.parent),
        "PYTHONPATH": str(site),
        "FAKE_TORCH_COUNTER": str(counter),
        **(env or {}),
    }
    out = subprocess.run(
        [sys.executable, "-c", code, str(AGENT_DIR), str(home), json.dumps(kw)],
        env=full_env, capture_output=True, text=True, timeout=120, check=True,
    )
    return json.loads(out.stdout)


def _probes(counter: Path) -> int:
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_second_call_is_served_from_the_cache(tmp_path: Path) -> None:
    site, home, counter = _fake_torch(tmp_path / "site"), tmp_path / "orch", tmp_path / "count"
    first = _call(home, site, counter)
    assert first["ok"] is True and first["version"] == "2.9.0+fake" and first["cached_at"] is None
    assert _probes(counter) == 1
    second = _call(home, site, counter)
    assert _probes(counter) == 1, "the second facts call ran the probe again"
    assert second["cached_at"] is not None and {**second, "cached_at": None} == first
    files = list((home / "cache").iterdir())
    assert len(files) == 1 and files[0].name.startswith("torch-") and (files[0].stat().st_mode & 0o777) == 0o600


def test_a_changed_torch_or_environment_is_probed_again(tmp_path: Path) -> None:
    site, home, counter = _fake_torch(tmp_path / "site"), tmp_path / "orch", tmp_path / "count"
    _call(home, site, counter)
    init = site / "torch" / "__init__.py"
    init.write_text(init.read_text().replace("2.9.0+fake", "2.10.0+fake"))  # torch upgraded in place
    assert _call(home, site, counter)["version"] == "2.10.0+fake"
    assert _probes(counter) == 2
    _call(home, site, counter, env={"CUDA_VISIBLE_DEVICES": "0,1"})  # other GPUs visible: probe
    assert _probes(counter) == 3
    _call(home, site, counter, env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert _probes(counter) == 3
    assert len(list((home / "cache").iterdir())) == 1, "older caches of this host are removed"


def test_an_old_or_corrupt_cache_is_probed_again(tmp_path: Path) -> None:
    site, home, counter = _fake_torch(tmp_path / "site"), tmp_path / "orch", tmp_path / "count"
    first = _call(home, site, counter, now=1_000_000.0)
    assert first["cached_at"] is None
    assert _call(home, site, counter, now=1_000_000.0 + 3600, max_age_s=7200)["cached_at"] == 1_000_000.0
    assert _probes(counter) == 1
    assert _call(home, site, counter, now=1_000_000.0 + 7201, max_age_s=7200)["cached_at"] is None
    assert _probes(counter) == 2
    (cache,) = (home / "cache").iterdir()
    cache.write_text("{not json")
    assert _call(home, site, counter, now=1_000_000.0 + 7202)["ok"] is True
    assert _probes(counter) == 3


def test_a_failed_probe_is_never_cached(tmp_path: Path) -> None:
    site, home, counter = _fake_torch(tmp_path / "site", fail=True), tmp_path / "orch", tmp_path / "count"
    for n in (1, 2):
        out = _call(home, site, counter)
        assert out["ok"] is False and out["error"] == "RuntimeError: CUDA driver broken"
        assert _probes(counter) == n
    assert not (home / "cache").exists()


def test_an_unwritable_home_still_answers(tmp_path: Path) -> None:
    site, counter = _fake_torch(tmp_path / "site"), tmp_path / "count"
    home = tmp_path / "file-not-dir"
    home.write_text("")  # <home>/cache cannot be created
    assert _call(home, site, counter)["ok"] is True
    assert _call(home, site, counter)["ok"] is True
    assert _probes(counter) == 2
