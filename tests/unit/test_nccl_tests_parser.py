"""nccl-tests output parsing on the samples in tests/fixtures/nccl-tests/ (text table and -J JSON)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.parsers.base import ParseError
from orchestrator.parsers.nccl_tests import NcclRow, parse, parse_json, parse_text

FIX = Path(__file__).parents[1] / "fixtures" / "nccl-tests"
TEXT = (FIX / "all_reduce_perf_8xh200.txt").read_text()
JSON = (FIX / "all_reduce_perf_8xh200.json").read_text()
SIZES = [8 * 2**i for i in range(31)]


def test_text_table_rows_footer_and_devices() -> None:
    rep = parse_text(TEXT)
    assert rep.source == "text" and rep.ranks == 8 and rep.devices == ("NVIDIA H200",) * 8
    assert rep.avg_busbw_gbps == 142.975 and rep.out_of_bounds == 0 and rep.nccl_version == "22703"
    assert len(rep.rows) == 62
    assert [r.size_bytes for r in rep.by_placement("out-of-place")] == SIZES
    assert [r.size_bytes for r in rep.by_placement("in-place")] == SIZES
    assert rep.rows[0] == NcclRow(8, 2, "float", "sum", -1, "out-of-place", 14.18, 0.0, 0.0, 0)
    assert rep.rows[1] == NcclRow(8, 2, "float", "sum", -1, "in-place", 13.82, 0.0, 0.0, 0)
    assert rep.rows[-2] == NcclRow(
        8589934592, 2147483648, "float", "sum", -1, "out-of-place", 41254.0, 208.22, 364.39, 0
    )
    assert rep.rows[-1] == NcclRow(8589934592, 2147483648, "float", "sum", -1, "in-place", 40195.2, 213.71, 373.98, 0)
    assert all(r.wrong == 0 for r in rep.rows)


def test_json_rows_match_the_text_and_the_busbw_definition() -> None:
    rep = parse_json(JSON)
    assert rep.source == "json" and rep.ranks == 8 and rep.devices == ("NVIDIA H200",)
    assert rep.avg_busbw_gbps == 142.975379 and rep.out_of_bounds == 0 and rep.nccl_version == "22703"
    assert rep.rows[-2] == NcclRow(
        8589934592, 2147483648, "float", "sum", -1, "out-of-place", 41254.0, 208.220648, 364.386133, 0
    )
    assert rep.rows[-1].busbw_gbps == 373.984594 and rep.rows[-1].time_us == 40195.2
    for r in rep.rows:  # algbw = bytes / 1e9 / s, busbw = algbw * 2(n-1)/n, to the 6 printed decimals
        assert r.algbw_gbps == pytest.approx(r.size_bytes / 1e9 / (r.time_us / 1e6), abs=1e-6)
        assert r.busbw_gbps == pytest.approx(r.algbw_gbps * 2 * 7 / 8, abs=2e-6)
    text = parse_text(TEXT)
    for a, b in zip(text.rows, rep.rows, strict=True):
        assert (a.size_bytes, a.placement, a.time_us) == (b.size_bytes, b.placement, b.time_us)
        assert a.busbw_gbps == pytest.approx(b.busbw_gbps, abs=0.005)
    assert parse(JSON) == rep and parse(TEXT) == text


def test_row_metrics_have_the_allreduce_bench_shape() -> None:
    row = parse_text(TEXT).rows[-1]
    assert row.metrics() == {
        "time_us": {"value": 40195.2, "unit": "us"},
        "algbw_gbps": {"value": 213.71, "unit": "GB/s"},
        "busbw_gbps": {"value": 373.98, "unit": "GB/s"},
        "wrong": {"value": 0, "unit": "elements"},
    }


OLD = """\
# nThread 1 nGpus 2 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 \
validation: 0 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid   6899 on ztan-mig-235z device  0 [0000:04:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   6899 on ztan-mig-235z device  1 [0000:05:00] NVIDIA H100 80GB HBM3
ztan-mig-235z:6899:6899 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.2<0>
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    25.10   41.78   41.78    N/A    24.90   42.11   42.11    N/A
     2097152        524288     float     sum      -1                                    40.00   52.43   52.43    N/A
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 45.44
#
"""


def test_older_header_na_wrong_info_lines_and_in_place_only_lines() -> None:
    rep = parse_text(OLD)
    assert rep.ranks == 2 and rep.nccl_version is None and rep.avg_busbw_gbps == 45.44
    assert [(r.size_bytes, r.placement, r.time_us, r.busbw_gbps, r.wrong) for r in rep.rows] == [
        (1048576, "out-of-place", 25.10, 41.78, None),
        (1048576, "in-place", 24.90, 42.11, None),
        (2097152, "in-place", 40.00, 52.43, None),
    ]
    assert "wrong" not in rep.rows[0].metrics()


@pytest.mark.parametrize(
    "text,message",
    [
        ("# nThread 1 nGpus 8\n# Avg bus bandwidth : 1\n", "no nccl-tests result line"),
        ("8 2 float sum -1 abc 0.00 0.00 0 1.0 0.00 0.00 0\n", "time 'abc' is not a number"),
        ('{"results": []}', "holds no measurement"),
        ('{"results": [{"size": 8, "count": 2, "in_place": {"time": 1.0, "bus_bw": 0.0}}]}', "has no 'alg_bw'"),
        ("{not json", "not JSON"),
    ],
)
def test_malformed_output_raises_parse_error(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse(text)
