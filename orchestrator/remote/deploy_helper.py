"""Runs ON the host (stdlib only, Python 3.8+): inspect, install and switch orch's content-addressed files.

Layout under ~/.orch:  agent/<sha>/agent.pyz   agent/<sha>/tree/ (the zipapp unpacked, with its bytecode)
                       builds/<sha>/ (+ .complete holding the sha)   builds/current -> <sha>

Usage: python3 -c SOURCE ensure --agent-sha SHA [--agent-tree TREE_SHA] [--build-sha SHA] [--keep N]
                                [--facts [--orch-home DIR]]
       python3 -c SOURCE install-build --build-sha SHA [--tarball NAME] [--keep N]
Prints one JSON object; exit 0, or 1 with {"error": ..., "hint": ...}.

Homes are often shared over NFS by several hosts, and several ``orch deploy`` may run at once: every temporary
name here is unique (``tempfile``), a build is unpacked into its own temporary directory and renamed into place,
and a build that another deploy finished first is kept, never removed.

Build archives are extracted with the standard library's ``tarfile`` ``data`` filter (PEP 706), after a check of
the whole member list (:func:`check_members`) that needs no filesystem: no member may be written outside the build
or through a link. One deliberate difference from the ``data`` filter: a symlink may point at an absolute path,
because a Python venv's ``bin/python3`` links to the host's system interpreter; nothing is ever written through
a link, so such a link cannot place a file outside the build.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import posixpath
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tarfile
    from collections.abc import Iterable

# shutil, tarfile, tempfile, zipfile and compileall are imported where a build is pruned or installed or the agent
# unpacked: the everyday call (``ensure`` with the facts, once per host per run) needs none of them, and tarfile
# alone is ~15-70 ms of each start.

TREE_DIR = "tree"
REPACK_HINT = "repack the build (orch deploy --build DIR packs a directory safely) without that member"


class Refused(Exception):
    """A build archive that cannot be installed safely: ``member`` names the entry, ``hint`` the fix."""

    def __init__(self, message, hint, member=None):
        super().__init__(message)
        self.message, self.hint, self.member = message, hint, member


def home():
    return os.path.join(os.path.expanduser("~"), ".orch")


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def agent_state(sha):
    path = os.path.join(home(), "agent", sha, "agent.pyz")
    if not os.path.isfile(path):
        return "missing", path
    return ("present" if sha256_file(path) == sha else "corrupt"), path


def tree_sha256(files: Iterable[tuple[str, bytes]]) -> str:
    """Digest of an agent tree: ``files`` is ``(posix relative path, bytes)`` pairs. sha256 over the sorted lines
    ``path NUL sha256(bytes) LF``. orch computes it from the sources it packs into agent.pyz; the host from the
    unpacked directory (``__pycache__`` left out: the bytecode is checked against its source by Python itself,
    the ``.pyc`` files being checked-hash ones, PEP 552)."""
    h = hashlib.sha256()
    for rel, data in sorted(files):
        h.update(rel.encode("utf-8") + b"\0" + hashlib.sha256(data).hexdigest().encode("ascii") + b"\n")
    return h.hexdigest()


def _tree_files(root):
    """``(relative path, bytes)`` of every file under ``root`` outside ``__pycache__``; None when the tree holds
    anything else than directories and regular files (a link, a FIFO: never a tree this helper made)."""
    out = []
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        for entry in os.scandir(os.path.join(root, rel_dir) if rel_dir else root):
            rel = rel_dir + "/" + entry.name if rel_dir else entry.name
            if entry.is_symlink():
                return None
            if entry.is_dir():
                if entry.name != "__pycache__":
                    stack.append(rel)
            elif entry.is_file():
                with open(entry.path, "rb") as f:
                    out.append((rel, f.read()))
            else:
                return None
    return out


def tree_state(root, tree_sha):
    """``present`` when ``root`` holds exactly the files whose digest is ``tree_sha``, ``missing``, or
    ``changed`` (a partial unpack, an edited, added or removed file)."""
    if not os.path.lexists(root):
        return "missing"
    if os.path.islink(root) or not os.path.isdir(root):
        return "changed"
    try:
        files = _tree_files(root)
    except OSError:
        return "changed"
    return "present" if files is not None and tree_sha256(files) == tree_sha else "changed"


def ensure_tree(pyz, tree_sha):
    """The agent unpacked next to its verified zipapp, in ``<sha>/tree``, run as ``python3 <sha>/tree``: Python
    compiles a zipapp's modules at every start (zipimport keeps no bytecode), a directory's once.

    Returns ``(state, path to run, note)``: ``present`` (verified as it is), ``unpacked`` (made now, or made again
    because it had changed), or ``unavailable`` with the zipapp's path and why (a home that cannot be written,
    a tree another user made that differs): the zipapp still runs, only slower. Never returns a tree that does
    not verify. The unpack goes to a temporary directory (unique: hosts may share this home), its bytecode is
    written there as checked-hash ``.pyc`` for this interpreter (``py_compile``, whatever PYTHONDONTWRITEBYTECODE
    says), it is verified, then renamed into place; a changed tree is moved aside and removed first."""
    root = os.path.join(os.path.dirname(pyz), TREE_DIR)
    state = tree_state(root, tree_sha)
    if state == "present":
        return "present", root, None
    import shutil
    import tempfile

    tmp = None
    try:
        tmp = tempfile.mkdtemp(prefix=".tree.", suffix=".tmp", dir=os.path.dirname(pyz))
        umask = os.umask(0o022)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp's 0700 would hide the tree from users sharing this home
        _unpack(pyz, tmp, root)
        files = _tree_files(tmp)
        if files is None or tree_sha256(files) != tree_sha:
            return "unavailable", pyz, "the zipapp does not unpack to the tree orch expects (a different orch?)"
        if state == "changed":
            stale = tempfile.mkdtemp(prefix=".tree.", suffix=".stale", dir=os.path.dirname(pyz))
            try:
                os.rename(root, os.path.join(stale, "old"))
            except OSError:
                pass  # another deploy moved it first; the rename below decides
            shutil.rmtree(stale, ignore_errors=True)
        try:
            os.rename(tmp, root)
            tmp = None
        except OSError:
            pass  # a concurrent deploy (a host sharing this home) put its tree there first: verified below
        if tree_state(root, tree_sha) == "present":
            return "unpacked", root, None
        return "unavailable", pyz, f"{root} differs from the agent and cannot be replaced"
    except OSError as exc:
        return "unavailable", pyz, f"cannot unpack the agent next to {pyz}: {exc.strerror or exc}"
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _unpack(pyz, dest, final):
    """Extract the zipapp's ``.py`` members into ``dest`` (modes as the umask says, like any file the user
    makes), then compile them (tracebacks naming the files under ``final``, where ``dest`` is renamed to)."""
    import compileall
    import py_compile
    import zipfile

    with zipfile.ZipFile(pyz) as zf:
        for info in zf.infolist():
            name = info.filename
            parts = name.split("/")
            if info.is_dir() or not name.endswith(".py"):
                continue
            if name.startswith("/") or any(p in ("", ".", "..") for p in parts):
                raise OSError(f"unexpected member {name!r} in {pyz}")
            target = os.path.join(dest, *parts)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as f:
                f.write(zf.read(info))
    compileall.compile_dir(
        dest, ddir=final, quiet=2, workers=1, invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH
    )


def build_state(sha):
    d = os.path.join(home(), "builds", sha)
    marker = os.path.join(d, ".complete")
    if os.path.isfile(marker) and not os.path.islink(d):
        with open(marker) as f:
            if f.read().strip() == sha:
                return "present"
    return "missing"


def current_build():
    link = os.path.join(home(), "builds", "current")
    return os.path.basename(os.readlink(link)) if os.path.islink(link) else None


def switch_current(sha):
    """Point builds/current at <sha> atomically (a new symlink, uniquely named, renamed over the old one)."""
    builds = os.path.join(home(), "builds")
    tmp = os.path.join(builds, ".current." + os.urandom(8).hex())  # os.symlink refuses an existing name
    os.symlink(sha, tmp)
    os.replace(tmp, os.path.join(builds, "current"))


def prune(keep, protect):
    builds = os.path.join(home(), "builds")
    if not os.path.isdir(builds):
        return []
    entries = []
    for name in os.listdir(builds):
        p = os.path.join(builds, name)
        if len(name) == 64 and os.path.isdir(p) and not os.path.islink(p):
            entries.append((os.path.getmtime(p), name))
    entries.sort(reverse=True)
    removed = []
    for _, name in entries[keep:]:
        if name in protect:
            continue
        import shutil

        shutil.rmtree(os.path.join(builds, name), ignore_errors=True)
        removed.append(name)
    return removed


def cmd_ensure(args):
    agent, agent_path = agent_state(args.agent_sha)
    out = {"home": os.path.expanduser("~"), "agent": agent, "agent_path": agent_path, "python": sys.executable}
    run_path = agent_path
    if agent == "present" and args.agent_tree:
        out["agent_tree"], run_path, note = ensure_tree(agent_path, args.agent_tree)
        if note:
            out["agent_tree_note"] = note
    out["agent_run"] = run_path
    if args.build_sha:
        out["build"] = build_state(args.build_sha)
        if out["build"] == "present":
            out["switched"] = current_build() != args.build_sha
            if out["switched"]:
                switch_current(args.build_sha)
            out["pruned"] = prune(args.keep, {args.build_sha})
    out["current_build"] = current_build()
    if args.facts and agent == "present":
        out["facts"] = agent_facts(run_path, args.orch_home)
    return out


def agent_facts(agent_path, orch_home):
    """The host facts as the agent's own ``facts`` command gives them (its ``sysinfo.collect``, torch probe from
    the host's cache), read from the agent just verified (its tree, else its zipapp): one round trip for the
    runner's deploy check and facts instead of two."""
    sys.path.insert(0, agent_path)
    try:
        from orch_agent import sysinfo  # type: ignore[import-not-found]  # inside the agent zipapp
    finally:
        sys.path.remove(agent_path)
    return sysinfo.collect(orch_home, torch_cache=True)


def _normalized(name):
    """The member's path inside the build ('' for the build's own root), or Refused for an absolute/'..' path."""
    if name.startswith("/"):
        raise Refused(f"member {name!r} has an absolute path", REPACK_HINT, name)
    norm = posixpath.normpath(name)
    if norm == ".." or norm.startswith("../"):
        raise Refused(f"member {name!r} points outside the build ('..')", REPACK_HINT, name)
    return "" if norm == "." else norm


def check_members(members: list[tarfile.TarInfo]) -> int:
    """Refuse an archive that could write outside the build — pure, from the member list alone.

    ``members``: ``tarfile.TarInfo`` objects in archive order. Rules, each raising :class:`Refused` naming the
    member: paths are relative without ``..`` escapes; only regular files, directories, symlinks and hard links
    (no devices or FIFOs); no member lies under a symlink or hard link of the archive (that would write through
    it, as a chain of links does); a link never replaces an earlier member and is never replaced; a relative
    symlink stays inside the build (an absolute one is allowed: see the module docstring); a hard link names an
    earlier regular file of the archive.
    """
    seen: dict[str, str] = {}  # normalized name -> "file" | "dir" | "link"
    for m in members:
        norm = _normalized(m.name)
        if not (m.isfile() or m.isdir() or m.issym() or m.islnk()):
            raise Refused(f"member {m.name!r} is a device or FIFO, which a build may not contain", REPACK_HINT, m.name)
        parts = norm.split("/") if norm else []
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if seen.get(parent) == "link":
                raise Refused(
                    f"member {m.name!r} would be written through the link {parent!r} (a chain of links can "
                    "place files outside the build)",
                    REPACK_HINT,
                    m.name,
                )
            if seen.get(parent) == "file":
                raise Refused(f"member {m.name!r} lies under the file {parent!r}", REPACK_HINT, m.name)
        earlier = seen.get(norm)
        if earlier == "link" or (earlier is not None and (m.issym() or m.islnk())):
            raise Refused(
                f"member {m.name!r} appears twice in the archive and one of them is a link", REPACK_HINT, m.name
            )
        if m.issym():
            if not norm:
                raise Refused(f"member {m.name!r} makes the build's root a link", REPACK_HINT, m.name)
            if not m.linkname.startswith("/"):
                target = posixpath.normpath(posixpath.join(posixpath.dirname(norm), m.linkname))
                if target == ".." or target.startswith("../"):
                    raise Refused(
                        f"symlink {m.name!r} -> {m.linkname!r} leads outside the build",
                        "make the link absolute if it should name a file on the host (as a venv's bin/python3 "
                        "does), or keep its target inside the build",
                        m.name,
                    )
            seen[norm] = "link"
        elif m.islnk():
            target = _normalized(m.linkname)
            if seen.get(target) != "file":
                raise Refused(
                    f"hard link {m.name!r} -> {m.linkname!r} does not name an earlier regular file of the archive",
                    REPACK_HINT,
                    m.name,
                )
            seen[norm] = "link"
        else:
            seen[norm] = "dir" if m.isdir() else "file"
    return len(seen)


def _extract_filter(member, dest):
    """tarfile's ``data`` filter, except that a symlink may name an absolute path (checked by check_members)."""
    import tarfile

    if member.issym() and member.linkname.startswith("/"):
        checked = tarfile.data_filter(member.replace(linkname=".", deep=False), dest)
        return checked.replace(linkname=member.linkname, deep=False) if checked is not None else None
    return tarfile.data_filter(member, dest)


def extract_build(tarball, dest):
    """Check every member, then extract ``tarball`` (gzip) into the existing empty directory ``dest``."""
    import tarfile

    if not hasattr(tarfile, "data_filter"):
        raise Refused(
            f"Python {sys.version.split()[0]} on this host has no tarfile extraction filters (PEP 706)",
            "point `python:` in the inventory at Python 3.12+, 3.11.4+, 3.10.12+, 3.9.17+ or 3.8.17+",
        )
    with tarfile.open(tarball, "r:gz") as tf:
        tf.errorlevel = 2
        check_members(tf.getmembers())
        try:
            tf.extractall(dest, filter=_extract_filter)
        except tarfile.FilterError as exc:
            member = getattr(exc, "tarinfo", None)
            raise Refused(f"unsafe member in build archive: {exc}", REPACK_HINT, getattr(member, "name", None)) from exc


def cmd_install_build(args):
    import shutil
    import tempfile

    sha = args.build_sha
    builds = os.path.join(home(), "builds")
    name = args.tarball or sha + ".tar.gz"
    if "/" in name or name in (".", ".."):
        raise Refused(f"--tarball {name!r} is not a file name in {builds}", "pass the uploaded file's name only")
    tarball = os.path.join(builds, name)
    tmp = None
    try:
        if not os.path.isfile(tarball):
            raise RuntimeError(f"uploaded tarball {tarball} is missing")
        got = sha256_file(tarball)
        if got != sha:
            raise Refused(
                f"uploaded build is corrupt: sha256 {got}, expected {sha}", "the upload was damaged; deploy again"
            )
        if build_state(sha) == "present":  # another deploy (a host sharing this home) finished it first
            result = "present"
        else:
            tmp = tempfile.mkdtemp(prefix="." + sha[:16] + ".", suffix=".tmp", dir=builds)
            os.chmod(tmp, 0o755)
            extract_build(tarball, tmp)
            with open(os.path.join(tmp, ".complete"), "w") as f:
                f.write(sha + "\n")
            result = _move_into_place(tmp, os.path.join(builds, sha), sha)
            if result == "installed":
                tmp = None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if os.path.lexists(tarball):
            os.unlink(tarball)
    switch_current(sha)
    return {"build": result, "current_build": current_build(), "pruned": prune(args.keep, {sha})}


def _move_into_place(tmp, final, sha):
    """Rename the unpacked build to builds/<sha>; 'present' when a concurrent deploy got there first."""
    import shutil
    import tempfile

    if os.path.lexists(final) and build_state(sha) != "present":  # a leftover without .complete
        stale = tempfile.mkdtemp(prefix="." + sha[:16] + ".", suffix=".stale", dir=os.path.dirname(final))
        try:
            os.rename(final, os.path.join(stale, "old"))
        except OSError:
            pass  # someone else moved it; the rename below decides
        shutil.rmtree(stale, ignore_errors=True)
    try:
        os.rename(tmp, final)
    except OSError:
        if build_state(sha) == "present":
            return "present"
        raise
    return "installed"


def main(argv):
    p = argparse.ArgumentParser(prog="orch-deploy-helper")
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("ensure")
    e.add_argument("--agent-sha", required=True)
    e.add_argument("--agent-tree", help="sha256 of the agent's unpacked tree (tree_sha256): unpack it and run it")
    e.add_argument("--build-sha")
    e.add_argument("--keep", type=int, default=3)
    e.add_argument("--facts", action="store_true", help="also the agent's host facts, when the agent is present")
    e.add_argument("--orch-home", default=None, help="the orch home the facts describe (default ~/.orch)")
    i = sub.add_parser("install-build")
    i.add_argument("--build-sha", required=True)
    i.add_argument("--tarball")
    i.add_argument("--keep", type=int, default=3)
    args = p.parse_args(argv)
    try:
        out = cmd_ensure(args) if args.cmd == "ensure" else cmd_install_build(args)
    except Refused as exc:
        print(json.dumps({"error": exc.message, "hint": exc.hint, "member": exc.member}))
        return 1
    except Exception as exc:  # reported as JSON to orch, which names the host
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
