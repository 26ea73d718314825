"""``tcmqa report``: every table and figure of the paper, regenerated from the configs.

Usage::

    tcmqa report --data DIR_OR_HUB_ID [--outputs RUN_OR_RUNS_DIR ...] [--errata FILE] --out REPORT_DIR

``--data`` is a tree written by ``tcmqa build`` (or ``tcmqa simulate``'s ``data/``) or a Hub id;
each ``--outputs`` is a run folder written by ``tcmqa eval`` (``outputs/part-*.parquet`` and
``results.json``) or a folder of such runs. Without ``--outputs`` (or when every run was computed on
other data) it writes the study's own report, the practitioners' side: Tables 1, 2, 3 and 6, the
majority vote on the subset, and Figures 5 and 7 with the practitioner series alone
(:data:`HUMAN_SIDE_FIGURES`); report.md names, under "Model tables and figures left out", every model
table and figure it did not compute and why. Its human-side numbers are those of a report made with
runs on the same data. Writes::

    REPORT_DIR/report.md            every table (Markdown) with the figures inlined
    REPORT_DIR/tables/<name>.csv    each table's numbers, unrounded
    REPORT_DIR/figures/<name>.png   each figure
    REPORT_DIR/figures/<name>.json  the exact data each figure was drawn from
    REPORT_DIR/suspect_keys.csv     every item ranked by the evidence that its key is wrong, with the
                                    reason (``tcmqa.suspects``: columns rank, item_id, score, key,
                                    alternative, the evidence's numbers, reason); report.md lists the
                                    first :data:`SUSPECTS_SHOWN`
    REPORT_DIR/tables/errata_rescore.csv  with ``--errata`` (a JSONL or Parquet file of errata, or the
                                    ``errata`` config folder of a tree rebuilt with them): every model
                                    and practitioner rescored from its stored answers under the errata
                                    (``tcmqa.rescore``): columns kind, name, key_revision_before/_after
                                    (data fingerprints of the keys scored on), n_/accuracy_before and
                                    _after, rank_before/_after and rank_change (models; positive: up),
                                    delta_human_before/_after (models, with a subset)
    REPORT_DIR/tables/errata_summary.csv  Kendall's tau of the models' ranking before and after (and
                                    its p-value) and the errata's error rate (items not found
                                    key_correct / items reviewed, percent) with its exact 95% interval;
                                    report.md's section "Rescored under the errata" shows both

Only runs computed on this data are compared: a run whose ``results.json`` records another data
fingerprint (or, recording none, with no output on a scored item here) is named in a warning and in
report.md under "Runs left out: computed on other data", and is in no table or figure. Two runs of
one model are told apart in every table and figure as ``model (engine)`` (``model (run folder)``
where the engine is the same). Over a tree without practitioner data (corpus only) the model tables
and figures are written and report.md names, under "Practitioner tables skipped", those it skipped.

Over a SIMULATED study (inputs written by ``tcmqa simulate``, see :func:`is_simulated`) report.md's
title, a banner under it and every figure's title (in its JSON, on the PNG and in the PNG's ``Title``
metadata) say SIMULATED.

Figures are named ``fig<N>_<subject>`` after the paper's figure number N; their titles begin
``Figure N.`` and ``tcmqa.figures.FIGURES`` maps each name to its data and draw functions. Figure
JSON (for the Space): one object per figure, always with ``"title"``; every number is a float
(percent 0-100, nats for margins) or null where undefined. Per figure:

* ``fig1_answer_type`` (``accuracy_by_answer_type``): ``models``, ``families``, ``params_b``,
  ``full``, ``single``, ``multi``, ``subset`` — parallel lists in board order (family, then size);
* ``fig2_params`` (``accuracy_by_size``): ``families`` -> {family: {``models``, ``params_b``, ``full``}};
* ``fig3_multi_answer`` (``multi_answer_overlap``): ``models``, ``precision``, ``recall``, ``f1``,
  ``mean_pred_size``, ``n_multi``;
* ``fig4_subset`` (``models_vs_practitioners``): ``models``, ``families``, ``subset`` (sorted high
  to low), ``human``, ``n_items``;
* ``fig5_domains`` (``accuracy_by_domain``): ``domains`` (English keys, Table 1 order), ``series`` ->
  {name: one value per domain}; the practitioner series is named "Practitioners (majority)";
* ``fig6_consensus`` (``accuracy_by_consensus``): ``levels`` [0..3], ``n_items``, ``practitioner``,
  ``models`` -> {model: per level}, ``all_missed`` -> {model: accuracy on items all three raters missed};
* ``fig7_difficulty`` (``accuracy_by_difficulty``): ``levels`` [1..5], ``n_items``, ``practitioner``,
  ``models`` -> {model: per level};
* ``fig8_quadrants`` (``outcome_quadrants``): ``models`` (low to high subset accuracy), ``both``,
  ``neither``, ``model_only``, ``practitioners_only`` (percent of subset items);
* ``fig13_margin`` (``accuracy_by_margin``, Appendix B): ``families`` -> {family: {model:
  {``margin``, ``accuracy``, ``n``}}};
* ``fig14_confidence`` (``overconfidence``, Appendix B): ``models``, ``families``, ``accuracy``,
  ``wrong_confidence``, ``gap``, ``cap_quantile``.

Importable for notebooks: ``load_study`` (tcmqa.study), the table functions (tcmqa.tables), the
figures (``tcmqa.figures.FIGURES[name].make(study)`` for the data, ``.draw(data)`` for the plot),
:func:`is_simulated` and :func:`write_report`.
"""

from __future__ import annotations

import argparse
import functools
import json
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tcmqa import tables
from tcmqa.data import load_config
from tcmqa.errata import read_errata
from tcmqa.figures import FIGURES
from tcmqa.outdir import replace_output
from tcmqa.outputs import RESULTS_FILE
from tcmqa.rescore import RESCORE_FILE, SUMMARY_FILE, Rescored, rescore
from tcmqa.simulate import SIMULATED
from tcmqa.study import Study, load_study, run_dirs
from tcmqa.suspects import audit

SUSPECTS_FILE = "suspect_keys.csv"
SUSPECTS_SHOWN = 20

RUNS_ON_OTHER_DATA = "Runs left out: computed on other data"
PRACTITIONER_TABLES_SKIPPED = "Practitioner tables skipped"
MODEL_TABLES_SKIPPED = "Model tables and figures left out"
REFUSED_BY_THE_DATA = "Tables and figures the data refuses"
REFUSED = "refused: "  # the reason of a skipped section whose table or figure raised ValueError


def is_simulated(data: str | Path, outputs: Sequence[str | Path] = ()) -> bool:
    """Whether any input was written by ``tcmqa simulate``.

    The simulator writes SIMULATED into every corpus ``source`` of its data tree, and ``simulated``
    into the ``revision`` and ``engine_version`` of every run's ``results.json``; real builds and
    real runs have neither. ``data`` is a built tree or a Hub id, ``outputs`` run folders or folders
    of runs (as ``tcmqa report`` takes them).
    """
    folder = Path(data).expanduser() / "corpus"
    if folder.is_dir():
        sources = pq.read_table(sorted(folder.glob("*.parquet")), columns=["source"])["source"]
    else:
        sources = load_config(data, "corpus").data.table["source"]
    if pc.any(pc.match_substring(sources, SIMULATED, ignore_case=True)).as_py():
        return True
    runs = run_dirs(list(outputs)) if outputs else []
    for run in runs:
        results = run / RESULTS_FILE
        meta = json.loads(results.read_text(encoding="utf-8")) if results.is_file() else {}
        if any(SIMULATED.lower() in str(meta.get(key) or "").lower() for key in ("revision", "engine_version")):
            return True
    return False


def markdown_table(frame: pd.DataFrame, digits: int = 2) -> str:
    """A pipe table; floats rounded to ``digits``, NaN shown as a dash."""

    def cell(v) -> str:
        if isinstance(v, (float, np.floating)):
            return "–" if np.isnan(v) else f"{v:,.{digits}f}"
        return f"{v:,}" if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else str(v)

    lines = ["| " + " | ".join(map(str, frame.columns)) + " |", "|" + " --- |" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)


# What a table or figure needs besides the corpus: practitioner responses, the subset, model runs.
RESPONSES_NEEDED, SUBSET_NEEDED, MODELS_NEEDED = "responses", "subset", "models"
# A section: (file name, short name for the skipped lists, what it needs, make -> (heading, table), digits)
SectionSpec = tuple[str, str, frozenset[str], Callable[[], tuple[str, pd.DataFrame]], int]
# Figures drawn against the practitioners that still stand with no model: their practitioner series
# (the majority vote by domain, by rated difficulty) is the human side. Figure 6 is not one: with no
# model its practitioner line is 0-100% by construction and its right panel empty (the consensus
# distribution it rests on is Table 6).
HUMAN_SIDE_FIGURES = frozenset({"fig5_domains", "fig7_difficulty"})


def figure_needs(name: str) -> frozenset[str]:
    """What figure ``name`` needs: the subset for the practitioners' figures, model runs for every figure
    but those whose practitioner series stands alone (:data:`HUMAN_SIDE_FIGURES`)."""
    figure = FIGURES[name]
    needs = {SUBSET_NEEDED} if figure.practitioners else set()
    if name not in HUMAN_SIDE_FIGURES:
        needs.add(MODELS_NEEDED)
    return frozenset(needs)


def available(study: Study) -> dict[str, bool]:
    """Which of the needs the study meets."""
    return {RESPONSES_NEEDED: study.has_responses, SUBSET_NEEDED: study.has_subset, MODELS_NEEDED: study.has_models}


def _sections(study: Study, n_boot: int) -> tuple[list[tuple[str, str, pd.DataFrame, int]], list[tuple[str, str]]]:
    """(name, heading and note, table, digits) for every table the data allows, and (short name, what is
    missing) for each table skipped: no practitioner responses or subset, or no model run on this data."""
    subset_columns = ["subset", "delta_human", "subset_lo", "subset_hi", "delta_lo", "delta_hi"]

    def model_only(frame: pd.DataFrame) -> pd.DataFrame:
        """Without a practitioner subset the Subset and Δ human columns hold nothing: leave them out."""
        return frame if study.has_subset else frame.drop(columns=[c for c in subset_columns if c in frame])

    @functools.cache
    def kappas() -> tuple[pd.DataFrame, np.ndarray]:
        return tables.kappa_with_practitioners(study)

    def pair_range() -> str:
        pairs = kappas()[1]
        off_diagonal = pairs[~np.eye(len(pairs), dtype=bool)]
        off_diagonal = off_diagonal[np.isfinite(off_diagonal)]
        if not off_diagonal.size:
            return "n/a with fewer than two models"
        return f"min {off_diagonal.min():.3f}, median {np.median(off_diagonal):.3f}, max {off_diagonal.max():.3f}"

    def leaderboard() -> tuple[str, pd.DataFrame]:
        if not study.has_subset:
            return "Table 4. Leaderboard (exact match %; no practitioner subset, so no Subset or Δ human)", model_only(
                tables.leaderboard(study)
            )
        human = tables.human_reference(study)
        return (
            f"Table 4. Leaderboard (exact match %; Δ human against the majority vote {human:.2f}%)",
            tables.leaderboard(study),
        )

    def agreement() -> tuple[str, pd.DataFrame]:
        result, fleiss = tables.practitioner_agreement(study)
        n = len(result.table) - 1  # the raters per item: correct counts run 0..n
        return (
            f"Table 6. Practitioner agreement against Binomial({n}, {result.p:.4f}): χ² = {result.chi2:.1f} "
            f"({result.df} df, p = {result.p_value:.3g}), Fleiss' κ = {fleiss:.3f}",
            result.table,
        )

    def needs(*names: str) -> frozenset[str]:
        return frozenset(names)

    specs: list[SectionSpec] = [
        (
            "table1_domains",
            "Table 1 (domain portfolio of the subset)",
            needs(SUBSET_NEEDED),
            lambda: (
                "Table 1. Domain portfolio of the subset (items any rater assigned the domain)",
                tables.domain_portfolio(study),
            ),
            1,
        ),
        (
            "table2_corpus",
            "Table 2",
            needs(),
            lambda: ("Table 2. Corpus composition", tables.corpus_composition(study)),
            1,
        ),
        (
            "table3_difficulty",
            "Table 3 (practitioner accuracy by difficulty rating)",
            needs(RESPONSES_NEEDED),
            lambda: (
                "Table 3. Practitioner accuracy, share and median time by difficulty rating",
                tables.practitioner_difficulty(study),
            ),
            1,
        ),
        ("table4_leaderboard", "Table 4 (leaderboard)", needs(MODELS_NEEDED), leaderboard, 2),
        (
            "table5_multi_answer",
            "Table 5 (multi-answer decomposition)",
            needs(MODELS_NEEDED),
            lambda: (
                f"Table 5. Multi-answer decomposition ({int(study.multi.sum())} items)",
                tables.multi_answer(study),
            ),
            2,
        ),
        ("table6_agreement", "Table 6 (practitioner agreement)", needs(SUBSET_NEEDED), agreement, 2),
        (
            "agreement_kappa",
            "Cohen's κ of each model with the practitioner majority",
            needs(SUBSET_NEEDED, MODELS_NEEDED),
            lambda: (
                f"Cohen's κ of each model with the practitioner majority (between model pairs: {pair_range()})",
                kappas()[0],
            ),
            3,
        ),
        (
            "agreement_kappa_pairs",
            "Cohen's κ between model pairs",
            needs(MODELS_NEEDED),
            lambda: (
                "Cohen's κ between model pairs (items every model answered)",
                pd.DataFrame(kappas()[1], columns=study.model_names)
                .assign(model=study.model_names)
                .set_index("model")
                .reset_index(),
            ),
            3,
        ),
        (
            "intervals",
            "Bootstrap 95% intervals",
            needs(MODELS_NEEDED),
            lambda: (
                f"Bootstrap 95% intervals ({n_boot} resamples of items"
                + ("; Δ human paired)" if study.has_subset else ")"),
                model_only(tables.intervals(study, n_boot)),
            ),
            2,
        ),
        (
            "neighbour_tests",
            "McNemar's tests between neighbours",
            needs(MODELS_NEEDED),
            lambda: (
                "Neighbours on the board (by Full): McNemar's exact test on per-item correctness",
                tables.neighbour_tests(study),
            ),
            4,
        ),
    ]
    there = available(study)
    sections, skipped = [], []
    for name, short, needed, make, digits in specs:
        missing = [k for k in (RESPONSES_NEEDED, SUBSET_NEEDED, MODELS_NEEDED) if k in needed and not there[k]]
        if missing:
            skipped.append((short, missing[0]))
            continue
        try:
            heading, frame = make()
        except ValueError as err:  # the data refuses it (e.g. Table 6 over a subset mixing numbers of raters)
            skipped.append((short, f"{REFUSED}{err}"))
            continue
        sections.append((name, heading, frame, digits))
    return sections, skipped


def write_report(
    study: Study,
    out: str | Path,
    n_boot: int = 1000,
    *,
    simulated: bool = False,
    timings: dict[str, float] | None = None,
    suspects: pd.DataFrame | None = None,
    rescored: Rescored | None = None,
) -> Path:
    """Write report.md, tables/*.csv and figures/*.png + *.json under ``out``; returns report.md.

    ``timings``, when given, receives the seconds of each stage (what ``bench/report_scale.py`` prints):
    ``tables`` (computing them), ``figures`` (their data, drawing and PNG) and ``write`` (the CSV, JSON
    and Markdown files).

    ``suspects``: the ranked suspect list (``tcmqa.suspects.audit``), written to :data:`SUSPECTS_FILE`
    and its head shown in report.md; None: neither.

    ``rescored``: every row rescored under the errata (``tcmqa.rescore.rescore``), written to
    ``tables/errata_rescore.csv`` and ``tables/errata_summary.csv`` and shown in report.md; None: neither.

    ``simulated``: the study was written by ``tcmqa simulate`` (:func:`is_simulated` of its inputs);
    the report's title, a banner and every figure's title then say SIMULATED.

    Runs the study left out as computed on other data (``study.excluded``) are listed under their own
    heading (and in ``tables/runs_on_other_data.csv``), in no table. Over data without practitioner
    responses or subset, the practitioner tables and figures are skipped and named under a heading;
    without a model run on this data (none given, or all on other data) the study's own report is
    written, the human side, and the model tables and figures are named under
    :data:`MODEL_TABLES_SKIPPED`. A table or figure the data refuses (its function raises ValueError: Table 6
    and Figure 6 over a subset mixing numbers of raters) is named, with the reason, under
    :data:`REFUSED_BY_THE_DATA`, and the rest is written. Raises ValueError when there is neither a run nor
    practitioner data.
    """
    if not study.has_models and not (study.has_responses or study.has_subset):
        left_out = "; ".join(f"{e.model} ({e.run}): {e.reason}" for e in study.excluded.itertuples())
        raise ValueError(
            "no run was computed on this data and the data holds no practitioner responses: nothing to report"
            f"; runs left out: {left_out or 'none given'}"
        )
    out = Path(out)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    marker = SIMULATED if simulated else ""
    md = [f"# TCMQA report ({SIMULATED} data)" if simulated else "# TCMQA report", ""]
    if simulated:
        md += [
            f"> **{SIMULATED} DATA.** Every input was written by `tcmqa simulate`: the items, the "
            "practitioner responses and the model outputs are simulated, so no number or figure here is a "
            "finding about TCMQA, its practitioners or any model.",
            "",
        ]
    md += [
        f"{len(study.corpus):,} corpus items ({len(study.item_ids):,} scored, flagged items excluded; "
        f"data fingerprint `{study.data_fingerprint}`), "
        f"{len(study.responses):,} practitioner responses, {len(study.subset):,} subset items, "
        f"{len(study.models)} model runs"
        + (f" ({len(study.excluded)} more left out: computed on other data)." if len(study.excluded) else "."),
        "",
    ]
    if study.has_subset:
        n_scored = int((study.subset_rows >= 0).sum())
        md += [
            f"Practitioner majority vote on the {n_scored:,} scored subset items: "
            f"{tables.human_reference(study):.2f}% (the human reference).",
            "",
        ]
    if len(study.excluded):
        study.excluded.to_csv(out / "tables" / "runs_on_other_data.csv", index=False)
        md += [
            f"## {RUNS_ON_OTHER_DATA}",
            "",
            f"These runs were computed on other data than this report's (data fingerprint "
            f"`{study.data_fingerprint}`), so they are in no table or figure:",
            "",
            markdown_table(study.excluded),
            "",
        ]
    clock = _Clock(timings)
    sections, skipped = _sections(study, n_boot)
    clock.stage("tables")
    there = available(study)
    figures: dict[str, dict] = {}  # name -> the data drawn
    for name, figure in FIGURES.items():
        missing = [k for k in (SUBSET_NEEDED, MODELS_NEEDED) if k in figure_needs(name) and not there[k]]
        if missing:
            skipped.append((f"Figure {figure.number} ({figure.title})", missing[0]))
            continue
        try:
            figures[name] = figure.make(study, marker)
        except ValueError as err:  # the data refuses it (e.g. Figure 6 over a subset mixing numbers of raters)
            skipped.append((f"Figure {figure.number} ({figure.title})", f"{REFUSED}{err}"))
    practitioner_skipped = [short for short, why in skipped if why in (RESPONSES_NEEDED, SUBSET_NEEDED)]
    model_skipped = [short for short, why in skipped if why == MODELS_NEEDED]
    refused = [(short, why.removeprefix(REFUSED)) for short, why in skipped if why.startswith(REFUSED)]
    if practitioner_skipped:
        missing = [c for c, there_ in (("responses", study.has_responses), ("subset", study.has_subset)) if not there_]
        md += [
            f"## {PRACTITIONER_TABLES_SKIPPED}",
            "",
            f"The data holds no practitioner data (no {' or '.join(f'`{c}`' for c in missing)} config), "
            "so these were not computed:",
            "",
            *[f"- {name}" for name in practitioner_skipped],
            "",
        ]
    if model_skipped:
        why = (
            f"every run given was computed on other data ({len(study.excluded)} left out, listed above)"
            if len(study.excluded)
            else "no model run was given (`--outputs`)"
        )
        md += [
            f"## {MODEL_TABLES_SKIPPED}",
            "",
            f"This is the study's own report, the practitioners' side: {why}, so these model tables and "
            "figures were not computed. Figures 5 and 7 show the practitioner series alone.",
            "",
            *[f"- {name}" for name in model_skipped],
            "",
        ]
    if refused:
        md += [
            f"## {REFUSED_BY_THE_DATA}",
            "",
            "These were not computed: the data does not meet what they assume.",
            "",
            *[f"- {name}: {why}" for name, why in refused],
            "",
        ]
    for name, data in figures.items():
        fig = FIGURES[name].draw(data)
        fig.savefig(out / "figures" / f"{name}.png", dpi=110, bbox_inches="tight", metadata={"Title": data["title"]})
        plt.close(fig)
    clock.stage("figures")
    for name, heading, frame, digits in sections:
        frame.to_csv(out / "tables" / f"{name}.csv", index=False)
        md += [f"## {heading}", "", markdown_table(frame, digits), ""]
    for name, data in figures.items():
        (out / "figures" / f"{name}.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        md += [f"## {data['title']}", "", f"![{name}](figures/{name}.png)", ""]
    if suspects is not None:
        suspects.to_csv(out / SUSPECTS_FILE, index=False)
        md += [
            "## Suspect keys",
            "",
            f"Every item ranked by the evidence that its key is wrong ([{SUSPECTS_FILE}]({SUSPECTS_FILE}); "
            f"`tcmqa.suspects`, over the answers of {suspects.attrs.get('models_audited', len(study.models))} of the "
            f"{len(study.models)} models, those with the most items answered, and every practitioner); "
            f"the first {SUSPECTS_SHOWN}:",
            "",
            markdown_table(suspects.head(SUSPECTS_SHOWN)[["rank", "item_id", "score", "key", "alternative", "reason"]]),
            "",
        ]
    if rescored is not None:
        md += _rescored_section(rescored, out)
    path = out / "report.md"
    path.write_text("\n".join(md), encoding="utf-8")
    clock.stage("write")
    return path


def _rescored_section(rescored: Rescored, out: Path) -> list[str]:
    """Write the rescoring's tables; its report.md section."""
    rescored.rows.to_csv(out / "tables" / f"{RESCORE_FILE}.csv", index=False)
    rescored.summary().to_csv(out / "tables" / f"{SUMMARY_FILE}.csv", index=False)
    revisions = rescored.rows[["key_revision_before", "key_revision_after"]].iloc[0] if len(rescored.rows) else None
    tables_md = []
    for kind, rows in rescored.rows.groupby("kind", sort=False):  # models (ranked), then practitioners
        shown = rows.drop(columns=["kind", "key_revision_before", "key_revision_after"]).dropna(axis=1, how="all")
        ranks = [c for c in shown.columns if c.startswith("rank_")]
        shown = shown.astype(dict.fromkeys(ranks, int)).rename(columns={"name": str(kind)})
        tables_md += [markdown_table(shown, 2), ""]
    return [
        "## Rescored under the errata",
        "",
        f"Every row rescored from its stored answers ([tables/{RESCORE_FILE}.csv](tables/{RESCORE_FILE}.csv))"
        + (f": keys `{revisions.iloc[0]}` before, `{revisions.iloc[1]}` after" if revisions is not None else "")
        + f". Kendall's tau of the ranking before and after: {rescored.tau:.3f} (p = {rescored.tau_p:.3g}). "
        f"Error rate the errata found: {rescored.n_errors} of {rescored.n_reviewed} items reviewed, "
        f"{rescored.error_rate:.1f}% (95% interval {rescored.error_low:.1f}-{rescored.error_high:.1f}%).",
        "",
        *tables_md,
    ]


class _Clock:
    """Seconds per stage into ``timings`` (each stage: since the previous one ended); None: not timed."""

    def __init__(self, timings: dict[str, float] | None) -> None:
        self.timings, self.last = timings, time.perf_counter()

    def stage(self, name: str) -> None:
        now = time.perf_counter()
        if self.timings is not None:
            self.timings[name] = self.timings.get(name, 0.0) + now - self.last
        self.last = now


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, metavar="DIR_OR_HUB_ID", help="a built tree or a Hub dataset id")
    parser.add_argument(
        "--outputs",
        action="extend",
        nargs="+",
        default=[],
        metavar="DIR",
        help="a run folder from `tcmqa eval`, or a folder of runs (repeatable; none: the practitioners' side alone)",
    )
    parser.add_argument(
        "--out", required=True, metavar="REPORT_DIR", help="a new or empty folder; an earlier report there is replaced"
    )
    parser.add_argument(
        "--errata",
        metavar="FILE",
        help="errata (JSONL or Parquet, or a rebuilt tree's errata/ folder): rescore every row under them",
    )
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples for the intervals")


def main(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    study = load_study(args.data, args.outputs)  # warns, naming them, about runs on other data
    simulated = is_simulated(args.data, args.outputs)
    timings = {"load": time.perf_counter() - start}
    suspects = None
    try:
        suspects = audit(study, args.data)
    except ValueError as err:  # nobody answered a scored item
        warnings.warn(f"no suspect keys written: {err}", stacklevel=1)
    timings["suspects"] = time.perf_counter() - start - timings["load"]
    try:
        rescored = rescore(study, args.data, read_errata(args.errata)) if args.errata else None
        out = replace_output(args.out, "report.md", ("report.md", "tables", "figures", SUSPECTS_FILE), "tcmqa report")
        path = write_report(
            study, out, args.n_boot, simulated=simulated, timings=timings, suspects=suspects, rescored=rescored
        )
    except ValueError as err:
        raise SystemExit(f"tcmqa report: {err}") from err
    left_out = f"; left out {len(study.excluded)} runs on other data" if len(study.excluded) else ""
    left_out += "" if study.has_models else "; the practitioners' side only"
    print(
        f"wrote {path}{f' over {SIMULATED} data' if simulated else ''} "
        f"({len(study.models)} models, {study.covered.sum():,} output rows{left_out}) "
        f"in {time.perf_counter() - start:.1f}s ({', '.join(f'{k} {v:.1f}s' for k, v in timings.items())})"
    )
    return 0
