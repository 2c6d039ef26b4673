"""Host lists folded as Slurm/pdsh write them, findings grouped by hosts hit, host-specific text generalized."""

from __future__ import annotations

from orchestrator.hostgroups import fold, generalize, group_by


def test_fold_numeric_runs_padding_and_several_fields() -> None:
    assert fold([f"n{i}" for i in range(1, 201)]) == "n[1-200]"
    assert fold(["n001", "n002", "n003", "n007", "n009", "n010"]) == "n[001-003,007,009-010]"
    assert fold([f"r{r}n{n:02d}" for r in (1, 2) for n in range(1, 5)]) == "r[1-2]n[01-04]"
    assert fold(["b300-1", "b300-0", "b300-1"]) == "b300-[0-1]"  # sorted, duplicates once


def test_fold_non_numeric_and_odd_names() -> None:
    assert fold(["login", "gpu-b", "gpu-a", "n1"]) == "gpu-a,gpu-b,login,n1"
    assert fold(["ct200-0.example.com", "ct200-1.example.com"]) == "ct200-[0-1].example.com"
    # names NodeSet would read as patterns are listed as written, after the folded ones
    assert fold(["n1", "a[1]", "n2", "x,y", "@all"]) == "n[1-2],a[1],x,y,@all"
    assert fold([]) == ""


def test_group_by_most_hosts_first_ties_in_first_seen_order() -> None:
    groups = group_by([("a", "x"), ("b", "y"), ("c", "y"), ("d", "z"), ("e", "x"), ("f", "y")])
    assert [(g.key, g.hosts, g.count) for g in groups] == [
        ("y", ("b", "c", "f"), 3),
        ("x", ("a", "e"), 2),
        ("z", ("d",), 1),
    ]
    assert group_by([("n1", 1), ("n1", 1), ("n2", 1)])[0].hostlist == "n[1-2]"


def test_generalize_whole_words_only() -> None:
    text = "refused by 10.0.0.1:22 (n1 not n10, 10.0.0.11); port 22. n1: /runs/r/n1/ n1-b"
    assert generalize(text, host="n1", address="10.0.0.1", port=22) == (
        "refused by {address}:{port} ({host} not n10, 10.0.0.11); port {port}. {host}: /runs/r/{host}/ n1-b"
    )
    assert generalize("no entry for [10.0.0.1]:2222", host="h", address="10.0.0.1", port=2222) == (
        "no entry for [{address}]:{port}"
    )
    assert generalize("plain", host="h") == "plain"


def test_fill_puts_back_shared_values_and_names_the_rest() -> None:
    from orchestrator.cli.grouped import fill

    where = {"a1": ("10.0.0.1", 22), "a2": ("10.0.0.2", 22)}
    text = "no entry for [{address}]:{port}; orch hosts trust {host}"
    assert fill(text, ("a1",), where) == ("no entry for [10.0.0.1]:22; orch hosts trust a1", [])
    assert fill(text, ("a1", "a2"), where) == (
        "no entry for [<address>]:22; orch hosts trust <host>", ["host", "address"]
    )
    # unknown address/port (deploy, run): never a guessed value
    assert fill("refused by {address}:{port}", ("x", "y"), {}) == ("refused by <address>:<port>", ["address", "port"])
    assert fill("plain text", ("x", "y"), where) == ("plain text", [])
