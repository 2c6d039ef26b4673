"""A Slurm inventory group: the ``slurm:`` block (what ``sbatch`` is asked for) and how orch reaches the cluster —
pure.

Shape (a group of ``inventory.yaml``)::

    h200-slurm:
      slurm: {partition: gpu, account: ml, nodes: 2, gpus_per_node: 8, time: "00:30:00",
              constraint: h200, reservation: bench, qos: high}
      login: login-0          # an inventory host reached over SSH, or `local` (orch runs on the login node)
      agent_dir: /local/orch  # optional: node-local directory the agent is copied to (sbcast); unset: the
                              # agent deployed in the login user's (shared) home is run from there
      vars: {python: /opt/venv/bin/python3, orch_home: /shared/orch}

A Slurm group lists no ``hosts:``: its hosts are the nodes Slurm allocates, named as Slurm names them.
``vars.orch_home`` (default ``~/.orch`` of the login user) must be on storage that the login node and the compute
nodes share: the nodes spool there and orch follows the spools from the login node. ``vars.python`` is the
interpreter of the compute nodes (default ``python3``).

Option meanings are ``sbatch``'s (``man sbatch``): ``nodes`` → ``--nodes``, ``gpus_per_node`` →
``--gpus-per-node``, ``time`` → ``--time`` (minutes, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM:SS``),
``partition``, ``account``, ``constraint``, ``reservation``, ``qos`` → the options of the same name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: sbatch --time formats (man sbatch): "minutes", "minutes:seconds", "hours:minutes:seconds", "days-hours",
#: "days-hours:minutes" and "days-hours:minutes:seconds".
_TIME_RE = re.compile(r"^(\d+|\d+:\d{1,2}|\d+:\d{1,2}:\d{1,2}|\d+-\d+|\d+-\d+:\d{1,2}|\d+-\d+:\d{1,2}:\d{1,2})$")
#: partition, account, qos, reservation names: what Slurm accepts in its own configuration files.
_NAME_RE = re.compile(r"^[A-Za-z0-9_.+-]{1,128}$")
SLURM_KEYS = ("partition", "account", "nodes", "gpus_per_node", "time", "constraint", "reservation", "qos")


class SlurmOptions(BaseModel):
    """The ``slurm:`` block of a group: what each job asks ``sbatch`` for. ``None`` = the cluster's default."""

    model_config = ConfigDict(extra="forbid")

    partition: str | None = None
    account: str | None = None
    nodes: int = Field(default=1, ge=1, le=100_000)
    gpus_per_node: int | None = Field(default=None, ge=0, le=64)
    time: str | None = None
    constraint: str | None = None
    reservation: str | None = None
    qos: str | None = None

    @field_validator("time", mode="before")
    @classmethod
    def _time(cls, v: object) -> object:
        if isinstance(v, int) and not isinstance(v, bool):
            v = str(v)
        if v is not None and (not isinstance(v, str) or not _TIME_RE.match(v)):
            raise ValueError(
                f"time {v!r} is not an sbatch time limit: use minutes (30), \"MM:SS\", \"HH:MM:SS\", "
                "\"D-HH\" or \"D-HH:MM:SS\""
            )
        return v

    @field_validator("partition", "account", "reservation", "qos")
    @classmethod
    def _name(cls, v: str | None) -> str | None:
        if v is not None and not _NAME_RE.match(v):
            raise ValueError(f"{v!r} is not a Slurm name (letters, digits, '_.+-')")
        return v

    @field_validator("constraint")
    @classmethod
    def _constraint(cls, v: str | None) -> str | None:
        # a feature expression (h200&ib, [a|b]*2): passed as one argv element, never through a shell
        if v is not None and (not v.strip() or any(c in v for c in "\n\r\0")):
            raise ValueError(f"constraint {v!r} must be one line of Slurm feature expression, e.g. h200&ib")
        return v


@dataclass(frozen=True)
class SlurmGroup:
    """One resolved Slurm group. ``login``: ``"local"`` or the name of an inventory host (reached like any host).
    ``python``: the compute nodes' interpreter (``None``: ``python3``). ``orch_home``: the shared directory runs
    are spooled under (``None``: ``~/.orch`` of the login user). ``agent_dir``: node-local directory the agent is
    copied to with ``sbcast`` before the agents start (``None``: run the one deployed in the shared home)."""

    name: str
    options: SlurmOptions
    login: str
    python: str | None = None
    orch_home: str | None = None
    agent_dir: str | None = None

    @property
    def node_python(self) -> str:
        return self.python or "python3"
