"""Runs ON the host (stdlib only, Python 3.8+): inspect, install and switch orch's content-addressed files.

Layout under ~/.orch:  agent/<sha>/agent.pyz   builds/<sha>/ (+ .complete holding the sha)   builds/current -> <sha>

Usage: python3 -c SOURCE ensure --agent-sha SHA [--build-sha SHA] [--keep N]
       python3 -c SOURCE install-build --build-sha SHA [--keep N]
Prints one JSON object; exit 0, or 1 with {"error": ...}.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tarfile


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


def build_state(sha):
    d = os.path.join(home(), "builds", sha)
    marker = os.path.join(d, ".complete")
    if os.path.isfile(marker):
        with open(marker) as f:
            if f.read().strip() == sha:
                return "present"
    return "missing"


def current_build():
    link = os.path.join(home(), "builds", "current")
    return os.path.basename(os.readlink(link)) if os.path.islink(link) else None


def switch_current(sha):
    """Point builds/current at <sha> atomically (a new symlink renamed over the old one)."""
    builds = os.path.join(home(), "builds")
    tmp = os.path.join(builds, f".current.{os.getpid()}")
    if os.path.lexists(tmp):
        os.unlink(tmp)
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
        shutil.rmtree(os.path.join(builds, name), ignore_errors=True)
        removed.append(name)
    return removed


def cmd_ensure(args):
    agent, agent_path = agent_state(args.agent_sha)
    out = {"home": os.path.expanduser("~"), "agent": agent, "agent_path": agent_path, "python": sys.executable}
    if args.build_sha:
        out["build"] = build_state(args.build_sha)
        if out["build"] == "present":
            out["switched"] = current_build() != args.build_sha
            if out["switched"]:
                switch_current(args.build_sha)
            out["pruned"] = prune(args.keep, {args.build_sha})
    out["current_build"] = current_build()
    return out


def cmd_install_build(args):
    sha = args.build_sha
    builds = os.path.join(home(), "builds")
    tarball = os.path.join(builds, sha + ".tar.gz")
    if not os.path.isfile(tarball):
        raise RuntimeError(f"uploaded tarball {tarball} is missing")
    got = sha256_file(tarball)
    if got != sha:
        os.unlink(tarball)
        raise RuntimeError(f"uploaded build is corrupt: sha256 {got}, expected {sha}")
    tmp = os.path.join(builds, sha + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    with tarfile.open(tarball, "r:gz") as tf:
        for m in tf.getmembers():
            target = os.path.realpath(os.path.join(tmp, m.name))
            if not (target == os.path.realpath(tmp) or target.startswith(os.path.realpath(tmp) + os.sep)):
                raise RuntimeError(f"unsafe path in build archive: {m.name}")
            if m.issym() or m.islnk():
                link = os.path.realpath(os.path.join(os.path.dirname(target), m.linkname))
                if not link.startswith(os.path.realpath(tmp) + os.sep):
                    raise RuntimeError(f"unsafe link in build archive: {m.name} -> {m.linkname}")
        tf.extractall(tmp)  # noqa: S202 - members checked above
    with open(os.path.join(tmp, ".complete"), "w") as f:
        f.write(sha + "\n")
    final = os.path.join(builds, sha)
    shutil.rmtree(final, ignore_errors=True)
    os.rename(tmp, final)
    os.unlink(tarball)
    switch_current(sha)
    return {"build": "installed", "current_build": current_build(), "pruned": prune(args.keep, {sha})}


def main(argv):
    p = argparse.ArgumentParser(prog="orch-deploy-helper")
    sub = p.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("ensure")
    e.add_argument("--agent-sha", required=True)
    e.add_argument("--build-sha")
    e.add_argument("--keep", type=int, default=3)
    i = sub.add_parser("install-build")
    i.add_argument("--build-sha", required=True)
    i.add_argument("--keep", type=int, default=3)
    args = p.parse_args(argv)
    try:
        out = cmd_ensure(args) if args.cmd == "ensure" else cmd_install_build(args)
    except Exception as exc:  # reported as JSON to orch, which names the host
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
