from orchestrator.wording import counted


def test_counted() -> None:
    assert [counted(n, "result") for n in (0, 1, 2)] == ["0 results", "1 result", "2 results"]
    assert counted(1, "host") == "1 host" and counted(3, "series", "series") == "3 series"
