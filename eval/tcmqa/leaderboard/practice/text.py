"""Text for the Practitioners tab (Markdown; the Space's app only wires it): the item screen, the report."""

from __future__ import annotations

from typing import Any

import pandas as pd

from tcmqa.leaderboard.practice.assignment import ItemView


def item_markdown(view: ItemView) -> str:
    """The item's screen: the stem in its original Chinese and the five options (never the answer)."""
    options = "\n".join(f"- **{k}.** {v}" for k, v in view.options.items())
    return f"### {view.question}\n\n{options}"


def _table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "_none_"
    head = "| " + " | ".join(map(str, frame.columns)) + " |\n|" + "---|" * len(frame.columns)
    body = [
        "| " + " | ".join("" if pd.isna(v) else str(v) for v in row) + " |" for row in frame.itertuples(index=False)
    ]
    return "\n".join([head, *body])


def report_markdown(report: dict[str, Any]) -> str:
    """The practitioner's own results once the block is complete."""
    agreement = "n/a (no other rater yet)" if report["agreement"] is None else f"{report['agreement']:.1f}%"
    return (
        f"## Block {report['block']} complete: thank you\n\n"
        f"**Your accuracy** against the reference answers: **{report['accuracy']:.1f}%** on {report['items']} items. "
        f"**Agreement with the other raters** (same answer set): {agreement}.\n\n"
        f"### By domain\n\n{_table(report['by_domain'])}\n\n"
        f"### The models on the same items\n\n{_table(report['models'])}"
    )
