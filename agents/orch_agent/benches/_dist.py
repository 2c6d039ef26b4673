"""A pool of rank processes, one per GPU (or N on the CPU), for the multi-process benches (allreduce, sharded
moe_gemm) — stdlib here, torch only inside the ranks.

Why a pool kept across cases: a case is one message size (one result per case, the worker's contract), but
starting N Python processes, importing torch and building a NCCL communicator takes seconds. The first case
starts the pool and stores it in ``ctx.state``; later cases of the run reuse it; a pool of another shape (world
size, device) replaces it.

Launch: ``sys.executable -c`` imports this module by the same dotted name the worker imported it under (zipapp
or source tree) and runs :func:`rank_main`. Rendezvous: the worker itself hosts the ``torch.distributed.TCPStore``
on 127.0.0.1, port 0 (the kernel picks a free port, so there is no bind race); the ranks join it as clients and
call ``init_process_group`` with backend ``nccl`` on CUDA (rank r on ``cuda:r``) and ``gloo`` on the CPU.

Every rank's environment carries ``NCCL_NVLS_ENABLE=0``, ``TORCH_SYMM_MEM_DISABLE_MULTICAST=1`` and
``NVSHMEM_DISABLE_NVLS=1``: NVLink multicast stays off (shared machines), whatever the caller's environment says.

Protocol: one JSON line per call on each rank's stdin, ``{"fn": "module:function", "args": {...}}``; each rank
answers one JSON line on a private copy of its stdout (fd 1 itself is pointed at stderr, so prints from torch
or NCCL cannot corrupt the protocol): ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": "..."}``.
A rank exits on EOF of stdin: when the worker ends, however it ends, the ranks follow. Every call has a
deadline; a rank that dies or misses it takes the pool down (the next case starts a new one) and the error
names the rank and the tail of its stderr.
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from typing import Any

NO_MULTICAST_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
START_TIMEOUT_S = 300.0
STDERR_TAIL_LINES = 8


class RankError(RuntimeError):
    """A rank failed, died or missed its deadline."""


def _import_root() -> str:
    """The sys.path entry that holds this package (the zipapp, or the source tree)."""
    root = os.path.abspath(__file__)
    for _ in __name__.split("."):
        root = os.path.dirname(root)
    return root


class RankPool:
    """``world_size`` rank processes joined in one torch.distributed process group.

    Args:
        world_size: number of ranks (>= 1); on CUDA rank r uses ``cuda:r``.
        device: ``cuda`` or ``cpu``.
        timeout_s: deadline for the start (import torch, rendezvous, communicator) and torch.distributed's own
            collective timeout.
    """

    def __init__(self, world_size: int, device: str, timeout_s: float = START_TIMEOUT_S) -> None:
        import datetime

        import torch.distributed as dist

        self.world_size = world_size
        self.device = device
        self.backend = "nccl" if device == "cuda" else "gloo"
        self._store = dist.TCPStore(
            "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=datetime.timedelta(seconds=timeout_s)
        )
        self._dir = tempfile.mkdtemp(prefix="orch-ranks-")
        self._replies: queue.Queue[tuple[int, Any]] = queue.Queue()
        self._procs: list[subprocess.Popen[bytes]] = []
        self._readers: list[threading.Thread] = []
        self._closed = False
        code = (
            "import importlib, sys; sys.path.insert(0, sys.argv[1]); importlib.import_module(sys.argv[2]).rank_main()"
        )
        for rank in range(world_size):
            env = dict(os.environ)
            env.update(NO_MULTICAST_ENV)
            env.update(
                {
                    "ORCH_RANK": str(rank),
                    "ORCH_WORLD_SIZE": str(world_size),
                    "ORCH_STORE_PORT": str(self._store.port),
                    "ORCH_DEVICE": device,
                    "ORCH_TIMEOUT_S": str(timeout_s),
                    "OMP_NUM_THREADS": env.get("OMP_NUM_THREADS", "1"),
                }
            )
            err = open(self._stderr_path(rank), "wb")  # noqa: SIM115 - the child owns it
            proc = subprocess.Popen(
                [sys.executable, "-c", code, _import_root(), __name__],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
                close_fds=True,
            )
            err.close()
            self._procs.append(proc)
            reader = threading.Thread(target=self._read, args=(rank, proc), daemon=True)
            reader.start()
            self._readers.append(reader)
        atexit.register(self.close)
        self.ready = self._collect(timeout_s, "start")

    def _stderr_path(self, rank: int) -> str:
        return os.path.join(self._dir, f"rank{rank}.stderr")

    def _read(self, rank: int, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                self._replies.put((rank, json.loads(line.decode("utf-8", "replace"))))
            except ValueError:
                self._replies.put((rank, {"ok": False, "error": f"not JSON: {line[:200]!r}"}))
        self._replies.put((rank, None))  # EOF: the rank exited

    def stderr_tail(self, rank: int) -> str:
        try:
            with open(self._stderr_path(rank), "rb") as f:
                lines = f.read().decode("utf-8", "replace").rstrip().splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-STDERR_TAIL_LINES:])

    def _fail(self, message: str, rank: int | None) -> RankError:
        tail = self.stderr_tail(rank) if rank is not None else ""
        self.close()
        return RankError(message + (f"\nrank {rank} stderr:\n{tail}" if tail else ""))

    def _collect(self, timeout_s: float, what: str) -> list[Any]:
        deadline = time.monotonic() + timeout_s
        got: dict[int, Any] = {}
        while len(got) < self.world_size:
            left = deadline - time.monotonic()
            try:
                rank, msg = self._replies.get(timeout=max(0.01, left)) if left > 0 else self._replies.get_nowait()
            except queue.Empty:
                missing = [r for r in range(self.world_size) if r not in got]
                raise self._fail(
                    f"{what}: rank(s) {missing} gave no answer within {timeout_s:g} s", missing[0]
                ) from None
            if msg is None:
                code = self._procs[rank].wait(timeout=5)
                raise self._fail(f"{what}: rank {rank} exited (status {code})", rank)
            if not msg.get("ok"):
                raise self._fail(f"{what}: rank {rank} failed: {msg.get('error')}", rank)
            got[rank] = msg.get("result")
        return [got[r] for r in range(self.world_size)]

    def call(self, fn: str, args: dict[str, Any], timeout_s: float) -> list[Any]:
        """Run ``fn`` (``"package.module:function"``, called as ``function(args, rank_ctx)``) on every rank;
        the results in rank order. Raises RankError (the pool is closed then)."""
        if self._closed:
            raise RankError("rank pool is closed")
        line = (json.dumps({"fn": fn, "args": args}) + "\n").encode()
        for rank, proc in enumerate(self._procs):
            try:
                assert proc.stdin is not None
                proc.stdin.write(line)
                proc.stdin.flush()
            except OSError as exc:
                raise self._fail(f"{fn}: cannot reach rank {rank}: {exc}", rank) from None
        return self._collect(timeout_s, fn)

    def close(self) -> None:
        """Close the ranks' stdin (they exit), then kill what is left after a few seconds."""
        if self._closed:
            return
        self._closed = True
        for proc in self._procs:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + 10
        for proc in self._procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for reader in self._readers:
            reader.join(timeout=5)
        for proc in self._procs:
            if proc.stdout is not None:
                proc.stdout.close()
        shutil.rmtree(self._dir, ignore_errors=True)
        try:
            atexit.unregister(self.close)
        except Exception:  # noqa: BLE001 - interpreter shutting down
            pass


def get_pool(ctx: Any, world_size: int, device: str, timeout_s: float = START_TIMEOUT_S) -> RankPool:
    """The run's pool for (world_size, device), started on first use and kept in ``ctx.state``."""
    pool = ctx.state.get("rank_pool")
    if pool is not None and (pool._closed or (pool.world_size, pool.device) != (world_size, device)):
        pool.close()
        pool = None
    if pool is None:
        ctx.log(f"starting {world_size} rank process(es) on {device}")
        pool = RankPool(world_size, device, timeout_s)
        ctx.state["rank_pool"] = pool
    return pool


class RankContext:
    """What a rank function gets: torch, torch.distributed, rank, world size, its device, a per-rank cache."""

    def __init__(self, torch: Any, rank: int, world_size: int, device: str) -> None:
        self.torch = torch
        self.dist = torch.distributed
        self.rank = rank
        self.world_size = world_size
        self.device = device  # "cuda:R" or "cpu"
        self.cuda = device.startswith("cuda")
        self.state: dict[str, Any] = {}

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()


def rank_main() -> None:
    """Entry point of a rank process (see the module docstring)."""
    import datetime
    import importlib

    proto = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything printed to stdout from here on goes to the stderr file
    sys.stdout = sys.stderr

    def reply(doc: dict[str, Any]) -> None:
        proto.write(json.dumps(doc) + "\n")
        proto.flush()

    rank, world = int(os.environ["ORCH_RANK"]), int(os.environ["ORCH_WORLD_SIZE"])
    device = os.environ["ORCH_DEVICE"]
    timeout = datetime.timedelta(seconds=float(os.environ["ORCH_TIMEOUT_S"]))
    try:
        import torch
        import torch.distributed as dist

        if device == "cuda":
            torch.cuda.set_device(rank)
            dev = f"cuda:{rank}"
        else:
            dev = "cpu"
        store = dist.TCPStore("127.0.0.1", int(os.environ["ORCH_STORE_PORT"]), is_master=False, timeout=timeout)
        dist.init_process_group(
            "nccl" if device == "cuda" else "gloo", store=store, rank=rank, world_size=world, timeout=timeout
        )
        rc = RankContext(torch, rank, world, dev)
        reply({"ok": True, "result": {"rank": rank, "pid": os.getpid(), "device": dev}})
    except Exception as exc:
        reply({"ok": False, "error": f"{type(exc).__name__}: {exc}"})
        return
    for line in sys.stdin:
        try:
            msg = json.loads(line)
            mod_name, _, fn_name = msg["fn"].partition(":")
            fn = getattr(importlib.import_module(mod_name), fn_name)
            reply({"ok": True, "result": fn(msg.get("args") or {}, rc)})
        except Exception as exc:
            tb = traceback.format_exc().rstrip().splitlines()[-4:]
            reply({"ok": False, "error": f"{type(exc).__name__}: {exc} | " + " / ".join(x.strip() for x in tb)})
    try:
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001 - exiting anyway
        pass


def environ(args: dict[str, Any], rc: Any) -> dict[str, Any]:
    """A rank function: the values of ``args["keys"]`` in the rank's environment (tests, diagnosis)."""
    return {k: os.environ.get(k) for k in args.get("keys", [])}
