"""``python -m orch_agent ...`` (and the zipapp's entry point): see ``cli.py``."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
