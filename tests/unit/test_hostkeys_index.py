"""``KnownHosts.for_name`` looks plain names up by name (issue 18: every host matched against every line was
N x lines per run); its answer must stay the one of matching every entry in file order
(``KnownHostEntry.matches``, the OpenSSH semantics the other hostkeys tests pin against ssh-keygen)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator import hostkeys as hk

SSH_KEYGEN = shutil.which("ssh-keygen") or "/usr/bin/ssh-keygen"
pytestmark = pytest.mark.skipif(not os.path.exists(SSH_KEYGEN), reason="needs OpenSSH's ssh-keygen")

HOST_FIELDS = [
    "n001",
    "N002,n003",  # several names, one upper-case
    "[n004]:2222",
    "n001",  # the same name on a second line (both are returned, in file order)
    "n0*",  # a wildcard covering most names
    "n00?,!n005",  # a negated name refuses the whole line for it
    "[n004]:2222,n006",
    "10.0.0.7,n007",
    "x" * hk._MAX_SUBPATTERN + ",n008",  # a sub-pattern this long makes the line match nothing
    "",
]
NAMES = ["n001", "N001", "n002", "n003", "[n004]:2222", "n004", "n005", "n006", "n007", "10.0.0.7", "n008",
         "n009", "m001", "", "n0", "n00"]  # fmt: skip


def test_for_name_is_every_matching_entry_in_file_order(tmp_path: Path) -> None:
    key = tmp_path / "key"
    subprocess.run([SSH_KEYGEN, "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=60)
    blob = " ".join(key.with_suffix(".pub").read_text().split()[:2])
    hashed = hk.hash_host("n009")
    lines = [f"{h} {blob}" for h in HOST_FIELDS if h] + [f"{hashed} {blob}", f"@cert-authority n010 {blob}"]
    kh_file = tmp_path / "known_hosts"
    kh_file.write_text("\n".join(lines) + "\n")
    kh = hk.load_known_hosts([kh_file])
    assert len(kh.entries) == len(lines) and not kh.warnings
    for name in [*NAMES, "n010"]:
        want = [e for e in kh.entries if e.matches(name)]
        assert kh.for_name(name) == want, name
    # spot checks that the comparison above is not vacuous
    assert [e.line for e in kh.for_name("n001")] == [1, 4, 5, 6]
    assert [e.line for e in kh.for_name("N002")] == [2, 5, 6]
    assert [e.line for e in kh.for_name("n005")] == [5]
    assert [e.line for e in kh.for_name("n008")] == [5, 6]
    assert [e.line for e in kh.for_name("n009")] == [5, 6, 10]
    assert [e.line for e in kh.for_name("10.0.0.7")] == [8]
