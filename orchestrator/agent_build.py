"""Pack ``agents/orch_agent`` into ``agent.pyz``, byte-for-byte reproducibly; its sha256 is the agent version.

Reproducible means: the same sources give the same bytes on any machine with the same zlib — entries sorted,
every timestamp 1980-01-01 00:00:00 (the zip epoch), mode 0644 files, no ``__pycache__``/``*.pyc``, only
``*.py`` sources, ZIP_DEFLATED at level 9, the shebang ``#!/usr/bin/env python3`` in front. The archive holds
the ``orch_agent`` package plus a root ``__main__.py``, so ``python3 agent.pyz facts`` works under any Python
>= 3.8 on the host.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import os
import sys
import zipfile
import zlib
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
    """The agent.pyz content built from ``src`` (default: ``agent_source_dir()``).

    Packing deflates every source at level 9 (~12 ms CPU, twice in each ``orch run``: the artifact and the version
    recorded with the run), so the bytes are reused when nothing that decides them changed: the digest of the
    sources (names and bytes), this module's own text (the packing code), zlib's and Python's versions keys
    ``$XDG_CACHE_HOME/orch/agent/sources/<key>``, which names the sha256 of the archive last built from them; the
    archive is taken from ``deploy.agent_artifact``'s cache (``.../agent/<sha256>/agent.pyz``) only when its bytes
    hash to that sha256, and is packed again otherwise. The cache is an optimisation: one that cannot be read or
    written is packed around, silently."""
    entries = _sources(src or agent_source_dir())
    key = _pack_key(entries)
    if key in _PACKED:
        return _PACKED[key]
    data = _cached_pyz(key)
    if data is None:
        data = _pack(entries)
        _remember_pyz(key, hashlib.sha256(data).hexdigest())
    _PACKED[key] = data
    return data


_PACKED: dict[str, bytes] = {}


def agent_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/orch/agent`` (default ``~/.cache/orch/agent``): built agents, one directory per sha256."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "orch" / "agent"


def _pack_key(entries: list[tuple[str, bytes]]) -> str:
    h = hashlib.sha256()
    for part in (Path(__file__).read_bytes(), zlib.ZLIB_RUNTIME_VERSION.encode(), sys.version.encode()):
        h.update(len(part).to_bytes(8, "big") + part)
    for arc, data in entries:
        name = arc.encode()
        h.update(len(name).to_bytes(8, "big") + name + len(data).to_bytes(8, "big") + data)
    return h.hexdigest()


def _cached_pyz(key: str) -> bytes | None:
    try:
        sha = (agent_cache_dir() / "sources" / key).read_text(encoding="ascii").strip()
        if len(sha) != 64 or not all(c in "0123456789abcdef" for c in sha):
            return None
        data = (agent_cache_dir() / sha / PYZ_NAME).read_bytes()
    except (OSError, ValueError):
        return None
    return data if hashlib.sha256(data).hexdigest() == sha else None


def _remember_pyz(key: str, sha: str) -> None:
    index = agent_cache_dir() / "sources"
    tmp = index / f".{key}.{os.getpid()}.tmp"
    try:
        index.mkdir(parents=True, exist_ok=True)
        tmp.write_text(sha + "\n", encoding="ascii")
        os.replace(tmp, index / key)
    except OSError:
        with contextlib.suppress(OSError):  # e.g. a cache path through a file: NotADirectoryError here too
            tmp.unlink(missing_ok=True)


def _pack(entries: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    buf.write(SHEBANG)
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for arc, data in entries:
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
