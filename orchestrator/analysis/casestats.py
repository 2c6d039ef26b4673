"""The value one compared case's statistics make (``analysis.stats`` computes it) — plain types, no numpy, so the
store's records and the CLI can name it without importing the statistics stack."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Call = Literal["slower", "faster", "within noise", "noisy", "n/a"]
BandSource = Literal["calibration", "within-run"]


@dataclass(frozen=True)
class CaseStats:
    """The statistics of one case. ``ratio`` = median(head) / median(base); ``ci_low``/``ci_high`` its
    bootstrap interval (an end is None where it is not finite: a side with values <= 0 resampled to a median of 0);
    ``p_value`` Mann–Whitney U (two-sided); ``q_value`` the BH-adjusted p-value (None until
    ``call_cases`` adjusts a whole comparison); ``band`` the relative noise half-width and ``band_source`` where
    it came from; ``call`` the verdict; ``n_base``/``n_head`` the sample counts."""

    ratio: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    q_value: float | None
    band: float
    band_source: BandSource
    call: Call
    n_base: int
    n_head: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
