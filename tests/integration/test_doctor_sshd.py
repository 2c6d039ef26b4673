"""``orch doctor`` against real OpenSSH sshd peers (and pathological listeners): every verdict and failure kind.

Each host is a real Debian ``sshd`` on its own 127.0.0.X (tests/plugins/sshd.py); the client is real asyncssh
through orchestrator.transport.ssh. Expected verdicts are those OpenSSH 9.2's ``ssh`` gives for the same
known_hosts (see orchestrator/hostkeys.py); certificates are made with ``ssh-keygen -s``.
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.doctor import CHECK_NAMES, DISK_WARN_BYTES
from tests.integration import peers
from tests.integration.peers import EXPIRING_TIMEOUT_S, TIMEOUT_S, doctor_one, entry, statuses
from tests.plugins.sshd import SSH_KEYGEN, ClientHome, SshdBed, free_port, keygen
from tests.plugins.timing import scaled

REPLACE_HINT = "--replace (removes the old entries as ssh-keygen -R does, keeping known_hosts.old)"

pytestmark = pytest.mark.sshd

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
CONNECT_STEPS = ("dns", "tcp", "banner", "hostkey", "auth")
REMOTE_CHECKS = ("python", "gpus", "disk", "agent")


def _no_gpu_python(tmp_path: Path) -> str:
    """The venv Python with an empty PATH: no nvidia-smi on this "host", even on a GPU machine."""
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    return peers.python_wrapper(tmp_path / "py-nogpu", path_dirs=[empty])


# ------------------------------------------------------------------------------------------ host keys


async def test_ed25519_match_and_full_pass(sshd_bed: SshdBed, client_home: ClientHome, tmp_path: Path) -> None:
    h = sshd_bed.add("kh-match")
    r = await doctor_one("kh-match", entry(h), python=_no_gpu_python(tmp_path))
    hk = r.check("hostkey")
    assert hk.status == "ok", hk.detail
    assert hk.data["verdict"] == "match"
    assert hk.data["offered_fingerprint"] == peers.fingerprint(h.host_keys["ed25519"].with_suffix(".pub"))
    assert [(k["file"], k["line"], k["marker"]) for k in hk.data["known"]] == [(str(client_home.known_hosts), 1, None)]
    free = shutil.disk_usage(h.home).free  # the remote HOME's filesystem: ok from 20 GB free, warn from 1 GB
    assert statuses(r) == {
        "dns": "ok",
        "tcp": "ok",
        "banner": "ok",
        "hostkey": "ok",
        "auth": "ok",
        "python": "ok",
        "gpus": "warn",
        "disk": "ok" if free >= DISK_WARN_BYTES else "warn",
        "agent": "ok",
    }
    assert r.ok
    assert r.check("gpus").detail == "no GPU: nvidia-smi not found on the host"
    py = r.check("python")
    assert py.data["torch"] == importlib.metadata.version("torch")
    assert py.detail.startswith(f"Python {platform.python_version()}, torch {py.data['torch']} (")
    assert r.check("agent").detail.startswith("no agent deployed yet")
    assert r.check("banner").detail.startswith("SSH-2.0-OpenSSH_")


async def test_several_key_types_only_ecdsa_known_matches(sshd_bed: SshdBed, client_home: ClientHome) -> None:
    # The server has ed25519 and ecdsa keys; only ecdsa is on file. OpenSSH puts the known type first in
    # its host key algorithm list, so the server offers ecdsa and the host matches.
    h = sshd_bed.add("kh-ecdsa", key_types=("ed25519", "ecdsa"), trusted=False)
    client_home.trust(h.known_hosts_line("ecdsa"))
    r = await doctor_one("kh-ecdsa", entry(h))
    hk = r.check("hostkey")
    assert (hk.status, hk.data["verdict"]) == ("ok", "match"), hk.detail
    assert hk.data["offered_type"] == "ecdsa-sha2-nistp256"
    assert hk.data["offered_fingerprint"] == peers.fingerprint(h.host_keys["ecdsa"].with_suffix(".pub"))
    assert r.check("auth").status == "ok"


async def test_hashed_known_hosts_entry_matches(sshd_bed: SshdBed, client_home: ClientHome) -> None:
    h = sshd_bed.add("kh-hashed")
    subprocess.run([SSH_KEYGEN, "-q", "-H", "-f", str(client_home.known_hosts)], check=True, capture_output=True)
    text = client_home.known_hosts.read_text()
    assert text.startswith("|1|") and h.address not in text
    r = await doctor_one("kh-hashed", entry(h))
    hk = r.check("hostkey")
    assert (hk.status, hk.data["verdict"]) == ("ok", "match"), hk.detail
    assert hk.data["known"][0]["line"] == 1


async def test_non_22_port_entry_is_bracketed(sshd_bed: SshdBed, client_home: ClientHome) -> None:
    h = sshd_bed.add("kh-port")
    assert h.port != 22
    line = client_home.known_hosts.read_text().strip()
    assert line.startswith(f"[{h.address}]:{h.port} ssh-ed25519 ")
    r = await doctor_one("kh-port", entry(h))
    hk = r.check("hostkey")
    assert (hk.status, hk.data["verdict"]) == ("ok", "match"), hk.detail
    assert hk.data["lookup_name"] == f"[{h.address}]:{h.port}"
    assert (r.address, r.port) == (h.address, h.port)


async def test_only_portless_entry_for_other_port_key_is_unknown(sshd_bed: SshdBed, client_home: ClientHome) -> None:
    # A different key under the port-less name does not make [addr]:port "changed" (OpenSSH's quiet retry).
    h = sshd_bed.add("kh-portless", trusted=False)
    other = keygen(client_home.home / "other_key")
    typ, blob = other.with_suffix(".pub").read_text().split()[:2]
    client_home.trust(f"{h.address} {typ} {blob}")
    r = await doctor_one("kh-portless", entry(h))
    assert (r.check("hostkey").status, r.check("hostkey").data["verdict"]) == ("fail", "unknown")


async def test_reinstalled_host_is_changed_with_exact_keygen_hint(sshd_bed: SshdBed, client_home: ClientHome) -> None:
    h = sshd_bed.add("kh-reinstall")
    h.reinstall()
    r = await doctor_one("kh-reinstall", entry(h))
    hk = r.check("hostkey")
    assert (hk.status, hk.data["verdict"]) == ("fail", "changed"), hk.detail
    assert hk.data["offered_fingerprint"] == peers.fingerprint(h.host_keys["ed25519"].with_suffix(".pub"))
    assert hk.data["hint"].endswith(
        f"orch hosts trust kh-reinstall {REPLACE_HINT}"
    ) and "ssh-keygen -f" not in hk.data["hint"]  # the user's own known_hosts: --replace does what -R did
    assert [(k["file"], k["line"]) for k in hk.data["known"]] == [(str(client_home.known_hosts), 1)]
    assert statuses(r) == {
        "dns": "ok",
        "tcp": "ok",
        "banner": "ok",
        "hostkey": "fail",
        "auth": "skipped",
        "python": "skipped",
        "gpus": "skipped",
        "disk": "skipped",
        "agent": "skipped",
    }
    assert not r.ok
    # Nothing logged in: sshd saw no authentication attempt at all.
    log = (h.root / "sshd.log").read_text()
    assert "Accepted publickey" not in log and "Failed publickey" not in log


async def test_unknown_host_hints_orch_hosts_trust(sshd_bed: SshdBed) -> None:
    h = sshd_bed.add("kh-unknown", trusted=False)
    r = await doctor_one("kh-unknown", entry(h))
    hk = r.check("hostkey")
    assert (hk.status, hk.data["verdict"]) == ("fail", "unknown"), hk.detail
    assert "orch hosts trust kh-unknown" in hk.data["hint"]
    assert hk.data["known"] == []
    assert r.check("auth").status == "skipped"


async def test_revoked_key_is_revoked(sshd_bed: SshdBed, client_home: ClientHome) -> None:
    h = sshd_bed.add("kh-revoked")  # trusted AND revoked: @revoked wins
    client_home.trust("@revoked " + h.known_hosts_line())
    r = await doctor_one("kh-revoked", entry(h))
    hk = r.check("hostkey")
    assert (hk.status, hk.data["verdict"]) == ("fail", "revoked"), hk.detail
    assert r.check("auth").status == "skipped"


async def test_revoked_only_is_revoked(sshd_bed: SshdBed, client_home: ClientHome) -> None:
    h = sshd_bed.add("kh-revoked2", trusted=False)
    client_home.trust("@revoked " + h.known_hosts_line())
    r = await doctor_one("kh-revoked2", entry(h))
    hk = r.check("hostkey")
    assert (hk.status, hk.data["verdict"]) == ("fail", "revoked"), hk.detail


@pytest.mark.parametrize(
    ("case", "principal", "validity", "verdict", "problem"),
    [
        ("valid", None, "-5m:+1h", "cert-authority", None),
        ("wrong-principal", "somewhere-else.example", "-5m:+1h", "cert-invalid", "name is not a listed principal"),
        ("expired", None, "20200101:20200102", "cert-invalid", "expired"),
    ],
)
async def test_host_certificate(
    sshd_bed: SshdBed,
    client_home: ClientHome,
    tmp_path: Path,
    case: str,
    principal: str | None,
    validity: str,
    verdict: str,
    problem: str | None,
) -> None:
    # No plain key on file: only `@cert-authority [addr]:port CA` vouches for the host.
    h = sshd_bed.add(f"cert-{case}", trusted=False)
    ca = peers.make_ca(tmp_path)
    ca.sign_host(h, principal=principal or h.address, validity=validity)
    client_home.trust(f"@cert-authority [{h.address}]:{h.port} {ca.pub_line}")
    r = await doctor_one(f"cert-{case}", entry(h))
    hk = r.check("hostkey")
    assert hk.data["verdict"] == verdict, hk.detail
    assert hk.data["offered_type"] == "ssh-ed25519-cert-v01@openssh.com"
    assert hk.data["offered_fingerprint"] == peers.fingerprint(h.host_keys["ed25519"].with_suffix(".pub"))
    assert [(k["file"], k["line"], k["marker"]) for k in hk.data["known"]] == [
        (str(client_home.known_hosts), 1, "@cert-authority")
    ]
    if verdict == "cert-authority":
        assert hk.status == "ok"
        assert f"signed by the CA {peers.fingerprint(ca.key.with_suffix('.pub'))}" in hk.detail
        assert r.check("auth").status == "ok"
        assert r.ok, [(c.name, c.status, c.detail) for c in r.checks]
    else:
        assert hk.status == "fail"
        assert f"but it is invalid: {problem} " in hk.detail
        assert f"ssh-keygen -s CA_KEY -h -n {h.address} -V" in hk.data["hint"]
        assert r.check("auth").status == "skipped"
        assert "Failed publickey" not in (h.root / "sshd.log").read_text()


# ------------------------------------------------------------------------------------------ connect failures


async def test_closed_port_is_tcp_refused() -> None:
    port = free_port("127.0.0.1")  # bound and released: nothing listens there
    r = await doctor_one("closed", {"address": "127.0.0.1", "port": port})
    assert statuses(r)["dns"] == "ok"
    tcp = r.check("tcp")
    assert (tcp.status, tcp.data["kind"]) == ("fail", "refused"), tcp.detail
    assert all(r.check(n).status == "skipped" for n in ("banner", "hostkey", "auth", *REMOTE_CHECKS))


async def test_unresolvable_name_is_dns_failure() -> None:
    r = await doctor_one("nowhere", {"address": "no-such-host.invalid", "port": 22})
    dns = r.check("dns")
    assert dns.status == "fail", dns.detail
    assert "no-such-host.invalid" in dns.detail
    assert all(r.check(n).status == "skipped" for n in CHECK_NAMES[1:])


async def test_silent_listener_is_banner_timeout_within_deadline() -> None:
    async with peers.silent_listener() as (addr, port, _):
        t0 = time.monotonic()
        r = await doctor_one("silent", {"address": addr, "port": port}, timeout_s=EXPIRING_TIMEOUT_S)
        elapsed = time.monotonic() - t0
    b = r.check("banner")
    assert (b.status, b.data["kind"]) == ("fail", "banner-timeout"), b.detail
    assert r.check("tcp").status == "ok"
    assert r.check("hostkey").status == "skipped"
    assert elapsed < EXPIRING_TIMEOUT_S + scaled(30), elapsed  # gave up at its deadline: did not hang


async def test_http_on_the_ssh_port_is_not_ssh() -> None:
    async with peers.garbage_listener() as (addr, port, _):
        t0 = time.monotonic()
        r = await doctor_one("http", {"address": addr, "port": port}, timeout_s=EXPIRING_TIMEOUT_S)
        elapsed = time.monotonic() - t0
    b = r.check("banner")
    assert (b.status, b.data["kind"]) == ("fail", "not-ssh"), b.detail
    assert "HTTP/1.1 400 Bad Request" in b.detail
    assert elapsed < EXPIRING_TIMEOUT_S + scaled(30), elapsed  # did not hang


async def test_wrong_user_key_is_auth_denied(sshd_bed: SshdBed) -> None:
    h = sshd_bed.add("auth-denied", authorized=False)
    r = await doctor_one("auth-denied", entry(h))
    assert r.check("hostkey").data["verdict"] == "match"
    a = r.check("auth")
    assert (a.status, a.data["kind"]) == ("fail", "denied"), a.detail
    assert "authorized_keys" in a.data["hint"]
    assert all(r.check(n).status == "skipped" for n in REMOTE_CHECKS)


async def test_too_many_keys_offered_is_too_many_failures(sshd_bed: SshdBed, client_home: ClientHome) -> None:
    # sshd disconnects after MaxAuthTries failed keys; the client offers two wrong keys before the right one.
    h = sshd_bed.add("auth-many", extra_config=["Match all", "MaxAuthTries 1"])
    wrong = [keygen(client_home.ssh_dir / f"id_wrong{i}") for i in (1, 2)]
    client_home.add_config("Host auth-many\n" + "".join(f"  IdentityFile {k}\n" for k in (*wrong, client_home.key)))
    r = await doctor_one("auth-many", entry(h))
    a = r.check("auth")
    assert (a.status, a.data.get("kind")) == ("fail", "too-many-failures"), (a.detail, a.data)
    assert "IdentitiesOnly" in a.data["hint"]


# ------------------------------------------------------------------------------------------ remote facts


async def test_fake_nvidia_smi_8_gpus_without_cuda_torch(sshd_bed: SshdBed, tmp_path: Path) -> None:
    # nvidia-smi (recorded 8x H200 output) lists GPUs but this torch is a CPU build: gpus ok, python fail.
    h = sshd_bed.add("facts-8gpu")
    peers.fake_nvidia_smi(tmp_path / "smi-bin", FIXTURES / "nvidia-smi" / "h200x8_header.csv")
    py = peers.python_wrapper(tmp_path / "py-8gpu", path_dirs=[tmp_path / "smi-bin"])
    r = await doctor_one("facts-8gpu", entry(h), python=py)
    g = r.check("gpus")
    assert g.status == "ok", g.detail
    assert g.detail == "8x NVIDIA H200, 143771 MiB each, driver 580.159.04"
    assert g.data["count"] == 8
    assert g.data["gpus"][0]["uuid"] == "GPU-ec9f915a-f1aa-9f2e-7716-91cf0b3784e8"
    p = r.check("python")
    assert p.status == "fail"
    assert "does not see CUDA although nvidia-smi lists 8 GPU(s)" in p.detail


async def test_python_without_torch_fails_with_python_hint(sshd_bed: SshdBed, tmp_path: Path) -> None:
    h = sshd_bed.add("facts-notorch")
    bare = tmp_path / "bare-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    r = await doctor_one("facts-notorch", entry(h), python=str(bare / "bin" / "python"))
    p = r.check("python")
    assert p.status == "fail", p.detail
    assert "No module named 'torch'" in p.detail
    assert "`python:`" in p.data["hint"]
    assert p.data["interpreter"] == str(bare / "bin" / "python")
    assert statuses(r)["auth"] == "ok"
    assert not r.ok


async def test_missing_interpreter_fails_python(sshd_bed: SshdBed, tmp_path: Path) -> None:
    h = sshd_bed.add("facts-nopython")
    r = await doctor_one("facts-nopython", entry(h), python=str(tmp_path / "nope" / "python3"))
    p = r.check("python")
    assert p.status == "fail"
    assert p.detail == f"{tmp_path / 'nope' / 'python3'}: not found on the host"
    assert "`python:`" in p.data["hint"]


# ------------------------------------------------------------------------------------------ CLI --json + exit


def _run_cli_doctor(
    client_home: ClientHome, tmp_path: Path, hosts: dict[str, dict[str, object]], python: str, *extra: str
) -> subprocess.CompletedProcess[str]:
    inv = tmp_path / "inventory.yaml"
    inv.write_text(peers.inventory_text(hosts, python=python))
    return peers.orch_cli(
        "doctor", "--json", "--timeout", str(TIMEOUT_S), *extra, home=client_home.home, inventory=inv, cwd=tmp_path
    )


def test_cli_json_shape_and_exit_codes(sshd_bed: SshdBed, client_home: ClientHome, tmp_path: Path) -> None:
    good = sshd_bed.add("cli-good")
    bad = sshd_bed.add("cli-unknown", trusted=False)
    py = _no_gpu_python(tmp_path)
    hosts = {"cli-good": entry(good), "cli-unknown": entry(bad)}
    res = _run_cli_doctor(client_home, tmp_path, hosts, py)
    assert res.returncode == 1, res.stderr[-2000:]
    doc = json.loads(res.stdout)  # stdout is the JSON document and nothing else
    assert list(doc) == ["hosts", "warnings", "fleet"]  # fleet: orch fleet's view of the same facts
    assert doc["warnings"] == []  # a clean known_hosts: nothing OpenSSH would skip
    assert [g["group"] for g in doc["fleet"]["groups"]] == ["bed"]
    assert doc["fleet"]["groups"][0]["unreachable"]["cli-unknown"] == "hostkey: " + next(
        c["detail"] for c in doc["hosts"][1]["checks"] if c["name"] == "hostkey")
    by = {h["host"]: h for h in doc["hosts"]}
    assert list(by) == ["cli-good", "cli-unknown"]
    for name, host in by.items():
        assert set(host) >= {"host", "address", "port", "ok", "checks"}
        assert [c["name"] for c in host["checks"]] == list(CHECK_NAMES)
        for c in host["checks"]:
            assert set(c) >= {"name", "status", "detail"}
            assert c["status"] in ("ok", "warn", "fail", "skipped")
            assert isinstance(c["detail"], str)
        assert host["address"] == (good if name == "cli-good" else bad).address
        assert host["port"] == (good if name == "cli-good" else bad).port
    g = by["cli-good"]
    assert g["ok"] is True
    hk = next(c for c in g["checks"] if c["name"] == "hostkey")
    assert hk["verdict"] == "match"
    assert hk["offered_fingerprint"].startswith("SHA256:")
    assert hk["known"] and hk["known"][0]["file"] == str(client_home.known_hosts)
    assert hk["known"][0]["line"] == 1
    u = by["cli-unknown"]
    assert u["ok"] is False
    uhk = next(c for c in u["checks"] if c["name"] == "hostkey")
    assert (uhk["status"], uhk["verdict"]) == ("fail", "unknown")
    assert uhk["offered_fingerprint"] == peers.fingerprint(bad.host_keys["ed25519"].with_suffix(".pub"))
    assert uhk["known"] == []

    only_good = _run_cli_doctor(client_home, tmp_path, hosts, py, "--hosts", "cli-good")
    assert only_good.returncode == 0, only_good.stdout[-2000:] + only_good.stderr[-2000:]
    assert [h["host"] for h in json.loads(only_good.stdout)["hosts"]] == ["cli-good"]


# ------------------------------------------------------------------------------------------ ssh_config


async def test_ssh_config_alias_without_address(sshd_bed: SshdBed, client_home: ClientHome) -> None:
    h = sshd_bed.add("gpu-alias-target")  # known as [addr]:port
    client_home.add_config(f"Host gpu-alias\n  HostName {h.address}\n  Port {h.port}\n")
    r = await doctor_one("gpu-alias", {})
    assert (r.address, r.port) == (h.address, h.port)
    hk = r.check("hostkey")
    assert (hk.status, hk.data["verdict"]) == ("ok", "match"), hk.detail
    assert hk.data["lookup_name"] == f"[{h.address}]:{h.port}"
    assert r.check("dns").detail.startswith(f"{h.address} -> ")
    assert r.check("auth").status == "ok"


async def test_host_key_alias_is_the_only_name_judged(sshd_bed: SshdBed, client_home: ClientHome) -> None:
    # Both hosts' keys are on file under [addr]:port; only hka-good also has its HostKeyAlias entry.
    # OpenSSH looks up the alias alone, so hka-bad is unknown although its key is known under its address.
    good = sshd_bed.add("hka-good-target")
    bad = sshd_bed.add("hka-bad-target")
    client_home.trust("hka-good-key " + " ".join(good.pubkey_line().split()[:2]))
    client_home.add_config(
        f"Host hka-good\n  HostName {good.address}\n  Port {good.port}\n  HostKeyAlias hka-good-key\n"
        f"Host hka-bad\n  HostName {bad.address}\n  Port {bad.port}\n  HostKeyAlias hka-bad-key\n"
    )
    report = await peers.doctor({"hka-good": {}, "hka-bad": {}})
    by = {h.host: h.check("hostkey") for h in report.hosts}
    assert (by["hka-good"].status, by["hka-good"].data["verdict"]) == ("ok", "match"), by["hka-good"].detail
    assert by["hka-good"].data["lookup_name"] == "hka-good-key"
    assert by["hka-good"].data["known"][0]["line"] == 3
    assert (by["hka-bad"].status, by["hka-bad"].data["verdict"]) == ("fail", "unknown"), by["hka-bad"].detail
    assert by["hka-bad"].data["lookup_name"] == "hka-bad-key"
