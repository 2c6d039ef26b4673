"""The host's side of one ``orch run``, without SSH: the deploy check with the facts (``deploy_helper ensure
--facts``) and ``agent start --spec - --follow`` of a one-case ``sleep 0`` spec until its ``done`` line (the
worker's start and run included), for the agent of a git ref (``--before``, deployed as that ref deploys it) and
the agent of this checkout, interleaved in one run, under one interpreter, against ``python -c 1``.

Each ``start`` runs under a fresh orch home; the agent is deployed once per variant into its own HOME (the first
check unpacks, as ``orch deploy`` does). The last section is ``python -X importtime`` of each variant's start
process (cumulative, top-level modules).

Usage: .venv/bin/python bench/agent_start.py [--before REF | --before-dir CHECKOUT] [--repeat 15] [--python PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator.agent_build import agent_pyz_bytes  # noqa: E402
from orchestrator.remote.deploy_helper import tree_sha256  # noqa: E402


class Variant:
    """One agent as deployed on a host: its helper source, its sha, what ``python PATH`` runs, a HOME."""

    def __init__(self, name: str, src: Path, helper: str, home: Path, tree: bool) -> None:
        self.name, self.helper, self.home = name, helper, home
        data = agent_pyz_bytes(src)
        self.sha = hashlib.sha256(data).hexdigest()
        d = home / ".orch" / "agent" / self.sha
        d.mkdir(parents=True)
        (d / "agent.pyz").write_bytes(data)
        self.check_args = ["ensure", "--agent-sha", self.sha, "--facts"]
        if tree:
            from orchestrator.agent_build import _sources

            self.check_args += ["--agent-tree", tree_sha256(_sources(src))]
        self.run_path = ""

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONDONTWRITEBYTECODE")}
        return env | {"HOME": str(self.home)}


def check(py: str, v: Variant) -> float:
    t0 = time.perf_counter()
    res = subprocess.run([py, "-c", v.helper, *v.check_args], env=v.env(), capture_output=True, text=True,
                         timeout=300, check=True)  # fmt: skip
    took = time.perf_counter() - t0
    doc = json.loads(res.stdout)
    v.run_path = doc.get("agent_run") or doc["agent_path"]
    return took


def start(py: str, v: Variant, n: int, importtime: bool = False) -> tuple[float, str]:
    run_id = f"bench-{v.name}-{n}"
    spec = {"run_id": run_id, "suite": "noop", "bench": "sleep", "cases": [{"ms": 0}], "repeat": 1, "warmup": 0,
            "facts": {"nvidia_smi": {"stdout": ""}}, "telemetry_ms": 0}  # facts as orch sends them from a GPU-less host
    home = v.home / f"orch-home-{n}"
    argv = [py, *(["-X", "importtime"] if importtime else []), v.run_path, "start", "--spec", "-", "--follow",
            "--orch-home", str(home), "--host", "h"]  # fmt: skip
    t0 = time.perf_counter()
    res = subprocess.run(argv, input=json.dumps(spec), env=v.env(), capture_output=True, text=True, timeout=300,
                         check=False)  # fmt: skip
    took = time.perf_counter() - t0
    if res.returncode != 0 or '"done"' not in res.stdout:
        raise SystemExit(f"{v.name} start failed ({res.returncode}):\n{res.stdout[-2000:]}\n{res.stderr[-2000:]}")
    return took, res.stderr


def floor(py: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([py, "-c", "1"], check=True)
    return time.perf_counter() - t0


def importtime_top(stderr: str, n: int = 8) -> list[str]:
    rows = []
    for line in stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            _, _self_us, cum_us, name = (p.strip() for p in line.replace("import time:", "|").split("|"))
            depth = (len(line.split("|")[-1]) - len(line.split("|")[-1].lstrip())) // 2
            if depth <= 1:
                rows.append((int(cum_us), name, depth))
    out = [f"    all imports: {sum(c for c, _, d in rows if d == 0) / 1000:.1f} ms"]
    return out + [f"    {c / 1000:7.1f} ms  {name}" for c, name, _ in sorted(rows, reverse=True)[:n]]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", default="main", help="git ref whose agent is the baseline, default main")
    ap.add_argument("--before-dir", help="instead of --before: a checkout of the baseline (where git is not)")
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--python", default=sys.executable, help="the host's interpreter, default this one")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="orch-agent-start-"))
    try:
        old = Path(args.before_dir) if args.before_dir else tmp / "before-src"
        if not args.before_dir:
            old.mkdir()
            paths = ["agents/orch_agent", "orchestrator/remote/deploy_helper.py"]
            arch = subprocess.run(["git", "-C", str(ROOT), "archive", args.before, *paths], capture_output=True,
                                  check=True).stdout  # fmt: skip
            with tarfile.open(fileobj=io.BytesIO(arch)) as tf:
                tf.extractall(old, filter="data")
        before_tree = "--agent-tree" in (old / "orchestrator/remote/deploy_helper.py").read_text()
        variants = [
            Variant("before", old / "agents/orch_agent", (old / "orchestrator/remote/deploy_helper.py").read_text(),
                    tmp / "home-before", before_tree),
            Variant("after", ROOT / "agents/orch_agent", (ROOT / "orchestrator/remote/deploy_helper.py").read_text(),
                    tmp / "home-after", True),
        ]  # fmt: skip
        for v in variants:
            check(args.python, v)  # deploys: the first check unpacks where the variant does
            start(args.python, v, -1)
        figs: dict[str, list[float]] = {"floor": []}
        for i in range(args.repeat):  # interleaved: the load moves every figure alike
            figs["floor"].append(floor(args.python))
            for v in variants:
                c = check(args.python, v)
                s, _ = start(args.python, v, i)
                figs.setdefault(f"{v.name}-check", []).append(c)
                figs.setdefault(f"{v.name}-start", []).append(s)
                figs.setdefault(f"{v.name}-total", []).append(c + s)
        med = {k: statistics.median(x) for k, x in figs.items()}
        print(f"host side of one run, medians of {args.repeat} interleaved, wall ms; {args.python}; load average "
              f"{os.getloadavg()[0]:.1f} at the end on {os.cpu_count()} cores")  # fmt: skip
        print(f"  python -c 1                            {med['floor'] * 1000:7.1f}")
        for v in variants:
            form = "tree" if v.run_path.endswith("/tree") else "zipapp"
            print(f"  {v.name:6s} ({form:6s}) deploy check + facts    {med[v.name + '-check'] * 1000:7.1f}")
            print(f"  {v.name:6s} ({form:6s}) start --follow to done  {med[v.name + '-start'] * 1000:7.1f}")
            print(f"  {v.name:6s} ({form:6s}) both                    {med[v.name + '-total'] * 1000:7.1f}")
        print(f"  after / before (both): {med['after-total'] / med['before-total']:.2f}")
        for v in variants:
            _, err = start(args.python, v, 10_000, importtime=True)
            print(f"  python -X importtime, {v.name}'s start process:")
            print("\n".join(importtime_top(err)))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
