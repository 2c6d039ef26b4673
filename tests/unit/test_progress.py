"""The fleet progress summary (pure): counts per group, cases, ETA, slowest and failing hosts by name."""

from __future__ import annotations

from orchestrator.progress import FleetTracker


def test_summary_counts_eta_slowest_and_failing() -> None:
    t = FleetTracker({**{f"n{i}": "b300" for i in range(1, 7)}, "login": "cpu"})
    assert t.lines(0.0) == [
        "b300  hosts 0 done · 0 running · 0 failed · 6 waiting / 6  cases 0/0+",
        "cpu  hosts 0 done · 0 running · 0 failed · 1 waiting / 1  cases 0/0+",
    ]
    for i in range(1, 5):
        t.host_state(f"n{i}", "started", "", now=10.0)
        t.case_progress(f"n{i}", 0, 10, now=10.0)
    t.case_progress("n1", 10, 10, now=30.0)
    t.host_state("n1", "completed", "", now=30.0)
    t.case_progress("n2", 5, 10, now=30.0)
    t.case_progress("n3", 2, 10, now=30.0)
    t.host_state("n4", "error", "n4: CUDA error: out of memory on n4", now=30.0)
    t.host_state("n5", "failed", "n5: tcp: connection refused on port 22; orch hosts show n5", now=30.0)
    t.host_state("n6", "failed", "n6: tcp: connection refused on port 22; orch hosts show n6", now=30.0)
    # 17 cases done in 20 s since the group started; 3 running hosts have 23 left -> 20 * 23 / 17 = 27 s
    assert t.lines(30.0) == [
        "b300  hosts 1 done · 3 running · 2 failed / 6  cases 17/40  ETA 27s",
        "  slowest: n4 0/10, n3 2/10, n2 5/10",
        "  failed on 2 hosts: n[5-6]: tcp: connection refused on port 22; orch hosts show <host>",
        "  failing on 1 host: n4: CUDA error: out of memory on n4",
        "cpu  hosts 0 done · 0 running · 0 failed · 1 waiting / 1  cases 0/0+",
    ]


def test_no_eta_before_a_case_is_done_or_with_an_unknown_total() -> None:
    t = FleetTracker({"a": "g", "b": "g"})
    t.host_state("a", "started", "", now=0.0)
    t.host_state("b", "started", "", now=0.0)
    t.case_progress("a", 0, 4, now=1.0)
    assert t.lines(5.0)[0] == "g  hosts 0 done · 2 running · 0 failed / 2  cases 0/4+"
    t.case_progress("b", 1, 4, now=2.0)
    t.case_progress("a", 1, 4, now=2.0)
    assert t.lines(4.0)[0] == "g  hosts 0 done · 2 running · 0 failed / 2  cases 2/8  ETA 12s"
    t.host_state("a", "partial", "1 case(s) failed", now=9.0)
    t.host_state("b", "completed", "", now=9.0)
    assert t.lines(9.0) == [
        "g  hosts 1 done · 0 running · 1 failed / 2  cases 2/8",
        "  failed on 1 host: a: 1 case(s) failed",
    ]
