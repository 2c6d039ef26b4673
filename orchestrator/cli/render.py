"""All rich output of the CLI: consoles, the error line, and tables built from service return values."""

from __future__ import annotations

import json
import sys
from functools import cache
from typing import Any

from rich.console import Console

from orchestrator.errors import OrchError


@cache
def console() -> Console:
    return Console(highlight=False)


@cache
def err_console() -> Console:
    return Console(stderr=True, highlight=False)


def error(exc: OrchError) -> None:
    """Print an expected failure as a red line plus its hint (stderr)."""
    c = err_console()
    c.print(f"[bold red]error:[/bold red] {exc.message}", markup=True, soft_wrap=True)
    if exc.hint:
        c.print(f"[yellow]hint:[/yellow] {exc.hint}", soft_wrap=True)


def print_json(doc: Any) -> None:
    """``--json``: one JSON document on stdout and nothing else there."""
    sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    sys.stdout.flush()
