"""Fleet-size benchmark: ``orch doctor`` and an ``orch run noop`` over N real sshd hosts (N up to 1,000 and more),
each against bare asyncssh doing the same remote work with the same concurrency bound, measured in one run.

Hosts: sshd processes listening on 16 loopback addresses each (sshd's MAX_LISTEN_SOCKS), 127.31.x.y, one port,
one host key, one shared remote HOME (tests/plugins/sshfleet.py). Every number comes from a child process
started and reaped by this script: wall time from spawn to exit (interpreter start and imports included: that is
what a user waits for), peak RSS from the child's own rusage (``os.wait4``), so orch's and the floor's memory are
measured apart from this script and from sshd.

  floor (doctor): asyncssh connect + doctor's facts probe (sysinfo.py under the host's python), at most C hosts
                  at once, known_hosts checked by asyncssh, the same client key;
  orch doctor:    ``orch doctor --json --concurrency C`` (ssh -G resolution of every host, OpenSSH-semantics host
                  key verdict, every check);
  floor (run, probe + sleeps):
                  asyncssh connect + the facts probe + the noop suite's work in the foreground (20 sleeps of 1 ms
                  under the host's python), at most C hosts at once;
  floor (run, same remote commands):
                  asyncssh connect + exactly the remote commands ``orch run noop`` sends to a host that already
                  holds the agent (the deploy check with the facts, ``agent start --spec - --follow`` with the
                  spec on stdin, read until the agent's ``done``), recorded from orch itself before the
                  measurements (bench/remote_replay.py), no store, at most C hosts at once;
  orch run noop:  ``orch run noop --json --concurrency C`` (facts, agent check, spec upload, detached agent,
                  following its spool, ingest into SQLite, the verdict per host).
The recording runs (orch run noop on the first host, twice: the first uploads the agent into the hosts' shared
HOME) come before every measurement, so every measured run finds the agent there.
The host's ``python:`` is a bare venv (no torch), as in bench/fanout.py: this measures orch, not N torch imports
on this machine's 2 cores (a real fleet imports torch on each host's own CPUs). It is run through a wrapper whose
PATH holds no ``nvidia-smi`` (bench/remote_replay.py ``nogpu_python``): the simulated hosts of one machine with a
GPU see none, so the agent's one-run-per-GPU lease does not refuse all hosts but one.

Targets (issue 18): orch / floor <= 1.2x, orch's peak RSS <= 300 MB at 1,000 hosts. The machine is shared and
small: the load average before and after each measurement is printed next to it.

Usage: .venv/bin/python bench/fanout_scale.py --hosts 1000 [--concurrency 64] [--timeout 30] [--skip-run]
       [--repeat N]; on the lent 16-core GPU machine: bash bench/fanout_scale_device.sh (sizes, repeats, $OUT).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

NOOP_WORK = "import time\nfor _ in range(20):\n    time.sleep(0.001)\n"  # the noop suite's defaults: ms=1, repeat=20


async def _floor(spec: dict[str, object]) -> dict[str, int]:
    import asyncssh

    sem = asyncio.Semaphore(int(spec["concurrency"]))  # type: ignore[call-overload]
    ok = 0

    async def one(addr: str, port: int) -> None:
        nonlocal ok
        async with sem:
            try:
                async with asyncssh.connect(
                    addr, port, known_hosts=str(spec["known_hosts"]), client_keys=[str(spec["key"])],
                    username=os.environ.get("USER", "root"), config=[], connect_timeout=float(spec["timeout"]),  # type: ignore[arg-type]
                ) as conn:  # fmt: skip
                    await conn.run(str(spec["probe"]), check=True)
                    if spec["work"] == "run":
                        await conn.run(shlex.join([str(spec["python"]), "-c", NOOP_WORK]), check=True)
                ok += 1
            except (OSError, asyncssh.Error):
                pass

    await asyncio.gather(*(one(a, p) for a, p in spec["hosts"]))  # type: ignore[attr-defined]
    return {"ok": ok}


def _child_floor(path: str) -> None:
    spec = json.loads(Path(path).read_text())
    if spec["work"] == "replay":
        from bench.remote_replay import replay_floor

        print(json.dumps(asyncio.run(replay_floor(spec))))
        return
    print(json.dumps(asyncio.run(_floor(spec))))


def _load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


def _measure(argv: list[str], env: dict[str, str], out: Path) -> tuple[float, float, float, int, str]:
    """Run ``argv``; (wall s, client CPU s (user + system), peak RSS MB, exit status, load before -> after)."""
    before = _load()
    with out.open("w") as f:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, stdout=f, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, proc.returncode, f"{before} -> {_load()}"


def _sshd_counts(procs: list[object]) -> tuple[int, int]:
    """(connections authenticated, sessions started) so far, from every fleet sshd's VERBOSE log."""
    conns = sessions = 0
    for p in procs:
        log = (p.root / "sshd.log").read_text(errors="replace")  # type: ignore[attr-defined]
        conns += log.count("Accepted publickey for")
        sessions += log.count("Starting session:")
    return conns, sessions


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child-floor":
        _child_floor(sys.argv[2])
        return
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, default=64)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--timeout", type=float, default=30.0, help="per-step timeout, s (orch --timeout, floor connect)")
    ap.add_argument("--skip-run", action="store_true", help="doctor only")
    ap.add_argument("--repeat", type=int, default=1, help="floor and orch alternately this many times; best of")
    ap.add_argument("--fresh-db", action="store_true", help="a new SQLite store for every orch run")
    ap.add_argument("--profile", metavar="DIR", help="run orch under cProfile, writing DIR/orch-WORK.prof")
    args = ap.parse_args()

    from bench.remote_replay import describe, host_commands, nogpu_python, read_log, record
    from orchestrator.doctor import probe_argv
    from orchestrator.inventory import parse_inventory
    from orchestrator.store.compute import uuid7
    from tests.plugins.sshd import SshdBed, make_client_home
    from tests.plugins.sshfleet import loopback_addresses, start_fleet_sshd

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:  # an unlimited hard limit above the kernel's nr_open
        print(f"open files: soft limit {soft} kept (raising it to the hard limit {hard} failed: {exc})")
    root = Path(tempfile.mkdtemp(prefix="orch-scale-"))
    client = make_client_home(root / "client")
    env = {**os.environ, "HOME": str(client.home), "COLUMNS": "160"}
    env.pop("SSH_AUTH_SOCK", None)
    bare = root / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python, hidden = nogpu_python(root / "python-nogpu", str(bare / "bin" / "python"))
    bed = SshdBed(root / "bed", client)
    try:
        t0 = time.perf_counter()
        addrs = loopback_addresses(args.hosts, second_octet=31)
        procs = start_fleet_sshd(bed, "fleet", addrs)
        port = procs[0].port
        print(f"{args.hosts} hosts on {len(procs)} sshd processes (127.31.x.y:{port}), started in "
              f"{time.perf_counter() - t0:.1f} s; concurrency {args.concurrency}; {os.cpu_count()} CPUs; "
              f"open files {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}; {_load()}")  # fmt: skip
        print(f"hosts' python: {python} (no GPU: PATH without nvidia-smi; left out: {' '.join(hidden) or 'none'})")
        names = [f"h{i:04d}" for i in range(args.hosts)]
        inv_text = f"defaults: {{python: {python}}}\ngroups:\n  fleet:\n    hosts:\n" + "".join(
            f"      {n}: {{address: {a}, port: {port}}}\n" for n, a in zip(names, addrs, strict=True)
        )
        inv_path = root / "inventory.yaml"
        inv_path.write_text(inv_text)
        probe = shlex.join(probe_argv(parse_inventory(inv_text).hosts[0]))
        env.update(ORCH_INVENTORY=str(inv_path), ORCH_DB_URL=f"sqlite:///{root / 'orch.db'}")
        orch = [sys.executable, "-m", "orchestrator"]
        if args.profile:
            orch = [sys.executable, "-m", "cProfile", "-o", str(Path(args.profile) / "orch.prof"), "-m", "orchestrator"]
        base_spec = {"known_hosts": str(client.known_hosts), "key": str(client.key), "concurrency": args.concurrency,
                     "timeout": args.timeout}  # fmt: skip
        floor_spec = {**base_spec, "hosts": [[a, port] for a in addrs], "probe": probe, "python": python}
        c, t = str(args.concurrency), str(args.timeout)
        floors: dict[str, list[tuple[str, dict[str, object]]]] = {
            "doctor": [("floor (doctor)", {**floor_spec, "work": "doctor"})]
        }
        works = [("doctor", orch + ["doctor", "--json", "--concurrency", c, "--timeout", t])]
        if not args.skip_run:
            works.append(("run", orch + ["run", "noop", "--hosts", "fleet", "--json", "--concurrency", c,
                                         "--timeout", t]))  # fmt: skip
            # orch's own remote commands for a host holding the agent: the first run uploads it into the shared
            # HOME, the second is the one replayed (its own store: the measured runs' store holds only theirs)
            rec_env = {**env, "ORCH_DB_URL": f"sqlite:///{root / 'record.db'}"}
            rec_argv = ["run", "noop", "--hosts", names[0], "--json", "--timeout", t]
            first = record(rec_argv, rec_env, root / "record-1.jsonl")
            doc = record(rec_argv, rec_env, root / "record-2.jsonl")
            cmds = host_commands(read_log(root / "record-2.jsonl"), names[0])
            print(f"recorded: orch run noop on {names[0]} (run {first['run_id']}: {first['status']}, uploads the "
                  f"agent; run {doc['run_id']}: {doc['status']}, agent present) sent {names[0]}:")  # fmt: skip
            print("\n".join(describe(cmds)))
            floors["run"] = [
                ("floor (run, probe + sleeps)", {**floor_spec, "work": "run"}),
                ("floor (run, same remote commands)", {
                    **base_spec, "work": "replay", "cmds": cmds, "recorded_host": names[0],
                    "recorded_run": doc["run_id"], "hosts": [[n, a, port] for n, a in zip(names, addrs, strict=True)],
                }),
            ]  # fmt: skip
        for work, argv in works:
            best: dict[str, list[tuple[float, float, float]]] = {}
            for r in range(args.repeat):  # alternate, so that a change of load hits both sides
                for i, (label, spec) in enumerate(floors[work]):
                    spec_path = root / f"floor-{work}-{i}.json"
                    spec_path.write_text(json.dumps({**spec, "run_id": uuid7()}))
                    out = root / f"floor-{work}-{i}.out"
                    c0, s0 = _sshd_counts(procs)
                    fw, fcpu, frss, _, fload = _measure([sys.executable, __file__, "--child-floor", str(spec_path)],
                                                        env, out)  # fmt: skip
                    c1, s1 = _sshd_counts(procs)
                    lines = out.read_text().splitlines()
                    try:
                        fdoc = json.loads(lines[-1])
                    except (IndexError, ValueError):
                        print("\n".join(lines[-40:]))
                        raise
                    failed = "".join(f", {k}: {v}" for k, v in fdoc.items() if k.startswith("failed_"))
                    print(f"  {label} #{r + 1}: {fw:7.2f} s wall, {fcpu:6.2f} s CPU, peak RSS {frss:6.1f} MB "
                          f"({fdoc['ok']}/{args.hosts} ok{failed}; {fload}); per host {(c1 - c0) / args.hosts:.1f} "
                          f"SSH connections, {(s1 - s0) / args.hosts:.1f} sessions")  # fmt: skip
                    best.setdefault(label, []).append((fw, fcpu, frss))
                if args.fresh_db:
                    (root / "orch.db").unlink(missing_ok=True)
                c0, s0 = _sshd_counts(procs)
                ow, ocpu, orss, orc, oload = _measure(argv, env, root / f"orch-{work}.out")
                c1, s1 = _sshd_counts(procs)
                text = (root / f"orch-{work}.out").read_text()
                try:
                    doc = json.loads(text[text.index("{"):])
                except ValueError:
                    print(text[-3000:])
                    raise
                if work == "doctor":
                    checks = [(c["name"], c["status"], c["detail"]) for h in doc["hosts"] for c in h["checks"]]
                    auth = sum(1 for n, st, _ in checks if n == "auth" and st == "ok")
                    probed = sum(1 for n, _, d in checks if n == "python" and "torch" in d)
                    ok_text = f"{auth}/{args.hosts} authenticated, {probed} probed"
                else:
                    done = sum(1 for h in doc["hosts"] if h["status"] == "completed")
                    ok_text = f"{done}/{args.hosts} hosts completed, run {doc['status']}"
                    bad = [h for h in doc["hosts"] if h["status"] != "completed"]
                    if bad:
                        ok_text += f"; first not completed: {bad[0]['host']} {bad[0]['status']}"
                print(f"  orch {work} #{r + 1}: {ow:7.2f} s wall, {ocpu:6.2f} s CPU, peak RSS {orss:6.1f} MB "
                      f"({ok_text}, exit {orc}; {oload}); per host {(c1 - c0) / args.hosts:.1f} SSH connections, "
                      f"{(s1 - s0) / args.hosts:.1f} sessions")  # fmt: skip
                best.setdefault("orch", []).append((ow, ocpu, orss))
            ow, ocpu = min(o[0] for o in best["orch"]), min(o[1] for o in best["orch"])
            orss = max(o[2] for o in best["orch"])
            print(f"{work} at {args.hosts} hosts: best wall orch {ow:.2f} s, client CPU {ocpu:.2f} s, peak RSS "
                  f"{orss:.0f} MB (target <= 300 MB at 1,000 hosts)")  # fmt: skip
            for label, _ in floors[work]:
                fw, fcpu = min(f[0] for f in best[label]), min(f[1] for f in best[label])
                print(f"  against {label}: wall {fw:.2f} s, orch/floor = {ow / fw:.2f} (target <= 1.2); client CPU "
                      f"{fcpu:.2f} s, orch/floor = {ocpu / fcpu:.2f}")  # fmt: skip
    finally:
        bed.close()
        import shutil

        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
