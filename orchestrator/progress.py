"""Run progress at fleet size: per inventory group one summary (hosts done/running/failed/waiting, cases done of
total, ETA) plus the slowest running hosts and the failing ones by name. Pure: fed by the runner's Observer
callbacks (``host_state``, ``case_progress``) with a clock passed in; the CLI draws :meth:`FleetTracker.lines`.

Host states as the runner reports them: ``completed`` is done; ``failed``, ``partial`` and ``cancelled`` are
failed (a partial host stored some results but not all cases); any other state (starting, started, reattached,
reconnecting, error) is running; a host not heard of yet is waiting. An ``error`` event keeps the host running
and marks it failing (shown by name with its message).

ETA of a group: elapsed since the group's first host started × (cases left / cases done), over the hosts whose
case total is known; none before the first case finishes, and none once no host is running.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.hostgroups import fold, generalize, group_by

DONE = frozenset({"completed"})
FAILED = frozenset({"failed", "partial", "cancelled"})
SHOWN_SLOWEST = 3  # running hosts named per group, lowest share of cases done first
SHOWN_FAILING = 3  # distinct failure messages per group, most hosts first


@dataclass
class _Host:
    group: str
    state: str = "waiting"
    detail: str = ""
    done: int = 0
    total: int | None = None
    error: str = ""  # the last error event of a host that is still running


@dataclass
class FleetTracker:
    """Counts per group. ``group_of``: every selected host name -> its inventory group, in inventory order (a
    host reported that is not in it goes to group ``?``)."""

    group_of: dict[str, str]
    started_at: dict[str, float] = field(default_factory=dict)  # group -> monotonic time of its first host start
    _hosts: dict[str, _Host] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._hosts = {h: _Host(g) for h, g in self.group_of.items()}

    def _host(self, name: str, now: float) -> _Host:
        h = self._hosts.get(name)
        if h is None:
            h = self._hosts[name] = _Host("?")
        self.started_at.setdefault(h.group, now)
        return h

    def host_state(self, host: str, state: str, detail: str, now: float) -> None:
        h = self._host(host, now)
        if state == "error":
            h.error = detail
            if h.state == "waiting":
                h.state = "started"
            return
        h.state, h.detail = state, detail

    def case_progress(self, host: str, done: int, total: int | None, now: float) -> None:
        h = self._host(host, now)
        h.done = done
        if total is not None:
            h.total = total
        if h.state == "waiting":
            h.state = "started"

    def lines(self, now: float) -> list[str]:
        """The summary: per group ``GROUP  hosts D done · R running · F failed · W waiting / N  cases C/T  ETA``
        (waiting only when some are), then ``  slowest: host C/T, ...`` and ``  failed|failing on N hosts: LIST:
        message`` lines. Plain text (the caller escapes it for rich)."""
        out: list[str] = []
        groups: dict[str, list[tuple[str, _Host]]] = {}
        for name, h in list(self._hosts.items()):  # drawn from rich's refresh thread
            groups.setdefault(h.group, []).append((name, h))
        for group, members in groups.items():
            done = [n for n, h in members if h.state in DONE]
            failed = [(n, h) for n, h in members if h.state in FAILED]
            waiting = [n for n, h in members if h.state == "waiting"]
            running = [(n, h) for n, h in members if h.state not in DONE | FAILED | {"waiting"}]
            cases_done = sum(h.done for _, h in members)
            cases_total = sum(h.total for _, h in members if h.total is not None)
            unknown = any(h.total is None for _, h in members if h.state not in FAILED)
            counts = f"{len(done)} done · {len(running)} running · {len(failed)} failed"
            if waiting:
                counts += f" · {len(waiting)} waiting"
            line = f"{group}  hosts {counts} / {len(members)}  cases {cases_done}/{cases_total}{'+' if unknown else ''}"
            eta = self._eta(group, running, now)
            if eta is not None:
                line += f"  ETA {_duration(eta)}"
            out.append(line)
            slow = sorted(
                (h.done / h.total if h.total else 0.0, i, n, h) for i, (n, h) in enumerate(running)
            )[:SHOWN_SLOWEST]
            if slow and len(running) > 1:
                out.append("  slowest: " + ", ".join(f"{n} {h.done}/{h.total if h.total is not None else '?'}"
                                                     for _, _, n, h in slow))  # fmt: skip
            bad = [(n, ("failed", h.detail)) for n, h in failed]
            bad += [(n, ("failing", h.error)) for n, h in running if h.error]
            for g in group_by((n, (kind, generalize(msg, host=n))) for n, (kind, msg) in bad)[:SHOWN_FAILING]:
                kind, msg = g.key[0], g.key[1].removeprefix("{host}: ")
                msg = msg.replace("{host}", g.hosts[0] if g.count == 1 else "<host>")  # no raw placeholder shown
                out.append(f"  {kind} on {g.count} host{'s' if g.count != 1 else ''}: {fold(g.hosts)}"
                           + (f": {msg}" if msg else ""))  # fmt: skip
        return out

    def _eta(self, group: str, running: list[tuple[str, _Host]], now: float) -> float | None:
        if not running or group not in self.started_at:
            return None
        known = [h for _, h in running if h.total is not None]
        if len(known) < len(running):
            return None
        left = sum(max(0, (h.total or 0) - h.done) for h in known)
        done = sum(h.done for _, h in self._members(group) if h.total is not None)
        if done == 0:
            return None
        return (now - self.started_at[group]) * left / done

    def _members(self, group: str) -> list[tuple[str, _Host]]:
        return [(n, h) for n, h in self._hosts.items() if h.group == group]


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"

