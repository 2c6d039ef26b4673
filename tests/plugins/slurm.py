"""A real single-node Slurm cluster for the tests, from Debian's slurm-wlm 22.05 (slurmctld, slurmd), slurmdbd
with MariaDB for job accounting (``sacct``), and munge — all started by this fixture, all state under a fresh
temporary directory, on free loopback ports.

``slurm_cluster`` (session): starts a private ``munged`` (its own key and socket), ``mariadbd``, ``slurmdbd``,
``slurmctld`` and ``slurmd`` as root (slurmd must be root to launch jobs as a user), with one node named after
this machine's hostname in partition ``cpu`` (every core, MaxTime 60 min). Tests point Slurm's commands at it
with ``SLURM_CONF`` (``slurm_env`` sets it for one test). At the end every job is cancelled and every daemon
stopped by its pid.

When the cluster cannot start (not root, packages missing, a daemon exits) the tests that need it FAIL with the
reason and the fix (tests/plugins/services.py); skipping them is an explicit opt-in,
``ORCH_TEST_SKIP_SERVICES=slurm``. The recipe follows the verified one of the shared Slurm test bed
(``slurm.conf`` and ``slurmdbd.conf`` as there, with AuthInfo naming the private munge socket).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.plugins.services import service_unavailable
from tests.plugins.timing import scaled

START_TIMEOUT_S = scaled(90.0)
PACKAGES = "slurm-wlm slurmdbd munge mariadb-server"
DAEMONS = ("munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd")


class SlurmUnavailable(RuntimeError):
    pass


@dataclass(frozen=True)
class SlurmCluster:
    """``root``: the state directory; ``conf``: its slurm.conf (``SLURM_CONF``); ``node``: the one node's name;
    ``partition``: its partition."""

    root: Path
    conf: Path
    node: str
    partition: str = "cpu"

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
        """Run a Slurm command against this cluster (text output, never raises on a non-zero exit)."""
        return subprocess.run(list(argv), env=self.env(), capture_output=True, text=True, timeout=scaled(timeout_s))

    def squeue_ids(self) -> list[str]:
        return self.run("squeue", "-h", "-o", "%i").stdout.split()


def _free_ports(n: int) -> list[int]:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def _wait(what: str, ok: object, log: Path | None, deadline_s: float = START_TIMEOUT_S) -> None:
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        if callable(ok) and ok():
            return
        time.sleep(0.2)
    tail = log.read_text(errors="replace")[-1500:] if log is not None and log.exists() else ""
    raise SlurmUnavailable(f"{what} not ready within {deadline_s:g} s; log tail:\n{tail}")


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _stop_pid(path: Path) -> None:
    pid = _pid(path)
    if pid is None:
        return
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + scaled(30)
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        with suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _slurm_conf(d: Path, node: str, ports: dict[str, int], munge_sock: Path) -> str:
    return f"""ClusterName=orchtest
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ports["slurmctld"]}
SlurmdPort={ports["slurmd"]}
AuthType=auth/munge
AuthInfo=socket={munge_sock}
CryptoType=crypto/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
ReturnToService=2
SlurmctldPidFile={d}/run/slurmctld.pid
SlurmdPidFile={d}/run/slurmd.pid
SlurmdSpoolDir={d}/spool
StateSaveLocation={d}/state
SlurmUser=root
SlurmdUser=root
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/linux
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={ports["slurmdbd"]}
AccountingStoragePass={munge_sock}
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.log
InactiveLimit=0
KillWait=5
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=30
Waittime=0
NodeName={node} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 1} RealMemory=1000 State=UNKNOWN
PartitionName=cpu Nodes={node} Default=YES MaxTime=60 State=UP
"""


def _slurmdbd_conf(d: Path, ports: dict[str, int], munge_sock: Path) -> str:
    return f"""AuthType=auth/munge
AuthInfo=socket={munge_sock}
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={ports["slurmdbd"]}
SlurmUser=root
LogFile={d}/log/slurmdbd.log
PidFile={d}/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={ports["mysql"]}
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
"""


def _check(res: subprocess.CompletedProcess[str], what: str) -> None:
    if res.returncode != 0:
        raise SlurmUnavailable(f"{what} failed ({res.returncode}): {(res.stderr or res.stdout).strip()[-800:]}")


@contextmanager
def running_slurm() -> Iterator[SlurmCluster]:
    """A throwaway Slurm cluster for the duration of the block. Raises SlurmUnavailable with the reason."""
    if os.geteuid() != 0:
        raise SlurmUnavailable("slurmd and slurmdbd here run as root (SlurmUser=root); the tests are not root")
    missing = [d for d in DAEMONS if shutil.which(d, path="/usr/sbin:/usr/bin:/sbin:/bin") is None]
    if missing:
        raise SlurmUnavailable(f"not installed: {', '.join(missing)}")
    d = Path(tempfile.mkdtemp(prefix="orch-slurm-"))
    os.chmod(d, 0o755)  # jobs of other users would read the conf; the daemons run as root
    for sub in ("state", "spool", "log", "run", "db", "munge"):
        (d / sub).mkdir()
    node = socket.gethostname()
    ports = dict(zip(("mysql", "slurmctld", "slurmd", "slurmdbd"), _free_ports(4), strict=True))
    munge_sock = d / "munge" / "munge.socket"
    cluster = SlurmCluster(d, d / "slurm.conf", node)
    env = cluster.env()
    log = d / "log"
    mysql_sock = d / "run" / "mysql.sock"
    mariadb: subprocess.Popen[bytes] | None = None
    try:
        key = d / "munge" / "munge.key"
        _check(subprocess.run(["mungekey", "--create", "--keyfile", str(key)], capture_output=True, text=True,
                              timeout=scaled(60)), "mungekey")  # fmt: skip
        os.chmod(key, 0o600)
        _check(subprocess.run(
            ["munged", "--force", "--socket", str(munge_sock), "--key-file", str(key), "--pid-file",
             str(d / "run" / "munged.pid"), "--log-file", str(log / "munged.log"), "--seed-file",
             str(d / "munge" / "munged.seed")],
            capture_output=True, text=True, timeout=scaled(60)), "munged")  # fmt: skip
        _wait("munged", munge_sock.exists, log / "munged.log")
        init = subprocess.run(
            ["mariadb-install-db", "--user=root", f"--datadir={d / 'db'}", "--auth-root-authentication-method=normal"],
            capture_output=True, text=True, timeout=scaled(180),
        )  # fmt: skip
        _check(init, "mariadb-install-db")
        with open(log / "mariadb.log", "w") as out:
            mariadb = subprocess.Popen(
                ["mariadbd", "--user=root", f"--datadir={d / 'db'}", f"--socket={mysql_sock}",
                 f"--port={ports['mysql']}", "--bind-address=127.0.0.1", f"--pid-file={d / 'run' / 'mysql.pid'}",
                 "--skip-log-bin", "--innodb-flush-log-at-trx-commit=0"],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        _wait("mariadbd", mysql_sock.exists, log / "mariadb.log")
        _check(subprocess.run(
            ["mariadb", f"--socket={mysql_sock}", "-uroot", "-e",
             "CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmpw'; "
             "GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1'; FLUSH PRIVILEGES;"],
            capture_output=True, text=True, timeout=scaled(60)), "creating the slurm database user")  # fmt: skip
        cluster.conf.write_text(_slurm_conf(d, node, ports, munge_sock))
        dbd_conf = d / "slurmdbd.conf"
        dbd_conf.write_text(_slurmdbd_conf(d, ports, munge_sock))
        os.chmod(dbd_conf, 0o600)
        _check(subprocess.run(["slurmdbd"], env=env, capture_output=True, text=True, timeout=scaled(60)), "slurmdbd")

        def dbd_up() -> bool:
            return cluster.run("sacctmgr", "-n", "list", "cluster").returncode == 0

        _wait("slurmdbd", dbd_up, log / "slurmdbd.log")
        cluster.run("sacctmgr", "-i", "add", "cluster", "orchtest")
        _check(subprocess.run(["slurmctld"], env=env, capture_output=True, text=True, timeout=scaled(60)),
               "slurmctld")  # fmt: skip
        _check(subprocess.run(["slurmd"], env=env, capture_output=True, text=True, timeout=scaled(60)), "slurmd")

        def node_idle() -> bool:
            res = cluster.run("sinfo", "-h", "-o", "%T")
            return res.returncode == 0 and "idle" in res.stdout

        _wait("the node (sinfo idle)", node_idle, log / "slurmctld.log")
        yield cluster
    finally:
        if cluster.conf.exists():
            cluster.run("scancel", "--full", "--partition", cluster.partition)
            deadline = time.monotonic() + scaled(30)
            while time.monotonic() < deadline and cluster.squeue_ids():
                time.sleep(0.3)
        for name in ("slurmd", "slurmctld", "slurmdbd"):
            _stop_pid(d / "run" / f"{name}.pid")
        if mariadb is not None:
            mariadb.terminate()
            try:
                mariadb.wait(timeout=scaled(30))
            except subprocess.TimeoutExpired:
                mariadb.kill()
                mariadb.wait()
        _stop_pid(d / "run" / "munged.pid")
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[SlurmCluster]:
    reason = None
    try:
        with running_slurm() as cluster:
            yield cluster
    except (SlurmUnavailable, OSError, subprocess.SubprocessError) as exc:
        reason = str(exc)
    if reason is not None:  # outside the except: one message, not a chained traceback
        service_unavailable("slurm", reason, f"run the tests as root with apt-get install {PACKAGES} "
                            "(scripts/setup.sh --system)")


@pytest.fixture
def slurm_env(slurm_cluster: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> SlurmCluster:
    """The cluster, with ``SLURM_CONF`` set for this test (orch's ``login: local`` runs Slurm's commands here)."""
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    return slurm_cluster
