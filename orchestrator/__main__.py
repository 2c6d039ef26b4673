"""``python -m orchestrator`` = ``orch``."""

from orchestrator.cli.main import main

main()
