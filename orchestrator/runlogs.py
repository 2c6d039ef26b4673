"""``orch runs logs RUN [--host H] [--case N]`` and ``GET /api/v1/runs/{id}/logs``: the full outputs a ``command``
suite's runs kept on the hosts, fetched on demand.

A result line carries only excerpts, sizes and sha256 of each timed run's stdout, stderr and ``{output}`` file
(the agent's ``benches/command.py``); the whole files stay in ``<orch_home>/runs/<run_id>/<host>/outputs/`` on
the host. This connects to each host of the run (the deploy check finds the agent) and asks ``agent logs``
for them. A host that cannot be reached, or that no longer has the run (its files were removed), is reported
for that host; the others still answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.agentctl import run_opts
from orchestrator.deploy import deploy_host
from orchestrator.errors import OrchError, UsageError
from orchestrator.fanout import fanout
from orchestrator.inventory import Host, Inventory
from orchestrator.store.outputs_repo import StoredFile, StoredOutputs
from orchestrator.textlines import output_lines
from orchestrator.transport import open_transport
from orchestrator.wording import counted

LOGS_TIMEOUT_S = 600.0


STREAMS = ("stdout", "stderr", "output")
KEPT = "orch stores each output's size and sha256, not the output"
LISTED_FILES = 3  # stored files named in one "gone from the host" line; the rest are counted


@dataclass
class HostLogs:
    """One host's kept outputs: ``cases`` as ``agent logs`` prints them (``[{"case_index", "runs": [{"run",
    "stdout"|"stderr"|"output": {"text", "encoding", "bytes", "sha256"}}]}]``; ``encoding`` is ``"utf-8"`` when
    ``text`` is the file itself, ``"base64"`` when the file is not valid UTF-8 and ``text`` is its base64), each
    file with ``check`` (``ok``, ``changed``, ``unrecorded``: no stored result names it) and ``stored`` (``{"bytes",
    "sha256"}`` recorded with the result, or None) added by :func:`check_outputs`; ``missing``: the stored files
    the host no longer has (``{"case_index", "run", "stream", "bytes", "sha256"}``); ``problems``: one line per
    case with gone outputs and per changed file; ``error`` (with ``hint``): why the host could not answer, or a
    summary of ``problems``. ``not_read``: what is in the place of the run's ``outputs/`` directory when that is
    not a real directory (``"a symbolic link"`` ...: nothing under it was read); a case whose own directory is
    not one says so in its entry (``"not_read"``, no runs)."""

    host: str
    cases: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None
    hint: str | None = None
    missing: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    not_read: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "cases": self.cases, "error": self.error, "hint": self.hint,
                "missing": self.missing, "problems": self.problems, "not_read": self.not_read}  # fmt: skip


def _agent_answer(stdout: str) -> dict[str, Any] | None:
    lines = output_lines(stdout.strip())
    try:
        doc = json.loads(lines[-1]) if lines else None
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


async def _host_logs(
    host: Host, run_id: str, case: int | None, timeout_s: float, stored: dict[int, list[dict[str, StoredFile]]]
) -> HostLogs:
    t = await open_transport(host, timeout_s=timeout_s)
    try:
        dep = await deploy_host(t, host)
        argv = [host.interpreter, dep.agent_path, "logs", run_id, *run_opts(host)]
        if case is not None:
            argv += ["--case", str(case)]
        res = await t.run(argv, timeout_s=LOGS_TIMEOUT_S, check=False)
    finally:
        await t.close()
    doc = _agent_answer(res.stdout)
    code = doc.get("code") if doc is not None else None
    recorded = case in stored if case is not None else bool(stored)  # the store names outputs to look for
    if res.exit_status == 0 and doc is not None and isinstance(doc.get("cases"), list):
        odd = doc.get("not_read")
        logs = HostLogs(host.name, cases=doc["cases"], not_read=str(odd)[:40] if odd is not None else None)
    elif code in ("no_such_case", "no_such_run", "outputs_not_read") and recorded:  # the store says what is gone
        odd = doc.get("not_read") if doc is not None and code == "outputs_not_read" else None
        logs = HostLogs(host.name, not_read=str(odd)[:40] if odd is not None else None)
        check_outputs(logs, stored, case)
        if code == "no_such_run" and doc is not None:
            logs.hint = f"{doc.get('error')}: the run's directory was removed from the host; {KEPT}"
        return logs
    else:
        try:
            res.json_object()
            why = "agent logs answered without cases"
        except ValueError as exc:
            why = str(exc)
        hint = None
        if code in ("no_such_case", "no_such_run"):
            from orchestrator.store.compute import short_run_id

            hint = f"no stored result names an output either: `orch runs show {short_run_id(run_id)}` lists the run's"
            hint += " results and errors"
        return HostLogs(host.name, error=why, hint=hint)
    check_outputs(logs, stored, case)
    return logs


def _file_text(stream: str, k: Any, f: StoredFile) -> str:
    size = f"{f['bytes']} bytes, sha256 {f['sha256']}" if f["bytes"] else "empty"
    return f"run {k} {stream} {size}"


def check_outputs(logs: HostLogs, stored: dict[int, list[dict[str, StoredFile]]], case: int | None) -> None:
    """Compare every file ``logs`` fetched with the size and sha256 stored with its result (``stored``: case
    index -> per timed run ``{stream: {"bytes", "sha256"}}``, from store/outputs_repo.py) and list the stored
    files the host no longer has (only of ``case`` when given). Sets each file's ``check``/``stored``,
    ``logs.missing``, ``logs.problems`` and, when there is any problem, ``logs.error``/``logs.hint``."""
    seen: set[tuple[int, int, str]] = set()
    changed: dict[int, list[str]] = {}
    cases: set[int] = set()
    odd: dict[tuple[int, int, str], str] = {}  # a stream whose file is not a regular file on the host: what it is
    odd_dir: dict[int, str] = {}  # a case whose directory is not a real directory on the host: what it is
    for c in logs.cases:
        ci = c.get("case_index")
        if not isinstance(ci, int):
            continue
        cases.add(ci)
        if c.get("not_read") is not None:
            odd_dir[ci] = str(c["not_read"])[:40]
        for r in c.get("runs", []):
            k = r.get("run")
            not_read = r.get("not_read")
            if isinstance(not_read, dict) and isinstance(k, int):
                odd.update(((ci, k, str(s)), str(what)[:40]) for s, what in not_read.items())
            for stream in STREAMS:
                f = r.get(stream)
                if not isinstance(f, dict) or not isinstance(k, int):
                    continue
                seen.add((ci, k, stream))
                runs = stored.get(ci, [])
                want = runs[k].get(stream) if 0 <= k < len(runs) else None
                f["stored"] = dict(want) if want is not None else None
                if want is None:
                    f["check"] = "unrecorded"
                elif want["bytes"] == f.get("bytes") and want["sha256"] == f.get("sha256"):
                    f["check"] = "ok"
                else:
                    f["check"] = "changed"
                    changed.setdefault(ci, []).append(
                        f"case {ci} run {k} {stream}: changed on the host since it was stored: now {f.get('bytes')} "
                        f"bytes, sha256 {f.get('sha256')}; stored {want['bytes']} bytes, sha256 {want['sha256']}"
                    )
    problems: dict[int, list[str]] = dict(changed)
    for ci in sorted(stored):
        if case is not None and ci != case:
            continue
        cases.add(ci)
        gone = [(k, s, run[s]) for k, run in enumerate(stored[ci]) for s in STREAMS
                if s in run and (ci, k, s) not in seen]  # fmt: skip
        logs.missing += [{"case_index": ci, "run": k, "stream": s, **f} for k, s, f in gone]
        if not gone:
            continue
        if (what_dir := odd_dir.get(ci)) is not None or logs.not_read is not None:
            place = f"its outputs directory is {what_dir}" if what_dir else f"the run's outputs/ is {logs.not_read}"
            named = "; ".join(_file_text(s, k, f) for k, s, f in gone[:LISTED_FILES])
            if len(gone) > LISTED_FILES:
                named += f"; and {counted(len(gone) - LISTED_FILES, 'more file')}"
            problems.setdefault(ci, []).insert(
                0, f"case {ci}: {place} on the host, not a directory: not read; stored: {named}"
            )
            continue
        for k, s, f in gone:
            if (ci, k, s) in odd:  # there, but not the file the worker wrote (a FIFO, a link): never read
                problems.setdefault(ci, []).append(
                    f"case {ci} run {k} {s}: {odd[ci, k, s]} is in its place on the host, not a regular file: not "
                    f"read; stored: {_file_text(s, k, f)}"
                )
        gone = [(k, s, f) for k, s, f in gone if (ci, k, s) not in odd]
        if not gone:
            continue
        total = sum(len(run) for run in stored[ci])
        what = "gone from the host" if len(gone) == total else f"{len(gone)} of {total} outputs gone from the host"
        named = "; ".join(_file_text(s, k, f) for k, s, f in gone[:LISTED_FILES])
        if len(gone) > LISTED_FILES:
            rest = gone[LISTED_FILES:]
            named += f"; and {counted(len(rest), 'more file')} ({sum(f['bytes'] for _, _, f in rest)} bytes)"
        problems.setdefault(ci, []).insert(0, f"case {ci}: {what}; stored: {named}")
    logs.problems = [line for ci in sorted(problems) for line in problems[ci]]
    if logs.problems:
        logs.error = f"{len(problems)} of {counted(len(cases), 'case')}: outputs gone from the host or changed"
        logs.hint = f"{KEPT}: what is gone cannot be fetched, and a changed file is not what the result was parsed from"


KEEPS_OUTPUTS = "the host keeps outputs only for command suites (YAML suites with a `command:`)"


def check_keeps_outputs(run_id: str, suite: str) -> None:
    """Raise UsageError when ``suite`` is a built-in suite that runs no command (moe-sweep, hbm, decode...):
    its hosts keep no outputs, so there is nothing to fetch. A suite orch does not know here (a YAML suite
    whose file is not loaded) is asked for: only its hosts know."""
    from orchestrator.store.compute import short_run_id
    from orchestrator.suites.registry import builtin_registry

    reg = builtin_registry()
    if suite in reg.names() and reg.get(suite).command is None:
        short = short_run_id(run_id)
        raise UsageError(
            f"run {short} ran the built-in suite {suite!r}, which runs no command: {KEEPS_OUTPUTS}",
            f"its results are in `orch runs show {short}` (`--json` for every field)",
        )


def check_case(run_id: str, case: int | None, totals: list[int | None], option: str = "--case") -> None:
    """Raise UsageError when ``case`` is not an index of the run's cases: 0 to N-1, N the most cases a host of
    the run announced (``cases_total`` of its ``hello`` line; ``totals`` holds one per host asked). Nothing is
    checked when no host announced its count (the hosts then say which cases they kept). ``option``: the name
    the message gives the value (the CLI's ``--case``, the API's ``case`` query parameter)."""
    from orchestrator.store.compute import short_run_id
    from orchestrator.wording import counted

    known = [t for t in totals if t is not None]
    if case is None or not known or case < max(known):
        return
    n, short = max(known), short_run_id(run_id)
    valid = f"numbered 0 to {n - 1}" if n else "none to show"
    raise UsageError(
        f"{option} {case} is out of range: run {short} has {counted(n, 'case')}, {valid}",
        f"pass {option} 0 to {n - 1}, or leave {option} out for every case" if n else f"see `orch runs show {short}`",
    )


async def fetch_logs(
    inventory: Inventory, run_id: str, run_hosts: list[str], *, host: str | None = None, case: int | None = None,
    timeout_s: float = 10.0, suite: str | None = None, stored: StoredOutputs | None = None,
) -> list[HostLogs]:  # fmt: skip
    """The kept outputs of run ``run_id`` (whose hosts are ``run_hosts``, its suite ``suite``), from ``host`` or
    every host, for ``case`` (its index in the run) or every case. Raises UsageError for a host that is not in
    the run, or a suite that keeps no outputs (``check_keeps_outputs``), before connecting to any host.
    ``stored`` (store/outputs_repo.py's ``stored_outputs``): what the store recorded of each output, which every
    fetched file is checked against (:func:`check_outputs`); None: nothing stored (every file ``unrecorded``)."""
    if suite is not None:
        check_keeps_outputs(run_id, suite)
    names = run_hosts
    if host is not None:
        if host not in run_hosts:
            raise UsageError(f"host {host!r} is not part of run {run_id}", f"its hosts: {', '.join(run_hosts)}")
        names = [host]
    hosts = [inventory.host(n) for n in names]
    known = stored or {}
    outs = await fanout(
        hosts, lambda h: _host_logs(h, run_id, case, timeout_s, known.get(h.name, {})), deadline_s=LOGS_TIMEOUT_S + 60
    )
    result = []
    for o in outs:
        if o.value is not None:
            result.append(o.value)
        else:
            err: OrchError | None = o.error
            result.append(HostLogs(o.host.name, error=err.message if err else "failed", hint=err.hint if err else None))
    return result


def file_bytes(f: dict[str, Any]) -> bytes:
    """The bytes of one fetched file (``{"text", "encoding"}``: ``text`` is the base64 of them when ``encoding`` is
    ``"base64"``, else the file itself as UTF-8)."""
    import base64

    text = str(f.get("text", ""))
    return base64.b64decode(text) if f.get("encoding") == "base64" else text.encode("utf-8")


def save_outputs(hosts: list[HostLogs], folder: Path) -> list[Path]:
    """Write every fetched file, byte for byte, to ``folder/<host>/<case>/<run>.<stream>`` (the host's own layout
    under ``outputs/``) and return the paths written, in order. Nothing is overwritten: when any target exists,
    UsageError names it before anything is written. Raises OrchError naming the path when a write fails."""
    targets: list[tuple[Path, bytes]] = []
    for h in hosts:
        if h.host in ("", ".", "..") or "/" in h.host:
            raise UsageError(f"host name {h.host!r} cannot name a folder under {folder}", "use --host to pick another")
        for c in h.cases:
            for r in c.get("runs", []):
                for stream in STREAMS:
                    f = r.get(stream)
                    if isinstance(f, dict):
                        name = f"{int(r.get('run', 0))}.{stream}"
                        targets.append((folder / h.host / str(int(c.get("case_index", 0))) / name, file_bytes(f)))
    for path, _ in targets:
        if path.exists() or path.is_symlink():
            raise UsageError(
                f"--output: {path} already exists; nothing was written",
                "pass an empty or new folder to --output (orch never overwrites a saved output)",
            )
    for path, data in targets:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "xb") as fh:
                fh.write(data)
        except OSError as exc:
            raise OrchError(f"--output: cannot write {path}: {exc.strerror or exc}",
                            "check the folder's permissions and free space") from None  # fmt: skip
    return [p for p, _ in targets]
