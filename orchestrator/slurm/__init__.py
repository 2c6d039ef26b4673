"""Running suites through Slurm: a Slurm inventory group is one ``sbatch`` job whose script ``srun``s one agent per
allocated node; orch follows the nodes' spools from the login node and ingests them as for SSH hosts.

- ``config.py``: the inventory's ``slurm:`` block and a resolved :class:`~orchestrator.slurm.config.SlurmGroup` — pure.
- ``jobs.py``: ``sbatch``/``srun`` argv and the batch script (argv lists, ``shlex.join``), and the parsers of
  ``sbatch --parsable``, ``squeue --json``, ``sacct --json`` and ``sinfo --json`` (Slurm 22.05 field names, recorded
  in ``tests/fixtures/slurm/``), with the job-state → host/run status mapping — pure.
- ``service.py``: submit, follow, cancel, resume (I/O through the login node's transport).
- ``doctor.py``: ``orch doctor`` for a Slurm group: the login node, ``sinfo`` node states, ``--probe-nodes``.
"""
