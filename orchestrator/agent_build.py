"""Pack ``agents/orch_agent`` into ``agent.pyz``, byte-for-byte reproducibly; its sha256 is the agent version.

Reproducible means: the same sources give the same bytes on any machine with the same zlib — entries sorted,
every timestamp 1980-01-01 00:00:00 (the zip epoch), mode 0644 files, no ``__pycache__``/``*.pyc``, only
``*.py`` sources, ZIP_DEFLATED at level 9, the shebang ``#!/usr/bin/env python3`` in front. The archive holds
the ``orch_agent`` package plus a root ``__main__.py``, so ``python3 agent.pyz facts`` works under any Python
>= 3.8 on the host.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import zipfile
from pathlib import Path

SHEBANG = b"#!/usr/bin/env python3\n"
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)
COMPRESS_LEVEL = 9
PYZ_NAME = "agent.pyz"
_ROOT_MAIN = (
    b'"""orch agent zipapp entry point."""\n'
    b"import sys\n\nfrom orch_agent.cli import main\n\nsys.exit(main())\n"
)


def agent_source_dir() -> Path:
    """The ``orch_agent`` package directory: from the installed ``agents`` package, else next to this one."""
    try:
        spec = importlib.util.find_spec("agents.orch_agent")
    except ImportError:
        spec = None
    if spec is not None and spec.submodule_search_locations:
        for loc in spec.submodule_search_locations:
            if (Path(loc) / "cli.py").is_file():
                return Path(loc)
    fallback = Path(__file__).resolve().parent.parent / "agents" / "orch_agent"
    if (fallback / "cli.py").is_file():
        return fallback
    raise FileNotFoundError("cannot find the agent sources (agents/orch_agent); is orch fully installed?")


def _sources(src: Path) -> list[tuple[str, bytes]]:
    entries: list[tuple[str, bytes]] = []
    for dirpath, dirnames, filenames in os.walk(src):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for name in filenames:
            if not name.endswith(".py") or name.startswith("."):
                continue
            path = Path(dirpath) / name
            arc = "orch_agent/" + path.relative_to(src).as_posix()
            entries.append((arc, path.read_bytes()))
    entries.append(("__main__.py", _ROOT_MAIN))
    return sorted(entries)


def agent_pyz_bytes(src: Path | None = None) -> bytes:
    """The agent.pyz content built from ``src`` (default: ``agent_source_dir()``)."""
    buf = io.BytesIO()
    buf.write(SHEBANG)
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arc, data in _sources(src or agent_source_dir()):
            info = zipfile.ZipInfo(arc, date_time=ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # unix, so external_attr carries the mode
            info.external_attr = (0o100644 & 0xFFFF) << 16
            zf.writestr(info, data, compresslevel=COMPRESS_LEVEL)
    return buf.getvalue()


def agent_source_sha256(src: Path | None = None) -> str:
    """sha256 (hex) of the agent.pyz the current sources build: the version a deployed agent must report."""
    return hashlib.sha256(agent_pyz_bytes(src)).hexdigest()


def agent_tree_sha256(src: Path | None = None) -> str:
    """sha256 (hex) of the agent's files as the host unpacks them next to agent.pyz (``deploy_helper.tree_sha256``
    of the archive's entries): what the host checks its unpacked tree against before running it."""
    from orchestrator.remote.deploy_helper import tree_sha256

    return tree_sha256(_sources(src or agent_source_dir()))


def build_agent_pyz(out_dir: Path) -> tuple[Path, str]:
    """Write ``out_dir/agent.pyz`` (mode 0755, replaced atomically) and return ``(path, sha256 hex)``."""
    data = agent_pyz_bytes()
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / PYZ_NAME
    tmp = out_dir / f".{PYZ_NAME}.{os.getpid()}.tmp"
    tmp.write_bytes(data)
    tmp.chmod(0o755)
    os.replace(tmp, path)
    return path, hashlib.sha256(data).hexdigest()


def sysinfo_source() -> str:
    """Text of the agent's self-contained ``sysinfo.py``, run as ``python3 -c <text> --json`` by doctor."""
    return (agent_source_dir() / "sysinfo.py").read_text(encoding="utf-8")
