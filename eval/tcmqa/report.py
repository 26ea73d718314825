"""``tcmqa report``: every table and figure of the paper, regenerated from the configs.

Usage::

    tcmqa report --data DIR_OR_HUB_ID --outputs RUN_OR_RUNS_DIR [--outputs ...] --out REPORT_DIR

``--data`` is a tree written by ``tcmqa build`` (or ``tcmqa simulate``'s ``data/``) or a Hub id;
each ``--outputs`` is a run folder written by ``tcmqa eval`` (``outputs/part-*.parquet`` and
``results.json``) or a folder of such runs. Writes::

    REPORT_DIR/report.md            every table (Markdown) with the figures inlined
    REPORT_DIR/tables/<name>.csv    each table's numbers, unrounded
    REPORT_DIR/figures/<name>.png   each figure
    REPORT_DIR/figures/<name>.json  the exact data each figure was drawn from

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
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tcmqa import tables
from tcmqa.data import load_config
from tcmqa.figures import FIGURES
from tcmqa.outputs import RESULTS_FILE
from tcmqa.simulate import SIMULATED
from tcmqa.study import Study, load_study, run_dirs

RUNS_ON_OTHER_DATA = "Runs left out: computed on other data"
PRACTITIONER_TABLES_SKIPPED = "Practitioner tables skipped"


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


# A section: (file name, short name for the skipped list, what it needs, make -> (heading, table), digits)
SectionSpec = tuple[str, str, str, Callable[[], tuple[str, pd.DataFrame]], int]
RESPONSES_NEEDED, SUBSET_NEEDED = "responses", "subset"


def _sections(study: Study, n_boot: int) -> tuple[list[tuple[str, str, pd.DataFrame, int]], list[str]]:
    """(name, heading and note, table, digits) for every table the data allows, and the short names of
    the practitioner tables skipped because the data has no practitioner responses or subset."""
    kappa, pairs = tables.kappa_with_practitioners(study)
    off_diagonal = pairs[~np.eye(len(pairs), dtype=bool)]
    off_diagonal = off_diagonal[np.isfinite(off_diagonal)]
    pair_range = (
        f"min {off_diagonal.min():.3f}, median {np.median(off_diagonal):.3f}, max {off_diagonal.max():.3f}"
        if off_diagonal.size
        else "n/a with fewer than two models"
    )
    subset_columns = ["subset", "delta_human", "subset_lo", "subset_hi", "delta_lo", "delta_hi"]

    def model_only(frame: pd.DataFrame) -> pd.DataFrame:
        """Without a practitioner subset the Subset and Δ human columns hold nothing: leave them out."""
        return frame if study.has_subset else frame.drop(columns=[c for c in subset_columns if c in frame])

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
        return (
            f"Table 6. Practitioner agreement against Binomial(3, {result.p:.4f}): χ² = {result.chi2:.1f} "
            f"({result.df} df, p = {result.p_value:.3g}), Fleiss' κ = {fleiss:.3f}",
            result.table,
        )

    specs: list[SectionSpec] = [
        (
            "table1_domains",
            "Table 1 (domain portfolio of the subset)",
            SUBSET_NEEDED,
            lambda: (
                "Table 1. Domain portfolio of the subset (items any rater assigned the domain)",
                tables.domain_portfolio(study),
            ),
            1,
        ),
        (
            "table2_corpus",
            "Table 2",
            "",
            lambda: ("Table 2. Corpus composition", tables.corpus_composition(study)),
            1,
        ),
        (
            "table3_difficulty",
            "Table 3 (practitioner accuracy by difficulty rating)",
            RESPONSES_NEEDED,
            lambda: (
                "Table 3. Practitioner accuracy, share and median time by difficulty rating",
                tables.practitioner_difficulty(study),
            ),
            1,
        ),
        ("table4_leaderboard", "Table 4", "", leaderboard, 2),
        (
            "table5_multi_answer",
            "Table 5",
            "",
            lambda: (
                f"Table 5. Multi-answer decomposition ({int(study.multi.sum())} items)",
                tables.multi_answer(study),
            ),
            2,
        ),
        ("table6_agreement", "Table 6 (practitioner agreement)", SUBSET_NEEDED, agreement, 2),
        (
            "agreement_kappa",
            "Cohen's κ of each model with the practitioner majority",
            SUBSET_NEEDED,
            lambda: (
                f"Cohen's κ of each model with the practitioner majority (between model pairs: {pair_range})",
                kappa,
            ),
            3,
        ),
        (
            "agreement_kappa_pairs",
            "Cohen's κ between model pairs",
            "",
            lambda: (
                "Cohen's κ between model pairs (items every model answered)",
                pd.DataFrame(pairs, columns=study.model_names)
                .assign(model=study.model_names)
                .set_index("model")
                .reset_index(),
            ),
            3,
        ),
        (
            "intervals",
            "Bootstrap 95% intervals",
            "",
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
            "",
            lambda: (
                "Neighbours on the board (by Full): McNemar's exact test on per-item correctness",
                tables.neighbour_tests(study),
            ),
            4,
        ),
    ]
    available = {"": True, RESPONSES_NEEDED: study.has_responses, SUBSET_NEEDED: study.has_subset}
    sections, skipped = [], []
    for name, short, needs, make, digits in specs:
        if not available[needs]:
            skipped.append(short)
            continue
        heading, frame = make()
        sections.append((name, heading, frame, digits))
    return sections, skipped


def write_report(study: Study, out: str | Path, n_boot: int = 1000, *, simulated: bool = False) -> Path:
    """Write report.md, tables/*.csv and figures/*.png + *.json under ``out``; returns report.md.

    ``simulated``: the study was written by ``tcmqa simulate`` (:func:`is_simulated` of its inputs);
    the report's title, a banner and every figure's title then say SIMULATED.

    Runs the study left out as computed on other data (``study.excluded``) are listed under their own
    heading (and in ``tables/runs_on_other_data.csv``), in no table. Over data without practitioner
    responses or subset, the practitioner tables and figures are skipped and named under a heading.
    """
    if not len(study.models):
        left_out = "; ".join(f"{e.model} ({e.run}): {e.reason}" for e in study.excluded.itertuples())
        raise ValueError(f"no run was computed on this data; left out: {left_out or 'none given'}")
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
    sections, skipped = _sections(study, n_boot)
    figures = {name: f for name, f in FIGURES.items() if study.has_subset or not f.practitioners}
    skipped += [f"Figure {f.number} ({f.title})" for name, f in FIGURES.items() if name not in figures]
    if skipped:
        missing = [c for c, there in (("responses", study.has_responses), ("subset", study.has_subset)) if not there]
        md += [
            f"## {PRACTITIONER_TABLES_SKIPPED}",
            "",
            f"The data holds no practitioner data (no {' or '.join(f'`{c}`' for c in missing)} config), "
            "so these were not computed:",
            "",
            *[f"- {name}" for name in skipped],
            "",
        ]
    for name, heading, frame, digits in sections:
        frame.to_csv(out / "tables" / f"{name}.csv", index=False)
        md += [f"## {heading}", "", markdown_table(frame, digits), ""]
    for name, figure in figures.items():
        data = figure.make(study, marker)
        (out / "figures" / f"{name}.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        fig = figure.draw(data)
        fig.savefig(out / "figures" / f"{name}.png", dpi=110, bbox_inches="tight", metadata={"Title": data["title"]})
        plt.close(fig)
        md += [f"## {data['title']}", "", f"![{name}](figures/{name}.png)", ""]
    path = out / "report.md"
    path.write_text("\n".join(md), encoding="utf-8")
    return path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, metavar="DIR_OR_HUB_ID", help="a built tree or a Hub dataset id")
    parser.add_argument(
        "--outputs",
        action="extend",
        nargs="+",
        required=True,
        metavar="DIR",
        help="a run folder from `tcmqa eval`, or a folder of runs (repeatable)",
    )
    parser.add_argument("--out", required=True, metavar="REPORT_DIR")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap resamples for the intervals")


def main(args: argparse.Namespace) -> int:
    start = time.perf_counter()
    study = load_study(args.data, args.outputs)  # warns, naming them, about runs on other data
    simulated = is_simulated(args.data, args.outputs)
    try:
        path = write_report(study, args.out, args.n_boot, simulated=simulated)
    except ValueError as err:
        raise SystemExit(f"tcmqa report: {err}") from err
    left_out = f"; left out {len(study.excluded)} runs on other data" if len(study.excluded) else ""
    print(
        f"wrote {path}{f' over {SIMULATED} data' if simulated else ''} "
        f"({len(study.models)} models, {study.covered.sum():,} output rows{left_out}) "
        f"in {time.perf_counter() - start:.1f}s"
    )
    return 0
