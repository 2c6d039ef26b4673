from orchestrator.cli.asked import asked_argv, asked_line


def test_asked_in_the_clis_words() -> None:
    assert asked_line({"sets": {}, "repeat": None, "seed": None}) == "asked: defaults"
    params = {"sets": {"M": "1,8", "dtype": "fp8"}, "repeat": 20, "seed": None, "preset": "tiny"}
    assert asked_argv(params) == ["--set", "M=1,8", "--set", "dtype=fp8", "--repeat", "20", "--preset", "tiny"]
    assert asked_line({"sets": {"M": [1, 8]}, "seed": 7}) == "asked: --set M=1,8 --seed 7"
    assert asked_line({"sets": {"cmd": "a b"}}) == "asked: --set 'cmd=a b'"
