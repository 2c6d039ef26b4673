"""orch's host agent: stdlib only, packed into one reproducible zipapp (``agent.pyz``).

Subcommands (``cli.py``): ``facts``, ``start``, ``follow``, ``cancel``, ``status``, ``version``
and the internal ``_worker``. The worker runs a spec's cases and appends protocol-v1 events (see
``orchestrator/protocol.py``) to ``<orch_home>/runs/<run_id>/<host>/events.jsonl``. Benches (``benches/``) import
torch lazily, so the agent itself starts under any Python >= 3.8 (no 3.9+ syntax or runtime ``X | Y`` types).
"""

PROTOCOL_VERSION = 1
