"""The paper's figures, each named for what it shows and registered in ``FIGURES`` under its number.

A figure is a data function (Study -> JSON-ready dict) and a draw function (that dict, with the
``"title"`` :meth:`PaperFigure.make` adds -> matplotlib Figure). Drawing only from the dict means the
JSON written next to each PNG is exactly what was plotted, so the Space can redraw any figure from the
JSON without the 1.1 M output rows. Labels use the English domain keys: the machines this runs on
have no CJK font.

>>> spec = FIGURES["fig8_quadrants"]
>>> spec.number, spec.data.__name__, spec.draw.__name__
(8, 'outcome_quadrants_data', 'outcome_quadrants_draw')
>>> spec.full_title()
'Figure 8. Outcomes against the practitioner majority'
>>> spec.full_title("SIMULATED")
'[SIMULATED] Figure 8. Outcomes against the practitioner majority'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from tcmqa import tables
from tcmqa.results import MARGIN_CAP_QUANTILE as CAP_QUANTILE
from tcmqa.results import confidence_gap
from tcmqa.schema import DOMAINS
from tcmqa.study import Study

MARGIN_BINS = 8


def _num(values) -> list:
    """JSON-safe floats: NaN becomes null."""
    return [None if v is None or (isinstance(v, float) and np.isnan(v)) else round(float(v), 4) for v in values]


def _board(study: Study) -> dict:
    board = tables.leaderboard(study)
    return {
        "models": board["model"].tolist(),
        "families": board["family"].tolist(),
        "params_b": _num(board["params_b"].astype(float)),
        "full": _num(board["full"]),
        "single": _num(board["single"]),
        "multi": _num(board["multi"]),
        "subset": _num(board["subset"]),
    }


def accuracy_by_answer_type_data(study: Study) -> dict:
    return _board(study)


def accuracy_by_answer_type_draw(d: dict) -> Figure:
    n = len(d["models"])
    fig, ax = plt.subplots(figsize=(_span(0.45 * n + 2, 6), 4.5))
    x = np.arange(n)
    for k, (key, color) in enumerate((("full", "#4c72b0"), ("single", "#55a868"), ("multi", "#c44e52"))):
        ax.bar(x + (k - 1) * 0.27, _nan(d[key]), 0.27, label=key.capitalize(), color=color)
    ax.set_xticks(x, d["models"], rotation=75, ha="right", fontsize=7)
    ax.set_ylabel("Exact match (%)")
    ax.legend()
    return _finish(fig, ax, d["title"])


def accuracy_by_size_data(study: Study) -> dict:
    board = _board(study)
    lines: dict[str, dict] = {}
    for model, family, params, full in zip(board["models"], board["families"], board["params_b"], board["full"]):
        if params and params > 0 and full is not None:  # a log axis needs a positive size
            line = lines.setdefault(family, {"models": [], "params_b": [], "full": []})
            line["models"].append(model), line["params_b"].append(params), line["full"].append(full)
    return {"families": lines}


def accuracy_by_size_draw(d: dict) -> Figure:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for family, line in d["families"].items():
        order = np.argsort(line["params_b"])
        ax.plot(np.array(line["params_b"])[order], np.array(line["full"])[order], marker="o", label=family)
    ax.set_xscale("log")
    ax.set_xlabel("Parameters (B, log scale)")
    ax.set_ylabel("Full accuracy (%)")
    if d["families"]:
        ax.legend(fontsize=7, ncol=2)
    return _finish(fig, ax, d["title"])


def multi_answer_overlap_data(study: Study) -> dict:
    t = tables.multi_answer(study)
    return {
        "models": t["model"].tolist(),
        "precision": _num(t["precision"]),
        "recall": _num(t["recall"]),
        "f1": _num(t["f1"]),
        "mean_pred_size": _num(t["mean_pred_size"]),
        "n_multi": int(study.multi.sum()),
    }


def multi_answer_overlap_draw(d: dict) -> Figure:
    n = len(d["models"])
    fig, ax = plt.subplots(figsize=(_span(0.45 * n + 2, 6), 4.5))
    x = np.arange(n)
    for k, key in enumerate(("precision", "recall", "f1")):
        ax.bar(x + (k - 1) * 0.27, _nan(d[key]), 0.27, label=key.upper() if key == "f1" else key.capitalize())
    ax.set_xticks(x, d["models"], rotation=75, ha="right", fontsize=7)
    ax.set_ylabel(f"% on {d['n_multi']} multi-answer items")
    ax.legend()
    return _finish(fig, ax, d["title"])


def models_vs_practitioners_data(study: Study) -> dict:
    board = tables.leaderboard(study).sort_values("subset", ascending=False)
    return {
        "models": board["model"].tolist(),
        "families": board["family"].tolist(),
        "subset": _num(board["subset"]),
        "human": _num([tables.human_reference(study)])[0],
        "n_items": int((study.subset_rows >= 0).sum()),
    }


def models_vs_practitioners_draw(d: dict) -> Figure:
    n = len(d["models"])
    fig, ax = plt.subplots(figsize=(_span(0.45 * n + 2, 6), 4.5))
    human = d["human"] if d["human"] is not None else np.nan
    colors = ["#4c72b0" if (v or 0) > human else "#8c8c8c" for v in d["subset"]]
    ax.bar(np.arange(n), _nan(d["subset"]), color=colors)
    ax.axhline(human, ls="--", color="#c44e52", label=f"Practitioner majority {human:.2f}%")
    ax.set_xticks(np.arange(n), d["models"], rotation=75, ha="right", fontsize=7)
    ax.set_ylabel(f"Accuracy on {d['n_items']} subset items (%)")
    ax.legend()
    return _finish(fig, ax, d["title"])


def accuracy_by_domain_data(study: Study) -> dict:
    """Per-domain accuracy: practitioner majority and the best model (by subset accuracy) of each family."""
    rows, subset = tables.subset_view(study)
    assigned = subset["rater_domains"].map(lambda raters: {d for r in raters for d in r})
    board = tables.leaderboard(study)
    best = board.sort_values("subset", ascending=False).dropna(subset=["subset"]).drop_duplicates("family")
    column = {name: j for j, name in enumerate(study.model_names)}
    series = {"Practitioners (majority)": [], **{m: [] for m in best["model"]}}
    for key in DOMAINS:
        mask = assigned.map(lambda s, key=key: key in s).to_numpy()
        series["Practitioners (majority)"].append(
            100 * subset.loc[mask, "majority_correct"].mean() if mask.any() else np.nan
        )
        acc = tables.accuracy(study, rows[mask]) if mask.any() else np.full(len(column), np.nan)
        for model in best["model"]:
            series[model].append(acc[column[model]])
    return {"domains": list(DOMAINS), "series": {k: _num(v) for k, v in series.items()}}


def accuracy_by_domain_draw(d: dict) -> Figure:
    angles = np.linspace(0, 2 * np.pi, len(d["domains"]), endpoint=False)
    fig, ax = plt.subplots(figsize=(7.5, 7), subplot_kw={"polar": True})
    for name, values in d["series"].items():
        v = np.append(_nan(values), _nan(values)[:1])
        human = name.startswith("Practitioners")
        ax.plot(
            np.append(angles, angles[:1]),
            v,
            lw=2.5 if human else 1.2,
            ls="--" if human else "-",
            color="black" if human else None,
            label=name,
        )
    ax.set_xticks(angles, [k.replace("_", " ") for k in d["domains"]], fontsize=8)
    ax.set_ylim(0, 100)
    ax.legend(fontsize=7, loc="upper right", bbox_to_anchor=(1.35, 1.1))
    ax.set_title(d["title"])
    fig.tight_layout()
    return fig


def accuracy_by_consensus_data(study: Study) -> dict:
    """Model accuracy by number of practitioners correct (0..N), and on the items all N missed."""
    rows, subset = tables.subset_view(study)
    raters = tables.subset_raters(subset)
    n_correct = subset["n_correct"].to_numpy(dtype=int)
    levels = list(range(raters + 1))
    per_level = [tables.accuracy(study, rows[n_correct == k]) for k in levels]
    return {
        "levels": levels,
        "raters": raters,
        "n_items": [int((n_correct == k).sum()) for k in levels],
        "practitioner": [100 * k / raters for k in levels],  # mean rater accuracy, by construction
        "models": {m: _num([acc[j] for acc in per_level]) for j, m in enumerate(study.model_names)},
        "all_missed": {m: _num([per_level[0][j]])[0] for j, m in enumerate(study.model_names)},
    }


def accuracy_by_consensus_draw(d: dict) -> Figure:
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8), gridspec_kw={"width_ratios": [1.2, 1]})
    for _model, values in d["models"].items():
        left.plot(d["levels"], _nan(values), marker=".", lw=1, alpha=0.8)
    left.plot(d["levels"], d["practitioner"], "k--", lw=2, label="Practitioners (mean rater)")
    left.set_xticks(d["levels"], [f"{k}/{d['raters']}\n(n={n})" for k, n in zip(d["levels"], d["n_items"])])
    left.set_xlabel("Practitioners correct")
    left.set_ylabel("Model accuracy (%)")
    left.set_ylim(0, 100)
    left.legend(fontsize=8)
    order = sorted(d["all_missed"], key=lambda m: d["all_missed"][m] or 0)
    right.barh(order, [d["all_missed"][m] or 0 for m in order], color="#c44e52")
    right.set_xlim(0, 100)
    right.tick_params(axis="y", labelsize=6)
    right.set_xlabel(f"Accuracy on the {d['n_items'][0]} items all {d['raters']} raters missed (%)")
    fig.suptitle(d["title"])
    fig.tight_layout()
    return fig


def _item_rating(subset) -> np.ndarray:
    """An item's difficulty level: the median of its raters' ratings (0 where none was given)."""
    return (
        subset["rater_difficulty"]
        .map(lambda r: int(np.median([x for x in r if x is not None])) if any(x is not None for x in r) else 0)
        .to_numpy()
    )


def accuracy_by_difficulty_data(study: Study) -> dict:
    rows, subset = tables.subset_view(study)
    level = _item_rating(subset)
    levels = list(tables.DIFFICULTY_LEVELS)
    per_level = [tables.accuracy(study, rows[level == k]) for k in levels]
    majority = subset["majority_correct"].to_numpy()
    return {
        "levels": levels,
        "n_items": [int((level == k).sum()) for k in levels],
        "practitioner": _num([100 * majority[level == k].mean() if (level == k).any() else np.nan for k in levels]),
        "models": {m: _num([acc[j] for acc in per_level]) for j, m in enumerate(study.model_names)},
    }


def accuracy_by_difficulty_draw(d: dict) -> Figure:
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for _model, values in d["models"].items():
        ax.plot(d["levels"], _nan(values), marker=".", lw=1, alpha=0.8)
    ax.plot(d["levels"], _nan(d["practitioner"]), "k--", lw=2.5, label="Practitioners (majority)")
    ax.set_xticks(d["levels"], [f"{k}\n(n={n})" for k, n in zip(d["levels"], d["n_items"])])
    ax.set_xlabel("Difficulty rating (1 easiest, 5 hardest)")
    ax.set_ylabel("Accuracy (%)")
    ax.set_ylim(0, 100)
    ax.legend(fontsize=8)
    return _finish(fig, ax, d["title"])


def outcome_quadrants_data(study: Study) -> dict:
    """Outcome quadrants of each model against the practitioner majority, as % of subset items."""
    rows, subset = tables.subset_view(study)
    human = subset["majority_correct"].to_numpy(dtype=bool)[:, None]
    covered, model = study.covered[rows], study.correct[rows]
    n = np.maximum(covered.sum(axis=0), 1)
    cells = {
        "both": model & human,
        "neither": ~model & ~human,
        "model_only": model & ~human,
        "practitioners_only": ~model & human,
    }
    shares = {k: 100 * (v & covered).sum(axis=0) / n for k, v in cells.items()}
    order = np.argsort(tables.accuracy(study, rows))
    return {"models": [study.model_names[j] for j in order], **{k: _num(v[order]) for k, v in shares.items()}}


def outcome_quadrants_draw(d: dict) -> Figure:
    n = len(d["models"])
    fig, ax = plt.subplots(figsize=(8, _span(0.3 * n + 1.5, 3)))
    left = np.zeros(n)
    colors = {"both": "#55a868", "model_only": "#4c72b0", "practitioners_only": "#dd8452", "neither": "#bbbbbb"}
    for key, color in colors.items():
        values = _nan(d[key])
        ax.barh(d["models"], values, left=left, color=color, label=key.replace("_", " "))
        if key in ("model_only", "practitioners_only"):
            for y, (x, v) in enumerate(zip(left, values)):
                ax.text(x + v / 2, y, f"{v:.0f}", ha="center", va="center", fontsize=6)
        left += np.nan_to_num(values)
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("% of subset items")
    ax.legend(fontsize=7, ncol=4, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    fig.suptitle(d["title"], y=1.0)
    fig.tight_layout()
    return fig


def accuracy_by_margin_data(study: Study) -> dict:
    """Accuracy by margin bins (quantile bins per model), grouped by family."""
    families: dict[str, dict] = {}
    for j, (model, family) in enumerate(zip(study.model_names, study.models["family"])):
        cov = study.covered[:, j]
        margin, correct = study.margin[cov, j].astype(float), study.correct[cov, j]
        if len(margin) < MARGIN_BINS:
            continue
        edges = np.unique(np.quantile(margin, np.linspace(0, 1, MARGIN_BINS + 1)))
        n_bins = max(len(edges) - 1, 1)  # a constant margin makes one bin
        bins = np.clip(np.searchsorted(edges, margin, side="right") - 1, 0, n_bins - 1)
        counts = np.bincount(bins, minlength=n_bins)
        ok = counts > 0
        mids = np.bincount(bins, margin, minlength=len(counts))[ok] / counts[ok]
        acc = 100 * np.bincount(bins, correct, minlength=len(counts))[ok] / counts[ok]
        families.setdefault(family, {})[model] = {"margin": _num(mids), "accuracy": _num(acc), "n": counts[ok].tolist()}
    return {"families": families}


def accuracy_by_margin_draw(d: dict) -> Figure:
    fams = list(d["families"])
    cols = min(3, max(len(fams), 1))
    rows = -(-max(len(fams), 1) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False)
    for ax, family in zip(axes.flat, fams):
        for model, line in d["families"][family].items():
            ax.plot(line["margin"], _nan(line["accuracy"]), marker=".", label=model)
        ax.set_title(family, fontsize=9)
        ax.set_ylim(0, 100)
        ax.legend(fontsize=6)
        ax.set_xlabel("margin (nats)", fontsize=8)
    for ax in axes.flat[len(fams) :]:
        ax.set_visible(False)
    fig.suptitle(d["title"])
    fig.tight_layout()
    return fig


def overconfidence_data(study: Study) -> dict:
    """Accuracy against mean (capped) confidence on wrong answers, and the confidence gap."""
    acc, wrong, gap = [], [], []
    for j in range(len(study.models)):
        cov = study.covered[:, j]
        margin, correct = study.margin[cov, j].astype(float), study.correct[cov, j]
        capped = np.minimum(margin, np.quantile(margin, CAP_QUANTILE)) if len(margin) else margin
        acc.append(100 * correct.mean() if len(correct) else np.nan)
        wrong.append(capped[~correct].mean() if (~correct).any() else np.nan)
        gap.append(confidence_gap(margin, correct, CAP_QUANTILE) if len(margin) else np.nan)
    return {
        "models": study.model_names,
        "families": study.models["family"].tolist(),
        "accuracy": _num(acc),
        "wrong_confidence": _num(wrong),
        "gap": _num(gap),
        "cap_quantile": CAP_QUANTILE,
    }


def overconfidence_draw(d: dict) -> Figure:
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8))
    acc, wrong = _nan(d["accuracy"]), _nan(d["wrong_confidence"])
    left.scatter(wrong, acc)
    for name, x, y in zip(d["models"], wrong, acc):
        left.annotate(name, (x, y), fontsize=5)
    left.axvline(np.nanmedian(wrong), ls=":", color="grey")
    left.axhline(np.nanmedian(acc), ls=":", color="grey")
    left.set_xlabel("Mean confidence on wrong answers (nats)")
    left.set_ylabel("Accuracy (%)")
    order = np.argsort(np.nan_to_num(_nan(d["gap"])))
    right.barh(np.array(d["models"])[order], _nan(d["gap"])[order], color="#4c72b0")
    right.tick_params(axis="y", labelsize=6)
    right.set_xlabel("Confidence gap: right minus wrong (nats)")
    fig.suptitle(d["title"])
    fig.tight_layout()
    return fig


MAX_SPAN_IN = 150  # inches: at the report's 110 dpi 16,500 px, a quarter of what matplotlib can draw (65,536 px)


def _span(inches: float, least: float) -> float:
    """A side that grows with the number of models, capped: past ~330 models on one axis the bars narrow
    rather than the figure outgrowing what matplotlib can draw (a thousand-model study)."""
    return min(max(least, inches), MAX_SPAN_IN)


def _nan(values: list) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def _finish(fig: Figure, ax, title: str) -> Figure:
    ax.set_title(title)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


@dataclass(frozen=True)
class PaperFigure:
    """One of the paper's figures: its number and title there, and the two functions that make it."""

    number: int  # the figure's number in the paper (13 and 14 are Appendix B)
    title: str
    data: Callable[[Study], dict]
    draw: Callable[[dict], Figure]
    practitioners: bool = False  # drawn against the practitioners' subset: needs practitioner data

    def full_title(self, marker: str = "") -> str:
        """``Figure N. title``, led by ``[marker]`` when one is given (the report passes ``SIMULATED``)."""
        title = f"Figure {self.number}. {self.title}"
        return f"[{marker}] {title}" if marker else title

    def make(self, study: Study, marker: str = "") -> dict:
        """The figure's JSON-ready data, with its title; what ``draw`` takes."""
        return {"title": self.full_title(marker), **self.data(study)}


# file name (paper number and subject) -> figure, in the paper's order
FIGURES: dict[str, PaperFigure] = {
    "fig1_answer_type": PaperFigure(
        1, "Accuracy by answer type", accuracy_by_answer_type_data, accuracy_by_answer_type_draw
    ),
    "fig2_params": PaperFigure(2, "Accuracy against parameters", accuracy_by_size_data, accuracy_by_size_draw),
    "fig3_multi_answer": PaperFigure(
        3, "Multi-answer precision, recall and F1", multi_answer_overlap_data, multi_answer_overlap_draw
    ),
    "fig4_subset": PaperFigure(
        4,
        "Models against the practitioner majority (subset)",
        models_vs_practitioners_data,
        models_vs_practitioners_draw,
        practitioners=True,
    ),
    "fig5_domains": PaperFigure(
        5, "Per-domain accuracy", accuracy_by_domain_data, accuracy_by_domain_draw, practitioners=True
    ),
    "fig6_consensus": PaperFigure(
        6,
        "Accuracy by practitioner consensus",
        accuracy_by_consensus_data,
        accuracy_by_consensus_draw,
        practitioners=True,
    ),
    "fig7_difficulty": PaperFigure(
        7,
        "Accuracy across practitioner-rated difficulty (median of three ratings)",
        accuracy_by_difficulty_data,
        accuracy_by_difficulty_draw,
        practitioners=True,
    ),
    "fig8_quadrants": PaperFigure(
        8,
        "Outcomes against the practitioner majority",
        outcome_quadrants_data,
        outcome_quadrants_draw,
        practitioners=True,
    ),
    "fig13_margin": PaperFigure(
        13, "Accuracy by confidence margin (quantile bins)", accuracy_by_margin_data, accuracy_by_margin_draw
    ),
    "fig14_confidence": PaperFigure(
        14,
        "Overconfidence and the confidence gap (margins capped at the 99th percentile)",
        overconfidence_data,
        overconfidence_draw,
    ),
}
