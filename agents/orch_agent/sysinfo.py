"""Host facts for orch — SELF-CONTAINED: stdlib only, no imports from the agent package.

The orchestrator's doctor runs this file's text directly, in one SSH round trip::

    python3 -c "<this source>" --json [--orch-home DIR]

and the agent imports it for ``facts`` and the ``hello`` event. ``collect(orch_home)`` returns a dict with
exactly these keys (sizes in bytes):

- ``hostname``, ``kernel`` (``uname -r``), ``cpu_count``, ``mem_total_bytes`` (None when unknown)
- ``python``: ``{executable, version}``
- ``torch``: ``{ok, version, cuda_available, cuda_version, device_count, devices: [{name, total_memory_bytes,
  capability ("9.0")}], error}`` — probed in a child process of the same interpreter (60 s deadline) so a
  broken torch or CUDA driver cannot take this probe down; ``error`` is the exact exception text, e.g.
  ``"No module named 'torch'"``. ``cached_at`` (UNIX s) is set when the agent's ``facts`` answered from its torch
  cache (see :func:`cached_torch_facts`), None when probed just now; ``orch doctor`` always probes.
- ``nvidia_smi``: ``{found, rc, stdout, stderr, query}`` of
  ``nvidia-smi --query-gpu=<NVIDIA_SMI_FIELDS>,<FLEET_FIELDS> --format=csv`` (with its header line; parsed by
  the orchestrator), 30 s deadline; ``query`` is ``"fleet"``, or ``"base"`` when that failed without a row
  (a driver that does not know a fleet field) and the base fields alone were asked again.
- ``fleet``: what the fleet view compares besides the GPU rows, each raw for the orchestrator to parse —
  ``remapped_rows`` and ``nvlink`` (``{rc, stdout, stderr}`` of ``nvidia-smi --query-remapped-rows=...`` and
  ``nvidia-smi nvlink -s``; None without GPUs), ``xid`` (``{readable, lines}``: the kernel log's
  ``NVRM: Xid`` lines, the last 20, from ``dmesg``; readable False when dmesg is not allowed),
  ``cpu_governors`` (``{governor: cpu count}`` from /sys/devices/system/cpu/cpu*/cpufreq/scaling_governor),
  ``loadavg`` (1, 5, 15 min).
- ``disk``: ``{path, total_bytes, free_bytes, home, kind}`` of orch_home, or its nearest existing parent
  (``path``); ``home`` is orch_home resolved, ``kind`` what ``path`` is: ``directory``, ``file`` or ``other``
  (a FIFO, a device; None when it cannot be read) — anything but a directory cannot hold the run state.
- ``orch``: ``{home, agents: [sha...], builds: [sha...], current_build}`` from
  ``<home>/agent/<sha>/agent.pyz``, ``<home>/builds/<sha>/`` (hex names only, so half-written temporaries
  are not listed) and the ``<home>/builds/current`` symlink.
- ``leases``: ``{dir, held: [...], stale: [...]}``, the GPU leases of this node (see ``leases.py``): each
  ``{gpu, run_id, host, user, started_by, pid, started}``; ``held`` while a run's worker holds the lock,
  ``stale`` when the lock is free but its holder's record is left (the holder died without cleaning up).
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import shutil
import socket
import stat
import string
import subprocess
import sys

NVIDIA_SMI_FIELDS = (
    "name,uuid,driver_version,memory.total,clocks.max.sm,clocks.max.mem,ecc.mode.current,pci.bus_id"
)
LEASE_DIR_ENV = "ORCH_LEASE_DIR"
DEFAULT_LEASE_DIR = "/dev/shm/orch-leases"  # node-local (tmpfs), shared by every user of the node; never NFS
# What the fleet view compares per GPU (field names from `nvidia-smi --help-query-gpu`).
FLEET_FIELDS = (
    "vbios_version,persistence_mode,power.limit,power.default_limit,clocks.applications.graphics,"
    "clocks.applications.memory,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,"
    "pcie.link.width.max,mig.mode.current,ecc.errors.uncorrected.volatile.total,"
    "ecc.errors.uncorrected.aggregate.total,retired_pages.pending"
)
REMAPPED_ROWS_FIELDS = "gpu_uuid,remapped_rows.pending,remapped_rows.failure"
XID_LINES_KEPT = 20
TORCH_PROBE_TIMEOUT_S = 60.0
NVIDIA_SMI_TIMEOUT_S = 30.0
DEFAULT_ORCH_HOME = "~/.orch"
TORCH_CACHE_MAX_AGE_S = 24 * 3600.0  # a successful probe is reused for a day at most (orch's choice)
# Environment that changes what torch sees (devices, libraries, the modules it imports).
TORCH_CACHE_ENV = (
    "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "CONDA_PREFIX",
)

# Runs in a child interpreter: prints one JSON object, whatever happens to torch.
_TORCH_PROBE = r"""
import json
out = {"ok": False, "version": None, "cuda_available": False, "cuda_version": None,
       "device_count": 0, "devices": [], "error": None, "nccl_version": None}
try:
    import torch
    out["version"] = str(torch.__version__)
    out["cuda_version"] = torch.version.cuda
    out["cuda_available"] = bool(torch.cuda.is_available())
    if out["cuda_available"]:
        out["device_count"] = int(torch.cuda.device_count())
        try:
            out["nccl_version"] = ".".join(str(p) for p in torch.cuda.nccl.version())
        except Exception:
            pass
        for i in range(out["device_count"]):
            p = torch.cuda.get_device_properties(i)
            out["devices"].append({"name": p.name, "total_memory_bytes": int(p.total_memory),
                                   "capability": "%d.%d" % (p.major, p.minor)})
    out["ok"] = True
except BaseException as exc:
    out["error"] = str(exc) if isinstance(exc, ImportError) else "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(out))
"""


def _torch_facts(timeout_s: float = TORCH_PROBE_TIMEOUT_S) -> dict:
    base = {
        "ok": False,
        "version": None,
        "cuda_available": False,
        "cuda_version": None,
        "device_count": 0,
        "devices": [],
        "error": None,
        "nccl_version": None,
        "cached_at": None,
    }
    try:
        # No torch at all: say so without paying for a child interpreter (same text as the ImportError).
        if importlib.util.find_spec("torch") is None:
            base["error"] = "No module named 'torch'"
            return base
    except (ImportError, ValueError):
        pass
    try:
        proc = subprocess.run(
            [sys.executable or "python3", "-c", _TORCH_PROBE],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        base["error"] = f"torch probe timed out after {timeout_s:g} s (import torch / CUDA init hung)"
        return base
    except OSError as exc:
        base["error"] = f"could not start the torch probe with {sys.executable}: {exc}"
        return base
    text = proc.stdout.decode("utf-8", "replace").strip().splitlines()
    try:
        doc = json.loads(text[-1]) if text else None
    except ValueError:
        doc = None
    if not isinstance(doc, dict):
        tail = proc.stderr.decode("utf-8", "replace").strip()[-500:]
        how = (f"was killed by signal {-proc.returncode}" if proc.returncode < 0
               else f"exited with status {proc.returncode}")  # fmt: skip
        base["error"] = f"torch probe {how}: {tail}"
        return base
    base.update({k: doc.get(k, v) for k, v in base.items()})
    return base


def _stat_key(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [path, st.st_ino, st.st_size, st.st_mtime_ns]


def _read_text(path, limit=4096):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return None


def torch_cache_key():
    """What a torch probe's answer depends on, as one sha256 hex string: this host and boot, the interpreter
    (path, version, file identity), torch's installed files (``__init__.py``, ``version.py``), the NVIDIA driver
    loaded (``/proc/driver/nvidia/version``), the ``/dev/nvidia*`` device nodes (MIG and GPU changes), the
    user, and the environment variables in ``TORCH_CACHE_ENV``. None when torch is not importable (nothing to
    cache)."""
    import hashlib

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin:
        return None
    tdir = os.path.dirname(spec.origin)
    exe = os.path.realpath(sys.executable or "python3")
    try:
        devs = sorted(n for n in os.listdir("/dev") if n.startswith("nvidia"))
    except OSError:
        devs = []
    doc = {
        "host": socket.gethostname(),
        "boot_id": _read_text("/proc/sys/kernel/random/boot_id"),
        "uid": os.getuid() if hasattr(os, "getuid") else None,
        # sys.path without its first entry: the script's own place (the agent.pyz, or '' under -c) is not where
        # torch comes from, and the agent's facts and the deploy helper must share one cache
        "python": [exe, platform.python_version(), _stat_key(exe), sys.path[1:]],
        "torch": [_stat_key(spec.origin), _stat_key(os.path.join(tdir, "version.py"))],
        "driver": _read_text("/proc/driver/nvidia/version"),
        "devices": devs,
        "env": {k: os.environ.get(k) for k in TORCH_CACHE_ENV},
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def _torch_cache_path(home, key):
    host = "".join(c if c.isalnum() or c in "-._" else "_" for c in socket.gethostname()) or "host"
    return os.path.join(home, "cache", f"torch-{host}-{key[:24]}.json")


def cached_torch_facts(home, max_age_s=TORCH_CACHE_MAX_AGE_S, now=None):
    """The torch facts, from ``<home>/cache/torch-<host>-<key>.json`` when a successful probe with the same
    :func:`torch_cache_key` is at most ``max_age_s`` old, else probed now (and cached when ``ok``). Importing
    torch and initialising CUDA takes seconds on a GPU node, and ``orch run`` reads the facts on every run; a
    failed probe is never cached, so a broken torch is seen the next time it is fixed. The cache lives in the
    orch home (which may be an NFS home shared by hosts: the file name carries the host name, the key the boot)."""
    import time

    now = time.time() if now is None else now
    key = torch_cache_key()
    if key is None:
        return _torch_facts()
    path = _torch_cache_path(home, key)
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if doc.get("key") == key and 0 <= now - float(doc["probed_at"]) <= max_age_s and doc["torch"].get("ok"):
            return {**doc["torch"], "cached_at": float(doc["probed_at"])}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    out = _torch_facts()
    if out.get("ok"):
        _write_torch_cache(path, {"key": key, "probed_at": now, "torch": out})
    return out


def _write_torch_cache(path, doc):
    """Atomic write (temporary file, rename), 0600; other caches of this host are removed. Never raises: a cache
    that cannot be written only costs the next run a probe."""
    d = os.path.dirname(path)
    prefix = os.path.basename(path).rsplit("-", 1)[0] + "-"
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, sort_keys=True)
        os.replace(tmp, path)
        for name in os.listdir(d):
            old = os.path.join(d, name)
            if name.startswith(prefix) and name.endswith(".json") and old != path:
                os.unlink(old)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _run(argv, timeout_s=NVIDIA_SMI_TIMEOUT_S) -> dict:
    """``{rc, stdout, stderr}`` of argv; rc None when it could not run or ran past ``timeout_s``."""
    try:
        proc = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {"rc": None, "stdout": "", "stderr": f"{argv[0]} timed out after {timeout_s:g} s"}
    except OSError as exc:
        return {"rc": None, "stdout": "", "stderr": str(exc)}
    return {
        "rc": proc.returncode,
        "stdout": proc.stdout.decode("utf-8", "replace"),
        "stderr": proc.stderr.decode("utf-8", "replace"),
    }


def _has_row(stdout: str) -> bool:
    """Whether the CSV holds a GPU row: a line after orch's header (its first field is ``name``) with at least
    its columns that is not the header again; a notice such as ``failed, retrying`` is no row."""
    lines = [ln.strip() for ln in stdout.splitlines() if ln.strip()]
    for i, ln in enumerate(lines):
        if ln.startswith("name,"):
            cols = ln.count(",")
            return any(x.count(",") >= cols and not x.startswith("name,") for x in lines[i + 1 :])
    return False


def _nvidia_smi(timeout_s: float = NVIDIA_SMI_TIMEOUT_S) -> dict:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {"found": False, "rc": None, "stdout": "", "stderr": "nvidia-smi not found on PATH"}
    out = _run([exe, "--query-gpu=" + NVIDIA_SMI_FIELDS + "," + FLEET_FIELDS, "--format=csv"], timeout_s)
    out.update(found=True, query="fleet")
    if out["rc"] not in (0, None) and not _has_row(out["stdout"]):
        base = _run([exe, "--query-gpu=" + NVIDIA_SMI_FIELDS, "--format=csv"], timeout_s)
        base.update(found=True, query="base", fleet_error=(out["stdout"] + out["stderr"]).strip()[-500:])
        return base
    return out


def _xid() -> dict:
    exe = shutil.which("dmesg") or "/bin/dmesg"
    res = _run([exe], 10.0)
    if res["rc"] != 0:
        return {"readable": False, "lines": [], "error": (res["stderr"] or res["stdout"]).strip()[-200:]}
    lines = [ln.strip() for ln in res["stdout"].splitlines() if "NVRM: Xid" in ln]
    return {"readable": True, "count": len(lines), "lines": lines[-XID_LINES_KEPT:]}


def cpu_governors() -> dict:
    """How many CPUs run each cpufreq scaling governor (``{"performance": 64}``); empty without cpufreq. Also
    read by the case telemetry."""
    out: dict = {}
    base = "/sys/devices/system/cpu"
    for name in _listdir(base):
        if not (name.startswith("cpu") and name[3:].isdigit()):
            continue
        try:
            with open(os.path.join(base, name, "cpufreq", "scaling_governor")) as f:
                gov = f.read().strip()
        except OSError:
            continue
        out[gov] = out.get(gov, 0) + 1
    return out


def loadavg():
    """The 1, 5 and 15 minute load averages (``os.getloadavg``), to 2 decimals; None where there are none."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _fleet_argvs(exe):
    """The fleet's extra nvidia-smi calls: remapped rows and NVLink state."""
    return {
        "remapped_rows": [exe, "--query-remapped-rows=" + REMAPPED_ROWS_FIELDS, "--format=csv"],
        "nvlink": [exe, "nvlink", "-s"],
    }


def _fleet(smi: dict, xid=None, extra=None) -> dict:
    """The fleet facts besides the GPU rows (see the module docstring); the nvidia-smi answers only where it lists
    GPUs. ``xid`` and ``extra`` (``{"remapped_rows": ..., "nvlink": ...}`` from :func:`_run`): already gathered
    (``collect`` runs them at the same time as the GPU query); else run here."""
    out = {"remapped_rows": None, "nvlink": None, "xid": _xid() if xid is None else xid,
           "cpu_governors": cpu_governors(), "loadavg": loadavg()}
    exe = shutil.which("nvidia-smi")
    if exe and smi.get("found") and _has_row(smi.get("stdout", "")):
        for key, argv in _fleet_argvs(exe).items():
            out[key] = extra[key] if extra and key in extra else _run(argv)
    return out


def _mem_total_bytes():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def _disk(home: str) -> dict:
    path = home
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    try:
        mode = os.stat(path).st_mode
        kind = "directory" if stat.S_ISDIR(mode) else "file" if stat.S_ISREG(mode) else "other"
    except OSError:
        kind = None
    try:
        st = os.statvfs(path)
    except OSError:
        return {"path": path, "total_bytes": None, "free_bytes": None, "home": home, "kind": kind}
    return {"path": path, "total_bytes": st.f_frsize * st.f_blocks, "free_bytes": st.f_frsize * st.f_bavail,
            "home": home, "kind": kind}


def _is_hex(name: str) -> bool:
    return bool(name) and all(c in string.hexdigits for c in name)


def _listdir(path: str) -> list:
    try:
        return sorted(os.listdir(path))
    except OSError:
        return []


def _orch(home: str) -> dict:
    """What ``orch deploy`` left on the host: agents and engine builds, which deploy always puts under the login
    user's ``~/.orch`` (``remote/deploy_helper.home``), whatever the host's ``orch_home:`` (``home``: where runs go,
    reported as it is). Read from ``orch_home``, a host with one saw "no agent deployed" after every deploy."""
    deployed = resolve_home(None)
    agent_dir = os.path.join(deployed, "agent")
    builds_dir = os.path.join(deployed, "builds")
    agents = [
        n
        for n in _listdir(agent_dir)
        if _is_hex(n) and os.path.isfile(os.path.join(agent_dir, n, "agent.pyz"))
    ]
    builds = [n for n in _listdir(builds_dir) if _is_hex(n) and os.path.isdir(os.path.join(builds_dir, n))]
    current = None
    link = os.path.join(builds_dir, "current")
    if os.path.islink(link):
        current = os.path.basename(os.readlink(link).rstrip("/")) or None
    return {"home": home, "agents": agents, "builds": builds, "current_build": current}


def lease_dir() -> str:
    """Where GPU leases live: ``$ORCH_LEASE_DIR``, else /dev/shm/orch-leases (else /tmp/orch-leases when the
    node has no /dev/shm). Node-local on purpose: a lock on NFS would be shared by every node mounting it."""
    env = os.environ.get(LEASE_DIR_ENV)
    if env:
        return env
    return DEFAULT_LEASE_DIR if os.path.isdir(os.path.dirname(DEFAULT_LEASE_DIR)) else "/tmp/orch-leases"


def _locked_inodes() -> set:
    """``(major, minor, inode)`` of every file that holds a lock, from /proc/locks (read-only: no probing lock
    that could make a starting run believe its GPU busy)."""
    out = set()
    try:
        with open("/proc/locks") as f:
            for line in f:
                parts = line.split()
                if "->" in parts:  # a waiter, not a holder
                    continue
                for p in parts:
                    bits = p.split(":")
                    if len(bits) == 3 and all(bits):
                        try:
                            out.add((int(bits[0], 16), int(bits[1], 16), int(bits[2])))
                        except ValueError:
                            pass
                        break
    except OSError:
        pass
    return out


def _leases() -> dict:
    d = lease_dir()
    held, stale = [], []
    locked = _locked_inodes()
    for name in _listdir(d):
        if not name.endswith(".lock"):
            continue
        path = os.path.join(d, name)
        try:
            st = os.stat(path)
            with open(path, "rb") as f:
                raw = f.read(65536)
        except OSError:
            continue
        try:
            doc = json.loads(raw.decode("utf-8", "replace")) if raw.strip() else {}
        except ValueError:
            doc = {}
        if not isinstance(doc, dict):
            doc = {}
        entry = {"gpu": name[: -len(".lock")]}
        entry.update({k: doc.get(k) for k in ("run_id", "host", "user", "started_by", "pid", "started")})
        if (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino) in locked:
            held.append(entry)
        elif doc:
            stale.append(entry)
    return {"dir": d, "held": held, "stale": stale}


def resolve_home(orch_home=None) -> str:
    """The absolute orch home: the argument, else ``~/.orch``."""
    return os.path.abspath(os.path.expanduser(orch_home or DEFAULT_ORCH_HOME))


def collect(orch_home=None, torch_cache=False) -> dict:
    """All host facts (see the module docstring). Never raises for a missing GPU, torch or nvidia-smi.
    ``torch_cache``: answer the torch part from :func:`cached_torch_facts` (the agent's ``facts`` for a run);
    False probes torch now (``orch doctor``)."""
    from concurrent.futures import ThreadPoolExecutor

    home = resolve_home(orch_home)
    uname = platform.uname()
    # The slow probes run at the same time: import torch (seconds when not cached), nvidia-smi (each call some
    # hundreds of ms on a loaded 8-GPU node), dmesg. The fleet's extra nvidia-smi calls are started alongside
    # the GPU query and dropped when it lists no GPU.
    exe = shutil.which("nvidia-smi")
    with ThreadPoolExecutor(max_workers=5) as pool:
        torch_f = pool.submit(cached_torch_facts, home) if torch_cache else pool.submit(_torch_facts)
        smi_f = pool.submit(_nvidia_smi)
        xid_f = pool.submit(_xid)
        extra_f = {k: pool.submit(_run, argv) for k, argv in _fleet_argvs(exe).items()} if exe else {}
        smi = smi_f.result()
        fleet = _fleet(smi, xid=xid_f.result(), extra={k: f.result() for k, f in extra_f.items()})
        torch = torch_f.result()
    return {
        "hostname": socket.gethostname(),
        "kernel": uname.release,
        "cpu_count": os.cpu_count(),
        "mem_total_bytes": _mem_total_bytes(),
        "python": {"executable": sys.executable, "version": platform.python_version()},
        "torch": torch,
        "nvidia_smi": smi,
        "fleet": fleet,
        "disk": _disk(home),
        "orch": _orch(home),
        "leases": _leases(),
    }


def _main(argv) -> int:
    import argparse

    ap = argparse.ArgumentParser(prog="sysinfo", description="print orch host facts as JSON")
    ap.add_argument("--json", action="store_true", help="print JSON (the only format)")
    ap.add_argument("--orch-home", default=None, help="orch home directory (default ~/.orch)")
    args = ap.parse_args(argv)
    json.dump(collect(args.orch_home), sys.stdout, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
