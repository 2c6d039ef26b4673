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


TITLES = "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n"


@pytest.mark.parametrize(
    "text,message",
    [
        ("# nThread 1 nGpus 8\n# Avg bus bandwidth : 1\n", "no nccl-tests result line"),
        (TITLES + "8 2 float sum -1 abc 0.00 0.00 0 1.0 0.00 0.00 0\n", "line 2: time 'abc' is not a number"),
        (TITLES + "8 2 float sum -1 1.0 0.00 0.00 x 1.0 0.00 0.00 0\n", "line 2: #wrong 'x' is not a number"),
        (TITLES + "8 2 float sum -1 1.0 0.00 0.00 0.5 1.0 0.00 0.00 0\n", "line 2: #wrong '0.5' is not a whole"),
        ("8 2 float sum -1 1.0 0.00 0.00 0 1.0 0.00 0.00 0\n", "line 1: a result line before any column titles"),
        ('{"results": []}', "holds no measurement"),
        ('{"results": [{"size": 8, "count": 2, "in_place": {"time": 1.0, "bus_bw": 0.0}}]}', "has no 'alg_bw'"),
        ("{not json", "not JSON"),
    ],
)
def test_malformed_output_raises_parse_error(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse(text)


# issue 11, item 1: nccl-tests before the root column printed a float `error` where newer ones print `#wrong`
ERROR_COLUMN = """\
# nThread 1 nGpus 1 minBytes 4096 maxBytes 4096 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#                                                       out-of-place                       in-place
#       size         count      type   redop     time   algbw   busbw  error     time   algbw   busbw  error
#        (B)    (elements)                       (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
        4096          1024     float     sum    93.73    0.04    0.09  1e-06    93.15    0.04    0.09  1e-06
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.09
"""

# the first nccl-tests tables (2017): bytes N type op ... res
BYTES_N_OP = """\
# nThread 1 nGpus 4 minBytes 8 maxBytes 16 step: 2(factor) warmup iters: 5 iters: 20 validation: 1
#                                     out-of-place                    in-place
#      bytes             N    type      op     time  algbw  busbw      res     time  algbw  busbw      res
           8             2   float     sum    31.02   0.00   0.00    0e+00    30.11   0.00   0.00    0e+00
          16             4   float     sum    30.40   0.00   0.00    2e-07    29.87   0.00   0.00    0e+00
"""

# ROCm rccl-tests (all_reduce_perf on 8x MI300X): same titles as nccl-tests with root and #wrong, rccl's banner
RCCL = """\
# nThread 1 nGpus 8 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 \
validation: 1 graph: 0
rccl-tests: Version develop:b0a3841
# Using devices
#  Rank  0 Group  0 Pid 101 on mi300-node device  0 [0000:0c:00] AMD Instinct MI300X
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
     1048576        262144     float     sum      -1    41.22   25.44   44.52      0    40.18   26.10   45.67      0
     2097152        524288     float     sum      -1    52.80   39.72   69.51      0    51.95   40.37   70.65      0
# Errors with asterisks indicate errors that have exceeded the maximum threshold.
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 57.59
"""

# nccl-tests with per-iteration timing: four more columns in each block, in-place first in the banner
PER_ITER = """\
#                                in-place                                                out-of-place
#  size  count  type  redop  root  time  algbw  busbw  #wrong  i_min  i_max  i_p99  i_cv%  \
time  algbw  busbw  #wrong  i_min  i_max  i_p99  i_cv%
  4096   1024  float    sum    -1  9.10   0.45   0.79       0   8.90   9.80   9.70   2.1  \
9.40   0.44   0.76       0   9.00   9.90   9.85   2.4
""".replace("\\\n", "")


def test_older_error_column_is_mapped_by_its_title() -> None:
    rep = parse_text(ERROR_COLUMN)
    assert [(r.placement, r.time_us, r.algbw_gbps, r.busbw_gbps, r.wrong, r.max_error) for r in rep.rows] == [
        ("out-of-place", 93.73, 0.04, 0.09, None, 1e-06),
        ("in-place", 93.15, 0.04, 0.09, None, 1e-06),
    ]
    assert all(r.root == -1 and r.redop == "sum" for r in rep.rows)
    assert rep.rows[0].metrics()["max_error"] == {"value": 1e-06, "unit": ""}
    assert "wrong" not in rep.rows[0].metrics()


def test_first_tables_bytes_n_op_res() -> None:
    rep = parse_text(BYTES_N_OP)
    assert [(r.size_bytes, r.count, r.redop, r.placement, r.time_us, r.max_error) for r in rep.rows] == [
        (8, 2, "sum", "out-of-place", 31.02, 0.0),
        (8, 2, "sum", "in-place", 30.11, 0.0),
        (16, 4, "sum", "out-of-place", 30.40, 2e-07),
        (16, 4, "sum", "in-place", 29.87, 0.0),
    ]
    assert rep.ranks == 4


def test_rccl_tests_table() -> None:
    rep = parse_text(RCCL)
    assert rep.devices == ("AMD Instinct MI300X",) and rep.avg_busbw_gbps == 57.59
    assert [(r.size_bytes, r.placement, r.time_us, r.busbw_gbps, r.wrong) for r in rep.rows] == [
        (1048576, "out-of-place", 41.22, 44.52, 0),
        (1048576, "in-place", 40.18, 45.67, 0),
        (2097152, "out-of-place", 52.80, 69.51, 0),
        (2097152, "in-place", 51.95, 70.65, 0),
    ]


def test_per_iteration_columns_and_the_banner_order() -> None:
    rep = parse_text(PER_ITER)
    assert [(r.placement, r.time_us, r.busbw_gbps, r.wrong) for r in rep.rows] == [
        ("in-place", 9.10, 0.79, 0),
        ("out-of-place", 9.40, 0.76, 0),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # a newer row (with root) under the older titles, and an older row under the newer ones
        (ERROR_COLUMN.replace("sum    93.73", "sum  -1  93.73"),
         "nccl-tests line 5: 13 columns where the column titles on line 3 (size count type redop time algbw busbw "
         "error time algbw busbw error) name 12: '4096 1024 float sum -1 93.73"),
        (TITLES + "4096 1024 float sum 93.73 0.04 0.09 1e-06 93.15 0.04 0.09 1e-06\n",
         "nccl-tests line 2: 12 columns where the column titles on line 1 (size count type redop root time algbw "
         "busbw #wrong time algbw busbw #wrong) name 13"),
        ("#  size  count  type  flavour  time  algbw  busbw  #wrong\n8 2 float x 1.0 0.0 0.0 0\n",
         "nccl-tests line 1: column titles 'size count type flavour time algbw busbw #wrong' are not a layout"),
    ],
)  # fmt: skip
def test_a_row_that_does_not_fit_its_titles_names_the_line(text: str, message: str) -> None:
    with pytest.raises(ParseError) as exc:
        parse_text(text)
    assert str(exc.value).startswith(message), str(exc.value)


def test_each_title_line_starts_a_table() -> None:
    rep = parse_text(RCCL + RCCL)
    assert [r.table for r in rep.rows] == [1] * 4 + [2] * 4
    assert [r.line for r in rep.rows][::2] == [9, 10, 22, 23]  # 13 lines per copy
