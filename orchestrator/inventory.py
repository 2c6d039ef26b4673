"""The inventory: which hosts exist, how to reach them, and how ``--hosts`` selects among them — pure.

Shape (``inventory.yaml``)::

    defaults: {user: root, port: 22, python: python3, connection: ssh}
    groups:
      b300:
        vars: {python: /opt/venv/bin/python3}
        hosts:
          b300-0: {address: b300-0.example, port: 2222}
          b300-1: {}          # no address: the name is an ~/.ssh/config alias or a DNS name

Precedence for a host's settings: the host's own keys, then its group's ``vars``, then ``defaults``, then (for
SSH settings left unset: address, port, user, identity_file) the user's ``~/.ssh/config``, then OpenSSH's
defaults. A key that is unset everywhere stays ``None`` here so that ssh_config can fill it in
(``transport/ssh.py`` resolves it).

Errors: :class:`~orchestrator.errors.InventoryError` naming the file, the line and the fix;
:class:`~orchestrator.errors.SelectionError` when ``--hosts`` matches nothing.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator

from orchestrator import yamllines
from orchestrator.errors import InventoryError, SelectionError
from orchestrator.slurm.config import SLURM_KEYS, SlurmGroup, SlurmOptions

#: The host names the agent accepts for a run directory (``agents/orch_agent/runs.py``: ``_RUN_ID_RE``).
HOST_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")

HOST_KEYS = (
    "address",
    "port",
    "user",
    "identity_file",
    "python",
    "connection",
    "labels",
    "gpu",
    "orch_home",
    "require_uniform",
)
#: Host keys whose value is text: taken as written in the file (``user: 0710``, ``labels: {country: NO}``).
STRING_KEYS = ("address", "user", "identity_file", "python", "connection", "orch_home")


class GpuOverride(BaseModel):
    """Per-host or per-group GPU figures for a SKU the catalog lacks or gets wrong.

    ``peak_mem_gbps``: datasheet memory bandwidth, GB/s (1e9 B/s). ``bf16_tflops`` / ``fp8_tflops``: dense
    TFLOP/s. ``name``: what to call it in tables.
    """

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    peak_mem_gbps: float | None = Field(default=None, gt=0)
    bf16_tflops: float | None = Field(default=None, gt=0)
    fp8_tflops: float | None = Field(default=None, gt=0)


class HostVars(BaseModel):
    """Settings that may appear in ``defaults``, a group's ``vars`` or a host entry. ``None`` = unset."""

    model_config = ConfigDict(extra="forbid")

    address: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    user: str | None = None
    identity_file: str | None = None
    python: str | None = None
    connection: Literal["ssh", "local"] | None = None
    labels: dict[str, str] | None = None
    gpu: GpuOverride | None = None
    orch_home: str | None = None
    require_uniform: bool | None = None

    @field_validator("port", mode="before")
    @classmethod
    def _port_not_bool(cls, v: Any) -> Any:
        # pydantic reads true as 1; a port written as yes/true is a mistake, not port 1.
        if isinstance(v, bool):
            raise ValueError("port must be a whole number, not true/false")
        return v

    @field_validator("address", "user")
    @classmethod
    def _one_word(cls, v: str | None, info: ValidationInfo) -> str | None:
        # OpenSSH reads HostName/User from one token: a space, tab or newline makes `ssh -G` fail on an ssh_config
        # line that the user never wrote, and a leading '-' would read as an ssh option.
        if v is None:
            return v
        if not v.strip():
            raise ValueError("is empty")
        bad = next((ch for ch in v if ch.isspace() or not ch.isprintable()), None)
        if bad is not None:
            what = "one host name or IP address" if info.field_name == "address" else "one login name"
            raise ValueError(f"{v!r} contains {bad!r}: {what}, without spaces or line breaks")
        if v.startswith("-"):
            raise ValueError(f"{v!r} starts with '-', which ssh would read as an option")
        return v

    @field_validator("orch_home")
    @classmethod
    def _home_not_relative(cls, v: str | None) -> str | None:
        # A path on the host, resolved by the agent there (os.path.expanduser, then abspath): a relative one would
        # land under whatever directory the agent starts in (the login home over SSH, orch's own working directory
        # for a connection: local host), not next to this inventory; ~ and ~user are the host's homes.
        if v is not None and not v.startswith(("/", "~")):
            raise ValueError(f"orch_home {v!r} is a relative path")
        return v

    @field_validator("labels", mode="before")
    @classmethod
    def _labels_to_str(cls, v: Any) -> Any:
        # The YAML loader hands labels over as written; this serves callers passing numbers or booleans.
        if isinstance(v, dict):
            return {str(k): str(val) if isinstance(val, int | float) else val for k, val in v.items()}
        return v


class GroupSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    vars: HostVars = Field(default_factory=HostVars)
    hosts: dict[str, HostVars | None] = Field(default_factory=dict)
    slurm: SlurmOptions | None = None  # a Slurm group (orchestrator/slurm/config.py): no hosts, a login
    login: str | None = None
    agent_dir: str | None = None


class InventorySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    defaults: HostVars = Field(default_factory=HostVars)
    groups: dict[str, GroupSpec | None] = Field(default_factory=dict)
    suite_dir: str | None = None


@dataclass(frozen=True)
class Host:
    """One resolved host. ``address``/``port``/``user``/``identity_file`` may be None: ssh_config decides.

    ``python`` is the interpreter the agent runs under (like Ansible's ``ansible_python_interpreter``);
    for ``connection: local`` an unset ``python`` means the interpreter running orch. ``orch_home`` is where the
    agent keeps the host's run state (``<orch_home>/runs/<run_id>/<host>/``: spool, spec, kept outputs); None
    means the agent's default, ``~/.orch`` of the login user. Point it at node-local storage when homes are shared
    or small, and, on a ``connection: local`` host, away from your own ``~/.orch``.
    """

    name: str
    group: str
    connection: Literal["ssh", "local"] = "ssh"
    address: str | None = None
    port: int | None = None
    user: str | None = None
    identity_file: str | None = None
    python: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    gpu: GpuOverride | None = None
    orch_home: str | None = None
    require_uniform: bool = False

    @property
    def interpreter(self) -> str:
        """The Python that runs the agent and orch's small scripts on this host: ``python:`` when set, else the
        interpreter running orch for a local host, else ``python3`` (what the login shell finds)."""
        if self.python:
            return self.python
        return sys.executable if self.connection == "local" else "python3"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "group": self.group,
            "connection": self.connection,
            "address": self.address,
            "port": self.port,
            "user": self.user,
            "identity_file": self.identity_file,
            "python": self.python,
            "labels": dict(self.labels),
            "gpu": self.gpu.model_dump(exclude_none=True) if self.gpu else None,
            "orch_home": self.orch_home,
            "require_uniform": self.require_uniform,
        }


@dataclass(frozen=True)
class Inventory:
    path: str
    hosts: tuple[Host, ...]
    groups: dict[str, tuple[str, ...]]
    suite_dir: str | None = None
    slurm: dict[str, SlurmGroup] = field(default_factory=dict)  # Slurm groups by name (they list no hosts)

    def slurm_group(self, selector: str | None) -> SlurmGroup | None:
        """The Slurm group ``selector`` names (exactly one group name), else None."""
        return self.slurm.get((selector or "").strip())

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if h.name == name:
                return h
        raise SelectionError(
            f"no host {name!r} in {self.path}",
            f"known hosts: {', '.join(h.name for h in self.hosts) or '(none)'}",
        )

    def select(self, selector: str | None) -> list[Host]:
        """Hosts matching ``selector``: a group name, a host name, a glob (``b300-*``), or a comma list of those.

        ``None``, ``""`` or ``all`` selects every host. Order follows the inventory; duplicates are dropped.
        Raises SelectionError when a term matches nothing (naming the term) or the result is empty.
        """
        if selector is None or selector.strip() in ("", "all", "*"):
            if not self.hosts:
                raise SelectionError(f"{self.path} defines no hosts", "add a host under groups: in the inventory")
            return list(self.hosts)
        chosen: set[str] = set()
        for raw in selector.split(","):
            term = raw.strip()
            if not term:
                continue
            if term in self.slurm:
                login = self.slurm[term].login
                raise SelectionError(
                    f"--hosts {selector!r}: {term!r} is a Slurm group, whose hosts are the nodes Slurm allocates",
                    f"orch run and orch doctor take it alone (--hosts {term}); other commands reach the cluster "
                    f"through its login node" + ("" if login == "local" else f" (--hosts {login})"),
                )
            matched = self._match_term(term)
            if not matched:
                raise SelectionError(
                    f"--hosts {term!r} matches no group or host in {self.path}",
                    f"groups: {', '.join(sorted(self.groups)) or '(none)'}; "
                    f"hosts: {', '.join(h.name for h in self.hosts) or '(none)'}",
                )
            chosen.update(matched)
        if not chosen:
            raise SelectionError(f"--hosts {selector!r} selects no host", "name a group, a host or a glob")
        return [h for h in self.hosts if h.name in chosen]

    def _match_term(self, term: str) -> set[str]:
        if term in self.groups:
            return set(self.groups[term])
        names = {h.name for h in self.hosts}
        if term in names:
            return {term}
        out = {n for n in names if fnmatch.fnmatchcase(n, term)}
        for g, members in self.groups.items():
            if fnmatch.fnmatchcase(g, term):
                out.update(members)
        return out


def _fix_for(err: dict[str, Any]) -> str:
    kind = err.get("type", "")
    key = err["loc"][-1] if err.get("loc") else ""
    if kind == "extra_forbidden" and key == "build_dir":
        return (
            "build_dir was removed (it never had an effect): builds are unpacked, content-addressed, under "
            "~/.orch/builds on each host; delete the key"
        )
    if len(err["loc"]) >= 3 and err["loc"][-2] == "slurm":
        if kind == "extra_forbidden":
            return f"unknown key {key!r}; a group's slurm: takes {', '.join(SLURM_KEYS)}"
        if key in ("nodes", "gpus_per_node"):
            return f"{key} must be a whole number (nodes >= 1, gpus_per_node >= 0), e.g. {key}: 2"
        return "see the Slurm group shape in docs/slurm.md"
    if kind == "extra_forbidden":
        if len(err["loc"]) >= 2 and err["loc"][-2] in ("vars", "defaults") or len(err["loc"]) >= 4:
            return f"unknown key {key!r}; host keys are: {', '.join(HOST_KEYS)}"
        return (
            f"unknown key {key!r}; top-level keys are: defaults, groups, suite_dir; a group has vars and hosts "
            "(a Slurm group: slurm, login, agent_dir, vars)"
        )
    if kind == "literal_error":
        return "connection must be 'ssh' or 'local'"
    if key == "port":
        return "port must be a whole number from 1 to 65535, e.g. port: 2222"
    if key == "address":
        return "write one host name or IP address, e.g. address: 10.0.0.10 (IPv6 without brackets: address: ::1)"
    if key == "user":
        return "write one login name, e.g. user: root"
    if key == "orch_home" and kind == "value_error":
        given = str(err.get("input") or "")
        home = (given.removeprefix("$HOME/") if given.startswith("$HOME/") else given.lstrip("./")) or "orch"
        return (f"orch_home is a path on the host: write an absolute path (orch_home: /{home}) or one under the "
                f"login user's home (orch_home: ~/{home}); a relative one would depend on the directory the agent "
                "starts in")  # fmt: skip
    return "see the inventory shape in the README"


def parse_inventory(text: str, path: str = "inventory.yaml") -> Inventory:
    """Parse inventory YAML text. Raises InventoryError with path:line and a fix."""
    try:
        doc = yamllines.load(text)
    except yamllines.DuplicateKeyError as exc:
        raise InventoryError(f"duplicate key {exc.key!r}", "remove one of the two entries", path=path,
                             line=exc.line) from None
    except yamllines.YamlNumberError as exc:
        raise InventoryError(exc.problem, exc.HINT, path=path, line=exc.line) from None
    except yamllines.YamlSyntaxError as exc:
        raise InventoryError(
            f"not valid YAML: {exc.problem}", "check indentation and quoting near that line", path=path, line=exc.line
        ) from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise InventoryError(
            "the top level must be a mapping with 'defaults' and 'groups'", "see the README", path=path, line=1
        )
    try:
        doc = _as_written(doc)
    except yamllines.DuplicateKeyError as exc:
        raise InventoryError(f"duplicate key {exc.key!r}", "remove one of the two entries", path=path,
                             line=exc.line) from None
    try:
        spec = InventorySpec.model_validate(doc)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        where = ".".join(str(p) for p in loc)
        raise InventoryError(
            f"{where}: {err['msg']}", _fix_for(dict(err)), path=path, line=yamllines.line_of(doc, loc)
        ) from None
    return _resolve(spec, path, doc)


def _as_written(doc: Any) -> Any:
    """The document with names and text settings as written: YAML 1.1 would read ``NO`` as False, ``0710`` as
    456 and ``12:30`` as 750; group and host names, label keys and values and :data:`STRING_KEYS` keep their
    text, and a ``port`` written in digits is read in base 10."""
    doc = yamllines.text_keys(doc)
    if isinstance(doc.get("defaults"), dict):
        doc["defaults"] = _host_vars_as_written(doc["defaults"])
    if "suite_dir" in doc:
        doc["suite_dir"] = yamllines.written(doc, "suite_dir")
    groups = yamllines.text_keys(doc.get("groups"))
    if isinstance(groups, dict):
        for gname, group in groups.items():
            group = yamllines.text_keys(group)
            if isinstance(group, dict):
                if isinstance(group.get("vars"), dict):
                    group["vars"] = _host_vars_as_written(group["vars"])
                for key in ("login", "agent_dir"):
                    if key in group:
                        group[key] = yamllines.written(group, key)
                slurm = yamllines.text_keys(group.get("slurm"))
                if isinstance(slurm, dict):  # time: 30:00 is 1800 in YAML 1.1; sbatch reads "30:00"
                    for key in ("partition", "account", "time", "constraint", "reservation", "qos"):
                        if key in slurm and slurm[key] is not None:
                            slurm[key] = yamllines.written(slurm, key)
                    group["slurm"] = slurm
                hosts = yamllines.text_keys(group.get("hosts"))
                if isinstance(hosts, dict):
                    for hname, hv in hosts.items():
                        hosts[hname] = _host_vars_as_written(hv) if isinstance(hv, dict) else hv
                    group["hosts"] = hosts
            groups[gname] = group
        doc["groups"] = groups
    return doc


def _host_vars_as_written(hv: Any) -> Any:
    hv = yamllines.text_keys(hv)
    for key in STRING_KEYS:
        if key in hv:
            hv[key] = yamllines.written(hv, key)
    if "port" in hv and isinstance(hv, yamllines.LinedDict) and str(hv.texts.get("port", "x")).isdigit():
        hv["port"] = int(hv.texts["port"], 10)
    labels = yamllines.text_keys(hv.get("labels"))
    if isinstance(labels, dict):
        for key in labels:
            labels[key] = yamllines.written(labels, key)
        hv["labels"] = labels
    gpu = hv.get("gpu")
    if isinstance(gpu, dict) and "name" in gpu:
        gpu["name"] = yamllines.written(gpu, "name")
    return hv


def _resolve(spec: InventorySpec, path: str, doc: Any = None) -> Inventory:
    hosts: list[Host] = []
    groups: dict[str, tuple[str, ...]] = {}
    seen: dict[str, str] = {}
    slurm: dict[str, SlurmGroup] = {}
    for gname, group in spec.groups.items():
        group = group or GroupSpec()
        sg = _slurm_group(gname, group, spec, path, doc)
        if sg is not None:
            slurm[gname] = sg
        members = []
        for hname, hv in group.hosts.items():
            if not HOST_NAME_RE.fullmatch(hname):
                raise InventoryError(
                    f"host name {hname!r} is not allowed",
                    "a host name is 1-128 letters, digits and '._-', not starting with '.', '_' or '-' (it names "
                    "a directory on the host); put the machine's real name in address:",
                    path=path,
                    line=yamllines.line_of(doc, ("groups", gname, "hosts", hname)),
                )
            if hname in seen:
                raise InventoryError(
                    f"host {hname!r} appears in groups {seen[hname]!r} and {gname!r}",
                    "a host belongs to one group; use labels for other groupings",
                    path=path,
                    line=yamllines.line_of(doc, ("groups", gname, "hosts", hname)),
                )
            if hname in spec.groups:
                raise InventoryError(
                    f"{hname!r} is both a group and a host name",
                    "rename one of them",
                    path=path,
                    line=yamllines.line_of(doc, ("groups", gname, "hosts", hname)),
                )
            seen[hname] = gname
            members.append(hname)
            hosts.append(_merge(hname, gname, hv or HostVars(), group.vars, spec.defaults))
        groups[gname] = tuple(members)
    for sg in slurm.values():
        if sg.login != "local" and sg.login not in seen:
            raise InventoryError(
                f"groups.{sg.name}.login: {sg.login!r} is not a host of this inventory",
                "name the login node as a host of another group (it is reached over SSH like any host), or write "
                "login: local when orch runs on the login node",
                path=path,
                line=yamllines.line_of(doc, ("groups", sg.name, "login")),
            )
    return Inventory(path=path, hosts=tuple(hosts), groups=groups, suite_dir=spec.suite_dir, slurm=slurm)


def _slurm_group(name: str, group: GroupSpec, spec: InventorySpec, path: str, doc: Any) -> SlurmGroup | None:
    """The group's SlurmGroup when it has ``slurm:``; InventoryError for Slurm keys out of place."""
    if group.slurm is None:
        for key in ("login", "agent_dir"):
            if getattr(group, key) is not None:
                raise InventoryError(
                    f"groups.{name}.{key} is only for a Slurm group",
                    f"add a slurm: block to {name} (e.g. slurm: {{partition: gpu, nodes: 1}}) or delete {key}",
                    path=path,
                    line=yamllines.line_of(doc, ("groups", name, key)),
                )
        return None
    if group.hosts:
        raise InventoryError(
            f"groups.{name} has slurm: and hosts:; a Slurm group's hosts are the nodes Slurm allocates",
            "delete hosts: from the group (node names come from the job's allocation)",
            path=path,
            line=yamllines.line_of(doc, ("groups", name, "hosts")),
        )
    if not group.login or not group.login.strip():
        raise InventoryError(
            f"groups.{name}: a Slurm group needs login:",
            "login: HOST (an inventory host on the cluster's login node, reached over SSH) or login: local",
            path=path,
            line=yamllines.line_of(doc, ("groups", name, "slurm")),
        )
    if group.agent_dir is not None and not group.agent_dir.startswith("/"):
        raise InventoryError(
            f"groups.{name}.agent_dir: {group.agent_dir!r} is not an absolute path",
            "name a node-local directory such as /tmp/orch or /local/orch (or delete agent_dir to run the agent "
            "from the shared home)",
            path=path,
            line=yamllines.line_of(doc, ("groups", name, "agent_dir")),
        )
    return SlurmGroup(
        name=name,
        options=group.slurm,
        login=group.login.strip(),
        python=group.vars.python or spec.defaults.python,
        orch_home=group.vars.orch_home or spec.defaults.orch_home,
        agent_dir=group.agent_dir,
    )


def _merge(name: str, group: str, own: HostVars, gvars: HostVars, defaults: HostVars) -> Host:
    def pick(key: str) -> Any:
        for layer in (own, gvars, defaults):
            v = getattr(layer, key)
            if v is not None:
                return v
        return None

    labels: dict[str, str] = {}
    for layer in (defaults, gvars, own):
        labels.update(layer.labels or {})
    gpu: GpuOverride | None = None
    for layer in (defaults, gvars, own):
        if layer.gpu is not None:
            merged = (gpu.model_dump(exclude_none=True) if gpu else {}) | layer.gpu.model_dump(exclude_none=True)
            gpu = GpuOverride.model_validate(merged)
    return Host(
        name=name,
        group=group,
        connection=pick("connection") or "ssh",
        address=pick("address"),
        port=pick("port"),
        user=pick("user"),
        identity_file=pick("identity_file"),
        python=pick("python"),
        labels=labels,
        gpu=gpu,
        orch_home=pick("orch_home"),
        require_uniform=bool(pick("require_uniform")),
    )


def load_inventory(path: Path | str) -> Inventory:
    """Read and parse the inventory file. Raises InventoryError when missing or malformed."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InventoryError(
            "inventory file not found",
            "pass --inventory PATH, set ORCH_INVENTORY, or run from the directory holding inventory.yaml",
            path=str(p),
        ) from None
    except OSError as exc:
        raise InventoryError(f"cannot read the inventory: {exc.strerror}", "check the path", path=str(p)) from None
    except UnicodeDecodeError as exc:
        raise InventoryError(
            f"not UTF-8 text: byte {exc.object[exc.start]:#04x} at offset {exc.start}",
            "save the inventory as UTF-8",
            path=str(p),
            line=exc.object.count(b"\n", 0, exc.start) + 1,
        ) from None
    return parse_inventory(text, str(p))
