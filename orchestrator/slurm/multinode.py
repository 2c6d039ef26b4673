"""Suites whose one case spans the allocation (a collective between nodes, e.g. nccl-tests with ``nodes > 1``) —
pure.

A command suite with ``spans_nodes: true`` run on a Slurm group is not one agent per node: the job script runs
ONE agent on the batch host (the allocation's first node, not under ``srun``, so its steps may use the whole
allocation), and every case's command is prefixed with :func:`jobs.multinode_launcher` — ``srun --nodes=N
--ntasks=N --ntasks-per-node=1``: one process per node, each driving the node's GPUs (nccl-tests' ``-g``), with
the cluster's MPI/PMIx plugin (its ``MpiDefault``). The case is stored once, under the batch host's name, with
every node of the allocation in the host run's and each result's ``info.nodes``.
"""

from __future__ import annotations

import copy
from typing import Any

from orchestrator.slurm.config import SlurmGroup
from orchestrator.slurm.jobs import multinode_launcher
from orchestrator.suites.registry import Registry


def spans_nodes(registry: Registry, suite: str) -> bool:
    """Whether ``suite`` is a command suite marked ``spans_nodes: true``."""
    command = registry.get(suite).command
    return command is not None and command.spans_nodes


def across_allocation(spec: dict[str, Any], group: SlurmGroup) -> dict[str, Any]:
    """``spec`` with every case's ``argv`` run across the group's nodes (one task per node). Raises ValueError
    for a case without an argv (not a command suite's spec)."""
    out = copy.deepcopy(spec)
    launcher = multinode_launcher(group.options.nodes, 1)
    for case in out.get("cases") or []:
        argv = case.get("argv")
        if not isinstance(argv, list) or not argv:
            raise ValueError("a case that spans nodes needs a command (argv)")
        case["argv"] = [*launcher, *argv]
    return out
