"""analysis/casestats.py: the statistics of one compared case as plain data — its dict is what the API's
``CaseStatsOut`` and ``orch runs compare --json`` carry, field for field, and the module stays free of numpy."""

from __future__ import annotations

import subprocess
import sys

from orchestrator.analysis import stats
from orchestrator.analysis.casestats import CaseStats
from orchestrator.api.schemas import CaseStatsOut

FIELDS = ["ratio", "ci_low", "ci_high", "p_value", "q_value", "band", "band_source", "call", "n_base", "n_head"]


def test_to_dict_is_every_field_by_name_in_declaration_order() -> None:
    st = CaseStats(1.25, 1.1, 1.4, 0.004, 0.012, 0.05, "calibration", "slower", 20, 18)
    d = st.to_dict()
    assert d == {"ratio": 1.25, "ci_low": 1.1, "ci_high": 1.4, "p_value": 0.004, "q_value": 0.012, "band": 0.05,
                 "band_source": "calibration", "call": "slower", "n_base": 20, "n_head": 18}  # fmt: skip
    assert list(d) == FIELDS
    assert CaseStats(**d) == st  # nothing renamed or dropped: the dict rebuilds the value


def test_a_not_applicable_case_keeps_its_nulls_and_counts() -> None:
    # stats.case_stats' "n/a" value (fewer than 2 samples on a side): no ratio, interval or p-values, the band and
    # the sample counts kept
    na = CaseStats(None, None, None, None, None, 0.1, "within-run", "n/a", 1, 5)
    assert na.to_dict() == {"ratio": None, "ci_low": None, "ci_high": None, "p_value": None, "q_value": None,
                            "band": 0.1, "band_source": "within-run", "call": "n/a",
                            "n_base": 1, "n_head": 5}  # fmt: skip


def test_the_dict_is_what_the_api_schema_reads() -> None:
    st = CaseStats(0.8, 0.75, 0.86, 1e-5, 3e-5, 0.02, "within-run", "faster", 40, 40)
    out = CaseStatsOut.model_validate(st.to_dict())
    assert out.model_dump() == st.to_dict()
    assert sorted(CaseStatsOut.model_fields) == sorted(FIELDS)
    assert stats.CaseStats is CaseStats  # stats.py re-exports the one class, not a copy


def test_importing_it_does_not_import_numpy() -> None:
    # the store's records and the CLI name CaseStats without paying for the statistics stack
    code = "import sys, orchestrator.analysis.casestats; print('numpy' in sys.modules, 'scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["False", "False"]
