"""One model's page: its accuracy beside the practitioners' on the same subset items, by domain, by
practitioner-rated difficulty and by practitioner consensus (the paper's per-domain, difficulty and
consensus figures for one model), and its calibration and probe columns where its results row has them.

Pure pandas and matplotlib (no gradio): :func:`model_page` takes the model's run (``item_id``,
``correct``), the ``subset`` config's rows and its results row; :class:`ModelPages` reads them where they
lie (the model's one run, :meth:`tcmqa.leaderboard.model_outputs.ModelOutputs.of`; the subset as
practitioner mode builds it, else the data's ``subset`` config; the row from the store's results).

* Items: the subset items the run scored (flagged items are never scored). The practitioners' figure
  on the same items is their majority vote (by domain, by difficulty); by consensus it is the mean
  rater's accuracy, k/N by construction, as in the paper.
* Domain: an item counts in each domain any of its raters gave it (the paper's rule).
* Difficulty: the median of the item's raters' ratings (:func:`tcmqa.figures._item_rating`, the paper's
  figure's rule); 0 where no rater rated it.
* The figures are the paper's own drawings (:mod:`tcmqa.figures`) fed one model's data.

Only aggregates over items are shown, never an item, so nothing here can give away an open block's answer.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.gridspec import GridSpec

from tcmqa import figures, passmark
from tcmqa.data import has_config, load_config
from tcmqa.errata import data_errata
from tcmqa.leaderboard import empty, formats, lang
from tcmqa.leaderboard.compare import UNRATED, Comparator
from tcmqa.leaderboard.scale import Scale, Scales
from tcmqa.rescore import corrected
from tcmqa.results import PROBE_COLUMNS
from tcmqa.schema import DOMAINS, RESULT_COLUMNS
from tcmqa.tables import DIFFICULTY_LEVELS

CALIBRATION = ("ece", "acc_top10", "acc_coverage_area")
PROBES = tuple(
    c for c in PROBE_COLUMNS if c not in ("order_excluded", "probe_version")
)  # the values, not the bookkeeping
PRACTITIONERS = "Practitioners (majority)"
_COLUMNS = {c.name: c for c in RESULT_COLUMNS}


def _percent(values: pd.Series) -> float:
    return 100 * float(values.mean()) if len(values) else float("nan")


def _side_by_side(frame: pd.DataFrame, key: str, keys: Sequence[Any], human: str = "majority_correct") -> pd.DataFrame:
    """Per value of ``key`` (in the order of ``keys``): n, the model's and the practitioners' accuracy, percent."""
    rows = []
    for value in keys:
        mine = frame[frame[key] == value]
        rows.append(
            {key: value, "n": len(mine), "model %": _percent(mine["correct"]), "practitioners %": _percent(mine[human])}
        )
    out = pd.DataFrame(rows, columns=[key, "n", "model %", "practitioners %"])
    out[["model %", "practitioners %"]] = out[["model %", "practitioners %"]].astype(float).round(1)
    return out


def _facts(row: dict[str, Any] | None, names: Sequence[str]) -> pd.DataFrame:
    """The results row's values of ``names`` that exist, as (measure, value, meaning) rows."""
    found = [
        {
            "measure": _COLUMNS[n].label,
            "value": formats.rounded(row[n], formats.field_kind(n)),  # each row its own kind (a p-value, a percent)
            "meaning": _COLUMNS[n].doc,
        }
        for n in names
        if row and row.get(n) is not None and not (isinstance(row[n], float) and np.isnan(row[n]))
    ]
    return pd.DataFrame(found, columns=["measure", "value", "meaning"])


def _values(frame: pd.DataFrame, column: str) -> list[float | None]:
    """A table column as a drawing takes it: None for no value."""
    return [None if pd.isna(v) else float(v) for v in frame[column]]


@dataclasses.dataclass(frozen=True)
class ModelPage:
    """One model beside the practitioners (the module doc)."""

    model: str
    n_items: int  # items the run scored
    n_subset: int  # of them in the subset
    by_domain: pd.DataFrame  # domain (a key; the page shows its name), n, model %, practitioners %
    by_difficulty: pd.DataFrame  # difficulty, n, model %, practitioners %
    by_consensus: pd.DataFrame  # practitioners correct ("k/N"), n, model %, practitioners %
    calibration: pd.DataFrame  # measure, value, meaning
    probes: pd.DataFrame  # measure, value, meaning
    subset_items: int = 0  # items in the subset as it stands (the model's or not)
    scale: pd.DataFrame = dataclasses.field(default_factory=lambda: pd.DataFrame(columns=SCALE_COLUMNS))
    passes: pd.DataFrame = dataclasses.field(default_factory=lambda: pd.DataFrame(columns=PASS_COLUMNS))
    errata: int = 0  # the served data's errata its run was scored under (rescored from its predictions)

    def summary(self) -> str:
        """What the page is on; where a part of it is empty, why and what to do (:mod:`tcmqa.leaderboard.empty`)."""
        if not self.n_items:
            return f"**{self.model}** has no outputs here."
        keys = f" Scored on the corpus's current keys ({self.errata} errata applied)." if self.errata else ""
        if not self.n_subset:
            text = empty.no_subset_items(self.model, self.n_items, self.subset_items)
        else:
            text = (
                f"**{self.model}**: {self.n_items:,} items scored, {self.n_subset:,} of them in the practitioners' "
                f"subset (the tables below are on those).{keys}"
            )
        facts = empty.no_facts(self.model, not self.calibration.empty, not self.probes.empty)
        return f"{text}\n\n{facts}" if facts else text

    def domain_figure(self) -> Figure:
        domains = self.by_domain[(self.by_domain["domain"] != UNRATED) & (self.by_domain["n"] > 0)]  # no gaps
        series = {PRACTITIONERS: _values(domains, "practitioners %"), self.model: _values(domains, "model %")}
        title = f"{self.model}: per-domain accuracy against the practitioners"
        return _closed(
            figures.accuracy_by_domain_draw(  # English names: the figures have no CJK font
                {"title": title, "domains": [lang.domain(k, "en") for k in domains["domain"]], "series": series}
            )
        )

    def difficulty_figure(self) -> Figure:
        levels = self.by_difficulty[self.by_difficulty["difficulty"] != 0]
        d = {
            "title": f"{self.model}: accuracy across practitioner-rated difficulty",
            "levels": [int(v) for v in levels["difficulty"]],
            "n_items": [int(v) for v in levels["n"]],
            "practitioner": _values(levels, "practitioners %"),
            "models": {self.model: _values(levels, "model %")},
        }
        return _closed(_named(figures.accuracy_by_difficulty_draw(d), self.model))

    def consensus_figure(self) -> Figure:
        """The consensus levels of the most common N (raters per item) only: one x axis of 0..N."""
        counts = self.by_consensus.assign(raters=self.by_consensus["practitioners correct"].str.split("/").str[1])
        raters = int(counts.groupby("raters")["n"].sum().idxmax()) if len(counts) else 3
        levels = counts[counts["raters"] == str(raters)]
        model = _values(levels, "model %")
        d = {
            "title": f"{self.model}: accuracy by practitioner consensus",
            "levels": list(range(raters + 1)),
            "raters": raters,
            "n_items": [int(v) for v in levels["n"]],
            "practitioner": _values(levels, "practitioners %"),
            "models": {self.model: model},
            "all_missed": {self.model: model[0] if model else None},
        }
        figure = figures.accuracy_by_consensus_draw(d)
        figure.delaxes(figure.axes[1])  # the paper's second panel (one bar per model) is the 0/N row here
        figure.axes[0].set_subplotspec(GridSpec(1, 1, figure=figure)[0])
        figure.set_size_inches(7.5, 4.8)
        return _closed(_named(figure, self.model))


def _named(figure: Figure, model: str) -> Figure:
    """The paper's drawings leave the models' lines unnamed (there are many): name the one model's line, in
    the legend, and leave room above 100% for a line there."""
    ax = figure.axes[0]
    for line in ax.get_lines():
        if line.get_label().startswith("_"):
            line.set_label(model)
    ax.set_ylim(0, 104)
    ax.legend(fontsize=8)
    figure.tight_layout()
    return figure


def _closed(figure: Figure) -> Figure:
    """The figure, let go by pyplot (it still draws): a page per request must not pile figures up."""
    plt.close(figure)
    return figure


def model_page(model: str, run: pd.DataFrame, subset: pd.DataFrame, row: dict[str, Any] | None = None) -> ModelPage:
    """One model's page from its run (``item_id``, ``correct``), the ``subset`` rows (``item_id``,
    ``n_raters``, ``n_correct``, ``majority_correct``, ``rater_domains``, ``rater_difficulty``) and its
    results row (None: no calibration or probe columns)."""
    run = run[["item_id", "correct"]].assign(correct=run["correct"].astype(bool))
    on = run.merge(subset, on="item_id")
    on["majority_correct"] = on["majority_correct"].astype(bool)
    on["domain"] = on["rater_domains"].map(
        lambda raters: sorted({d for r in raters if r is not None for d in r}) or [UNRATED]
    )
    domains = on.explode("domain")
    keys = [*DOMAINS, *([UNRATED] if (domains["domain"] == UNRATED).any() else [])]
    by_domain = _side_by_side(domains, "domain", keys)
    on["difficulty"] = figures._item_rating(on) if len(on) else pd.Series(dtype=int)
    levels = [*([0] if (on["difficulty"] == 0).any() else []), *DIFFICULTY_LEVELS]
    by_difficulty = _side_by_side(on, "difficulty", levels)
    on["consensus"] = on["n_correct"].astype(int).astype(str) + "/" + on["n_raters"].astype(int).astype(str)
    on["rater_share"] = on["n_correct"].astype(int) / on["n_raters"].astype(int)
    counts = sorted({int(n) for n in on["n_raters"]}) or [3]
    consensus = [f"{k}/{n}" for n in counts for k in range(n + 1)]
    by_consensus = _side_by_side(on, "consensus", consensus, human="rater_share")
    by_consensus = by_consensus.rename(columns={"consensus": "practitioners correct"})
    return ModelPage(
        model,
        len(run),
        len(on),
        by_domain,
        by_difficulty,
        by_consensus,
        _facts(row, CALIBRATION),
        _facts(row, PROBES),
        subset["item_id"].nunique(),
    )


class ModelPages:
    """Model pages over the data the Space serves and its store. ``source``: the :class:`Comparator`
    (corpus and runs); ``practice``: the Space's ``PracticeLoader`` when practitioner mode is on."""

    def __init__(
        self,
        source: Comparator,
        practice: Any = None,
        scales: Scales | None = None,
        pass_mark: float = passmark.PASS_MARK,
    ):
        self.source, self.practice = source, practice
        self.scales, self.pass_mark = scales, passmark.check_mark(pass_mark)
        self._published_subset: pd.DataFrame | None = None

    def subset(self) -> pd.DataFrame:
        """The subset as it stands: practitioner mode's (cached by it on the practice version), else the data's."""
        if self.practice is not None:
            return pd.DataFrame(self.practice.get().configs()["subset"], columns=SUBSET_COLUMNS)
        if self._published_subset is None:
            data = self.source.data
            rows = load_config(data, "subset").to_pandas() if has_config(data, "subset") else None
            self._published_subset = rows if rows is not None else pd.DataFrame(columns=SUBSET_COLUMNS)
        return self._published_subset

    def results_row(self, model: str) -> dict[str, Any] | None:
        """The model's results row of the run its outputs come from (same revision), else its latest row."""
        run = self.source.outputs.runs().get(model)
        rows = [r for r in self.source.store.results() if r.get("model") == model]
        same = [r for r in rows if run is not None and str(r.get("revision") or "") == run.revision]
        return (same or rows or [None])[-1]

    @functools.cached_property
    def errata(self) -> list[dict[str, Any]]:
        """The served data's errata (none for a corpus never corrected)."""
        return data_errata(self.source.data)

    def page(self, model: str) -> ModelPage:
        """The model's page on its scored items (a run's rows on flagged items are not scored), its run scored on
        the served keys (:func:`tcmqa.rescore.corrected`: a run made before the errata is rescored from its
        stored predictions)."""
        columns = ["item_id", "correct", *(["prediction"] if self.errata else [])]
        run = corrected(self.source.outputs.of(model, columns), self.errata)
        corpus = self.source.corpus
        run = run[run["item_id"].isin(set(corpus.loc[~corpus["flagged"].astype(bool), "id"]))]
        row = self.results_row(model)
        page = model_page(model, run, self.subset(), row)
        chosen = self.source.outputs.runs().get(model)
        latest = self.scales.latest if self.scales is not None else None
        return dataclasses.replace(
            page,
            errata=len(self.errata),
            scale=on_scale(model, chosen.revision if chosen else None, latest),
            passes=pass_scopes(run, corpus, row, self.pass_mark) if len(run) else page.passes,
        )


SCALE_COLUMNS = ["measure", "value", "meaning"]
PASS_COLUMNS = ["scope", "items", "accuracy %", "passes"]
NOT_ON_SCALE = (
    "not fitted yet: the scale is fitted in the background over the comparable models (full coverage, the served "
    "data) and the practitioners"
)


def pass_scopes(
    run: pd.DataFrame, corpus: pd.DataFrame, row: dict[str, Any] | None, mark: float = passmark.PASS_MARK
) -> pd.DataFrame:
    """The model's pass at ``mark`` on its scored items (``run``: ``item_id``, ``correct``), on fresh items where
    its results row has them, and in each unit (the corpus's domains): :data:`PASS_COLUMNS`."""
    domains = corpus.set_index("id")["domains"].reindex(run["item_id"]).tolist()
    right = run["correct"].astype(bool).to_numpy()[:, None]
    fresh = None
    if row and row.get("fresh") is not None and not pd.isna(row["fresh"]):
        fresh = pd.DataFrame([{"model": "m", "n_items": int(row.get("n_fresh") or 0), "accuracy": row["fresh"]}])
    table = passmark.pass_rows(["m"], np.ones_like(right), right, domains, mark, fresh)
    scope = table["scope"].map(
        lambda s: (
            {"full": "full corpus", "fresh": "fresh items"}.get(s)
            or f"unit: {DOMAINS[s.removeprefix('domain:')]} ({s.removeprefix('domain:')})"
        )
    )
    return pd.DataFrame(
        {
            "scope": scope,
            "items": table["n_items"],
            "accuracy %": table["accuracy"].round(2),
            "passes": table["passes"].map({True: passmark.YES, False: passmark.NO}),
        },
        columns=PASS_COLUMNS,
    )


def on_scale(model: str, revision: str | None, latest: Scale | None) -> pd.DataFrame:
    """The model's ability and its SE on the one scale (:data:`SCALE_COLUMNS`); empty when not fitted."""
    models = latest.abilities[latest.abilities["kind"] == "model"] if latest is not None else pd.DataFrame()
    mine = models[models["name"] == model] if len(models) else models
    if revision is not None and len(mine) and (mine["revision"] == revision).any():
        mine = mine[mine["revision"] == revision]
    if latest is None or mine.empty:
        return pd.DataFrame([("Ability", "", NOT_ON_SCALE)], columns=SCALE_COLUMNS)
    theta, se = float(mine["theta"].iloc[-1]), float(mine["theta_se"].iloc[-1])
    people = latest.practitioners()["theta"]
    rows = [
        ("Ability", round(theta, 2), "on the one scale of the comparable models and the practitioners (2PL)"),
        ("Ability SE", round(se, 2), "its standard error"),
        ("Models below", f"{int((models['theta'] < theta).sum())} of {len(models) - 1}", "comparable models"),
    ]
    if len(people):
        rows.append(("Practitioners below", f"{int((people < theta).sum())} of {len(people)}", "each on their items"))
    return pd.DataFrame(rows, columns=SCALE_COLUMNS)


SUBSET_COLUMNS = ["item_id", "n_raters", "n_correct", "majority_correct", "rater_domains", "rater_difficulty"]
