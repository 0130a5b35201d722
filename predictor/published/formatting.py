"""How the published-run reports write a share: one place for every text and Markdown table."""
from __future__ import annotations

from typing import Optional


def pct(share: Optional[float]) -> str:
    """A share (0.873) as a percentage with one decimal ("87.3%"); "-" where there is none."""
    return "-" if share is None else f"{100 * share:.1f}%"
