"""The detached worker: runs a spec's cases and appends events to the spool.

Event order: ``hello``, then per case ``case_start`` and ``result`` or ``error``, ``log`` lines in between,
and finally ``done`` (fsync'ed) with ``status`` completed (every case ran; some may have errored), failed (the
spec was bad, the run broke, or every case errored) or cancelled (SIGTERM after ``agent cancel`` left the run's
``cancel`` marker, :attr:`.runs.RunDir.cancel_path`). A SIGTERM without that marker came from outside orch (an
admin's ``kill``, a watchdog, systemd-oomd): ``done`` is then ``failed`` with :data:`TERMINATED` as its ``reason``
and ``"stopped_by": "sigterm"``, never read as the user's cancel. SIGTERM interrupts the running case at once; the
worker still writes ``done`` before it exits.

Before the first event the worker forks its guardian (:mod:`.reaper`: nothing it starts outlives it). When it
dies of an error it cannot put in the spool — the spool itself cannot be written (disk full, I/O error), or the
worker's own code failed — it records why in the reserved ``reason`` file (:mod:`.fatal`), which ``follow``
hands to orch.
"""

from __future__ import annotations

import copy
import json
import os
import signal
import traceback
from typing import Any

from . import fatal, leases, reaper, sysinfo, telemetry
from .benches import Context, load
from .meta import agent_version
from .runs import RunDir
from .spec import validate
from .spool import Spool, SpoolWriteError


class Cancelled(BaseException):
    """Raised from the SIGTERM handler while a case runs; a BaseException so benches do not swallow it."""


TERMINATED = (
    "the agent worker was terminated by SIGTERM from outside orch (not orch cancel: an admin's kill, a watchdog, "
    "systemd-oomd)"
)


def describe_exception(exc: BaseException, tail_lines: int = 6) -> str:
    """``"Type: message"`` followed by the last lines of the traceback — none for an expected failure (an
    exception whose class says ``expected = True``, e.g. the command bench's CommandFailed): its message is the
    whole story, and the agent's own frames would read as a crash of the agent."""
    head = f"{type(exc).__name__}: {exc}"
    if getattr(exc, "expected", False) is True:
        return head
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    lines = [ln for ln in "".join(tb[:-1]).rstrip().splitlines() if ln.strip(" ^~")][-tail_lines:]
    return head + ("\n" + "\n".join(lines) if lines else "")


def _check_result(out: Any) -> dict[str, Any]:
    if not isinstance(out, dict) or not isinstance(out.get("metrics"), dict):
        raise TypeError(
            f"bench returned {type(out).__name__!r}, expected {{'metrics': {{...}}, 'info': {{...}}}}"
        )
    return out


def _telemetry(spec: dict[str, Any], case: dict[str, Any]) -> telemetry.CaseTelemetry | None:
    """Start sampling for one case (spec ``telemetry_ms``: interval, 0 = off; default 100 ms)."""
    ms = spec.get("telemetry_ms", telemetry.DEFAULT_INTERVAL_MS)
    if not isinstance(ms, int) or isinstance(ms, bool) or ms <= 0:
        return None
    return telemetry.CaseTelemetry(telemetry.case_gpus(case), ms).start()


def run(run_dir: str) -> int:
    """Run the spec in ``run_dir``; returns the process exit status (0 unless the run itself failed).

    A spool that cannot be written ends the run at once: the reason (path and errno) goes to ``reason``."""
    os.umask(0o077)
    rd = RunDir(run_dir)
    if not os.path.exists(rd.reason_path):
        try:
            fatal.reserve(rd.reason_path)
        except OSError:
            pass
    cookie = reaper.make_cookie(rd.run_id, rd.host)
    try:
        reaper.write_cookie(rd.path, cookie)  # for agent cancel; the guardian and the commands hold it in memory
    except OSError:
        pass
    reaper.set_cookie(cookie)
    reaper.start_guardian()
    try:
        return _guarded(rd)
    finally:
        _clear_leases(rd)


def _clear_leases(rd: RunDir) -> None:
    """Blank this worker's lease records (the locks themselves end with the process)."""
    try:
        with open(os.path.join(rd.path, "leases.json")) as f:
            paths = json.load(f)
    except (OSError, ValueError):
        return
    if isinstance(paths, list):
        leases.clear_records([p for p in paths if isinstance(p, str)], os.getpid())


def _guarded(rd: RunDir) -> int:
    try:
        return _run(rd)
    except SpoolWriteError as exc:
        fatal.record(rd.reason_path, f"the agent worker stopped: {exc}")
        return 1
    except BaseException as exc:
        fatal.record(rd.reason_path, f"the agent worker failed: {describe_exception(exc)}")
        raise


def _run(rd: RunDir) -> int:
    flags = {"interruptible": False, "cancelled": False, "terminated": False}

    def on_term(signum: int, frame: Any) -> None:
        # agent cancel leaves the marker before it signals; the first SIGTERM decides which stop this is
        if not flags["terminated"] and rd.cancel_marked():
            flags["cancelled"] = True
        elif not flags["cancelled"]:
            flags["terminated"] = True
        if flags["interruptible"]:
            flags["interruptible"] = False
            raise Cancelled()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    counts = {"results": 0, "errors": 0}
    status = "failed"
    reason: str | None = None  # why the run stopped early, when the spool itself failed
    spec: dict[str, Any] | None = None
    with Spool(rd.spool) as spool:
        try:
            try:
                with open(rd.spec_path) as f:
                    spec = validate(json.load(f))
            except (OSError, ValueError) as exc:
                spool.append(
                    "hello",
                    agent_version=agent_version(),
                    run_id=rd.run_id,
                    host=rd.host,
                    suite=None,
                    facts=sysinfo.collect(rd.orch_home),
                    cases_total=0,
                )
                spool.append("error", message=f"bad spec: {describe_exception(exc, 0)}")
                counts["errors"] += 1
                return 1
            cases = spec["cases"]
            spool.append(
                "hello",
                agent_version=agent_version(),
                run_id=spec["run_id"],
                host=rd.host,  # the inventory name orch gave this host: `orch runs import` checks a spool by it
                suite=spec["suite"],
                bench=spec["bench"],
                # orch collects the facts just before `start` and passes them in the spec: no second torch probe
                facts=spec["facts"] if isinstance(spec.get("facts"), dict) else sysinfo.collect(rd.orch_home),
                cases_total=len(cases),
            )
            ctx = Context(
                repeat=spec["repeat"],
                warmup=spec["warmup"],
                device=spec["device"],
                seed=spec["seed"],
                log=lambda level, msg: spool.append("log", level=level, message=msg),
                run_dir=rd.path,
            )
            bench = load(spec["bench"])
            for i, case in enumerate(cases):
                if flags["cancelled"] or flags["terminated"]:
                    raise Cancelled()
                spool.append("case_start", case_index=i, case=case)
                ctx.case_index = i
                tel = _telemetry(spec, case)
                try:
                    flags["interruptible"] = True
                    out = bench(copy.deepcopy(case), ctx)  # the case_start's parameters are the result's (orch
                    # refuses a result whose case differs from its case_start's): no bench changes them
                    flags["interruptible"] = False
                    out = _check_result(out)
                except Exception as exc:
                    flags["interruptible"] = False
                    spool.append(
                        "error",
                        case_index=i,
                        case=case,
                        message=describe_exception(exc),
                        exception=type(exc).__name__,
                        telemetry=tel.stop() if tel else None,
                    )
                    counts["errors"] += 1
                    continue
                finally:
                    flags["interruptible"] = False
                    if tel is not None:
                        tel.stop()  # also when cancelled: no sampler outlives its case
                info = dict(out.get("info") or {})
                if tel is not None:
                    info["telemetry"] = tel.stop()
                spool.append("result", case_index=i, case=case, metrics=out["metrics"], info=info)
                counts["results"] += 1
            status = "failed" if counts["errors"] and not counts["results"] else "completed"
            return 0
        except SpoolWriteError as exc:
            # The spool is full (or failing): the `done` below is tried once — a short line may still fit where
            # the lost one did not — carrying why, so orch shows it; the reason file has it either way.
            status, reason = "failed", f"the agent worker stopped: {exc}"
            raise
        except Cancelled:
            if flags["terminated"]:
                spool.append("log", level="error", message=TERMINATED)
                return 1
            status = "cancelled"
            spool.append("log", level="warning", message="cancelled by SIGTERM")
            return 0
        except Exception as exc:
            flags["interruptible"] = False
            spool.append("error", message=f"agent worker failed: {describe_exception(exc)}")
            counts["errors"] += 1
            return 1
        finally:
            flags["interruptible"] = False
            extra: dict[str, Any] = {}
            if flags["cancelled"] and reason is None:
                status = "cancelled"
            elif flags["terminated"] and reason is None:
                status, reason = "failed", TERMINATED
                extra["stopped_by"] = "sigterm"
            # lines: every line before done (the worker is the spool's only writer until done)
            counts_doc = {"lines": spool.written, **counts}
            spool.append("done", fsync=True, status=status, counts=counts_doc,
                         **({"reason": reason} if reason else {}), **extra)  # fmt: skip
