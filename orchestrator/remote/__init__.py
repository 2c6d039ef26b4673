"""Self-contained stdlib scripts that orch runs on hosts as ``PYTHON -c SOURCE ARGS`` (one round trip each)."""

from __future__ import annotations

from importlib import resources


def source(name: str) -> str:
    """The text of ``orchestrator/remote/<name>.py``."""
    return resources.files(__package__).joinpath(f"{name}.py").read_text(encoding="utf-8")
