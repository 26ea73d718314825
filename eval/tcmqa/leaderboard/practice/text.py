"""Text for the Practitioners tab (Markdown; the Space's app only wires it): the item's stem, the block's
report and its item-by-item review, the console's notes."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from tcmqa.leaderboard import lang
from tcmqa.leaderboard.practice.assignment import ItemView

_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~=])")


def plain(text: str | None) -> str:
    """``text`` shown as written in Markdown: every markup character escaped, line breaks kept."""
    escaped = _MARKDOWN.sub(r"\\\1", (text or "").strip())
    return "  \n".join(escaped.splitlines())


def item_markdown(view: ItemView) -> str:
    """The item's stem as plain text in its original Chinese: no heading, and no options (the answer
    buttons show them, once). Never the answer."""
    return plain(view.question)


def _table(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "_none_"
    head = "| " + " | ".join(map(str, frame.columns)) + " |\n|" + "---|" * len(frame.columns)
    body = [
        "| " + " | ".join("" if pd.isna(v) else str(v) for v in row) + " |" for row in frame.itertuples(index=False)
    ]
    return "\n".join([head, *body])


def _short_revisions(frame: pd.DataFrame) -> pd.DataFrame:
    """Commit shas cut to 12 characters, as the Queue shows them."""
    if "revision" not in frame.columns:
        return frame
    return frame.assign(revision=frame["revision"].map(lambda v: v[:12] if isinstance(v, str) else v))


def report_markdown(report: dict[str, Any]) -> str:
    """The practitioner's own results once the block is complete."""
    by_domain = report["by_domain"].assign(domain=lambda f: f["domain"].map(lang.domain))  # names, not keys
    agreement = "n/a (no other rater yet)" if report["agreement"] is None else f"{report['agreement']:.1f}%"
    return (
        f"## Block {report['number']} complete: thank you\n\n"
        f"**Your accuracy** against the reference answers: **{report['accuracy']:.1f}%** on {report['items']} items. "
        f"**Agreement with the other raters** (same answer set): {agreement}.\n\n"
        f"### By domain\n\n{_table(by_domain)}\n\n"
        f"### The models on the same items\n\n{_table(_short_revisions(report['models']))}"
    )


def _letters(letters: Sequence[str] | None) -> str:
    return ", ".join(letters) if letters else "—"


def review_markdown(rows: Sequence[Mapping[str, Any]]) -> str:
    """The block item by item, once it is complete: the stem, the options, the practitioner's answer,
    the reference answer, the explanation and what each model answered.

    Each row: ``position`` (1-based), ``question``, ``options`` (letter -> text), ``selected``,
    ``answer`` (letters), ``explanation``, ``models`` (model -> letters it predicted).
    """
    if not rows:
        return ""
    parts = []
    for row in rows:
        selected, answer = list(row["selected"]), list(row["answer"])
        mark = "✓ right" if selected == answer else "✗ wrong"
        options = "  \n".join(f"**{k}.** {plain(v)}" for k, v in row["options"].items())
        models = row.get("models") or {}
        said = (
            "; ".join(
                f"{plain(model)}: {_letters(letters)} {'✓' if list(letters or []) == answer else '✗'}"
                for model, letters in sorted(models.items())
            )
            if models
            else "no model has been evaluated on this item yet"
        )
        explanation = plain(row.get("explanation")) or "_no explanation in the corpus_"
        parts.append(
            f"**{row['position']}.** {plain(row['question'])}\n\n{options}\n\n"
            f"**Your answer:** {_letters(selected)} ({mark}) · **Reference:** {_letters(answer)}\n\n"
            f"**Explanation:** {explanation}\n\n**The models:** {said}"
        )
    return "## Item by item\n\n" + "\n\n---\n\n".join(parts)
