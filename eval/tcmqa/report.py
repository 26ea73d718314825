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
from collections.abc import Sequence
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


def _sections(study: Study, n_boot: int) -> list[tuple[str, str, pd.DataFrame, int]]:
    """(name, heading and note, table, digits) for every table of the report."""
    agreement, fleiss = tables.practitioner_agreement(study)
    kappa, pairs = tables.kappa_with_practitioners(study)
    off_diagonal = pairs[~np.eye(len(pairs), dtype=bool)]
    off_diagonal = off_diagonal[np.isfinite(off_diagonal)]
    pair_range = (
        f"min {off_diagonal.min():.3f}, median {np.median(off_diagonal):.3f}, max {off_diagonal.max():.3f}"
        if off_diagonal.size
        else "n/a with fewer than two models"
    )
    human = tables.human_reference(study)
    return [
        (
            "table1_domains",
            "Table 1. Domain portfolio of the subset (items any rater assigned the domain)",
            tables.domain_portfolio(study),
            1,
        ),
        ("table2_corpus", "Table 2. Corpus composition", tables.corpus_composition(study), 1),
        (
            "table3_difficulty",
            "Table 3. Practitioner accuracy, share and median time by difficulty rating",
            tables.practitioner_difficulty(study),
            1,
        ),
        (
            "table4_leaderboard",
            f"Table 4. Leaderboard (exact match %; Δ human against the majority vote {human:.2f}%)",
            tables.leaderboard(study),
            2,
        ),
        (
            "table5_multi_answer",
            f"Table 5. Multi-answer decomposition ({int(study.multi.sum())} items)",
            tables.multi_answer(study),
            2,
        ),
        (
            "table6_agreement",
            f"Table 6. Practitioner agreement against Binomial(3, {agreement.p:.4f}): χ² = {agreement.chi2:.1f} "
            f"({agreement.df} df, p = {agreement.p_value:.3g}), Fleiss' κ = {fleiss:.3f}",
            agreement.table,
            2,
        ),
        (
            "agreement_kappa",
            f"Cohen's κ of each model with the practitioner majority (between model pairs: {pair_range})",
            kappa,
            3,
        ),
        (
            "agreement_kappa_pairs",
            "Cohen's κ between model pairs (items every model answered)",
            pd.DataFrame(pairs, columns=study.model_names)
            .assign(model=study.model_names)
            .set_index("model")
            .reset_index(),
            3,
        ),
        (
            "intervals",
            f"Bootstrap 95% intervals ({n_boot} resamples of items; Δ human paired)",
            tables.intervals(study, n_boot),
            2,
        ),
        (
            "neighbour_tests",
            "Neighbours on the board (by Full): McNemar's exact test on per-item correctness",
            tables.neighbour_tests(study),
            4,
        ),
    ]


def write_report(study: Study, out: str | Path, n_boot: int = 1000, *, simulated: bool = False) -> Path:
    """Write report.md, tables/*.csv and figures/*.png + *.json under ``out``; returns report.md.

    ``simulated``: the study was written by ``tcmqa simulate`` (:func:`is_simulated` of its inputs);
    the report's title, a banner and every figure's title then say SIMULATED.
    """
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
        f"{len(study.corpus):,} corpus items ({len(study.item_ids):,} scored, flagged items excluded), "
        f"{len(study.responses):,} practitioner responses, {len(study.subset):,} subset items, "
        f"{len(study.models)} model runs.",
        "",
    ]
    for name, heading, frame, digits in _sections(study, n_boot):
        frame.to_csv(out / "tables" / f"{name}.csv", index=False)
        md += [f"## {heading}", "", markdown_table(frame, digits), ""]
    for name, figure in FIGURES.items():
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
    study = load_study(args.data, args.outputs)
    simulated = is_simulated(args.data, args.outputs)
    path = write_report(study, args.out, args.n_boot, simulated=simulated)
    print(
        f"wrote {path}{f' over {SIMULATED} data' if simulated else ''} "
        f"({len(study.models)} models, {study.covered.sum():,} output rows) "
        f"in {time.perf_counter() - start:.1f}s"
    )
    return 0
