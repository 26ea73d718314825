"""The board labels which rows are comparable (same data fingerprint, same protocol, full coverage)
and labels the others, in the order the sort says; the practitioner reference sits with the rows it was computed
beside; families are spelled as the paper spells them."""

from __future__ import annotations

import re

import pandas as pd
import pytest
from scipy.stats import binomtest

from tcmqa.leaderboard import about, uncertainty
from tcmqa.leaderboard import board as board_lib
from tcmqa.leaderboard.board import (
    COMPARABLE,
    COMPARISON,
    FULL_CI,
    HUMAN_NAME,
    OTHER_DATA,
    OTHER_PROTOCOL,
    PAPER,
    PARTIAL,
    SEPARATION,
    SUBSET_CI,
    UNKNOWN_DATA,
    Board,
)
from tcmqa.probes import calibration as calibration_lib
from tcmqa.prompts import PROTOCOL
from tcmqa.results import PAPER_HUMAN_REFERENCE, PROBE_COLUMNS, canonical_family
from tcmqa.schema import RESULT_COLUMNS, RESULTS, ResultColumn
from tcmqa.store import SQLiteStore

HERE, ELSEWHERE = "a" * 16, "b" * 16  # the board's data fingerprint, and another


def row(model: str, full: float, fingerprint: str | None = HERE, coverage: float | None = 100.0, **extra) -> dict:
    """A complete results row as the harness writes it (every RESULTS key)."""
    n_corpus = 1000
    values = {
        "model": model,
        "origin": "evaluated",
        "family": "qwen2",
        "params_b": 0.5,
        "full": full,
        "subset": full - 1,
        "human_reference": 70.0,
        "delta_human": full - 71,
        "protocol": PROTOCOL,
        "engine": "vllm",
        "revision": "1" * 40,
        "date": "2026-01-02",
        "data": "TechTCM/TCMQA",
        "data_fingerprint": fingerprint,
        "n_corpus": n_corpus if fingerprint else None,
        "n": round(n_corpus * coverage / 100) if coverage is not None else None,
        "coverage": coverage,
    }
    return {name: None for name in RESULTS} | values | extra


ROWS = [
    row("org/full", 60.0),
    row("org/full", 80.0, coverage=5.0, revision="2" * 40),  # a --limit run of the same model: higher, but partial
    row("org/other-data", 90.0, fingerprint=ELSEWHERE, human_reference=50.0),
    row("org/other-protocol", 85.0, protocol="v0"),
    row("org/legacy", 95.0, fingerprint=None, coverage=None),  # recorded before rows said what data they ran on
    row("org/second", 40.0, family="Qwen2.5"),
]


def labelled(frame: pd.DataFrame) -> dict[tuple[str, float], str]:
    return {(m, f): c for m, f, c in zip(frame["Model"], frame["Full"], frame[COMPARISON]) if m != HUMAN_NAME}


def test_every_row_is_labelled_by_what_it_is_comparable_with():
    frame = board_lib.merge(ROWS, HERE)
    labels = labelled(frame)
    assert labels[("org/full", 60.0)] == COMPARABLE
    assert labels[("org/second", 40.0)] == COMPARABLE
    assert labels[("org/full", 80.0)] == PARTIAL
    assert labels[("org/other-data", 90.0)] == OTHER_DATA
    assert labels[("org/other-protocol", 85.0)] == OTHER_PROTOCOL
    assert labels[("org/legacy", 95.0)] == UNKNOWN_DATA
    paper = frame[frame["Origin"] == "reported"]
    assert len(paper) == 29 and set(paper[COMPARISON]) == {PAPER}
    assert frame.attrs["reference"] == {"data_fingerprint": HERE, "protocol": PROTOCOL}


def test_sorted_by_full_descending_the_full_values_descend_whatever_their_comparison():
    frame = board_lib.merge(ROWS, HERE)
    for sort_by, descending in (("Full", True), ("Full", False), ("Params (B)", True), ("Subset", False)):
        shown = board_lib.select(frame, columns=board_lib.DEFAULT_COLUMNS, sort_by=sort_by, descending=descending)
        values = shown[sort_by].tolist()
        known = [v for v in values if not pd.isna(v)]
        assert known == sorted(known, reverse=descending), (sort_by, descending)
        assert all(pd.isna(v) for v in values[len(known) :]), sort_by  # empty cells last
    shown = board_lib.select(frame, sort_by="Full", descending=True)
    assert shown["Model"].iloc[0] == "org/legacy"  # 95.0, though its data is unknown: its label says so
    assert shown[COMPARISON].iloc[0] == UNKNOWN_DATA
    assert shown["Full"].iloc[4] == 77.98 and shown[COMPARISON].iloc[:6].nunique() == 5  # the groups interleave
    # comparability is a filter: the comparable rows alone, by Full, with their practitioners' reference
    comparable = board_lib.select(frame, sort_by="Full", descending=True, comparisons=[COMPARABLE])
    assert comparable["Model"].tolist() == ["org/full", "org/second", HUMAN_NAME]
    assert "in the order the sort control says" in board_lib.LEGEND


def test_the_comparison_column_is_always_shown_after_the_model():
    frame = board_lib.merge(ROWS, HERE)
    shown = board_lib.select(frame, columns=["Full"])
    assert shown.columns.tolist() == ["Model", COMPARISON, "Full"]
    partial = board_lib.select(frame, search="org/full")
    assert partial[[COMPARISON, "Full"]].values.tolist() == [[PARTIAL, 80.0], [COMPARABLE, 60.0]]
    only = board_lib.select(frame, comparisons=[PARTIAL, OTHER_DATA])
    assert set(only[COMPARISON]) == {PARTIAL, OTHER_DATA}


def test_the_practitioner_reference_sits_with_the_rows_it_was_computed_beside():
    frame = board_lib.merge(ROWS, HERE)
    humans = frame[frame["Origin"] == "reference"].set_index(COMPARISON)
    assert humans.loc[PAPER, "Subset"] == PAPER_HUMAN_REFERENCE  # the paper's 64.94 stays with the paper's rows
    assert humans.loc[COMPARABLE, "Subset"] == 70.0  # the majority vote on the comparable rows' subset items
    assert humans.loc[COMPARABLE, "Δ human"] == 0.0
    assert 50.0 not in humans["Subset"].tolist()  # the other data's reference is not the board's
    without = board_lib.merge([row("org/x", 50.0, human_reference=None)], HERE)
    assert without.loc[without["Origin"] == "reference", COMPARISON].tolist() == [PAPER]


def test_the_reference_data_is_the_most_common_full_coverage_fingerprint():
    rows = [
        row("m1", 50.0, fingerprint=ELSEWHERE),
        row("m2", 51.0),
        row("m3", 52.0),
        row("m4", 53.0, coverage=10.0, fingerprint=ELSEWHERE),  # partial rows do not vote
        row("m5", 54.0, coverage=10.0, fingerprint=ELSEWHERE),
        row("m6", 55.0, fingerprint=ELSEWHERE, protocol="v0"),  # nor rows under another protocol
    ]
    assert board_lib.reference_fingerprint(rows) == HERE
    frame = board_lib.merge(rows)
    assert frame.attrs["reference"]["data_fingerprint"] == HERE
    assert labelled(frame)[("m1", 50.0)] == OTHER_DATA and labelled(frame)[("m2", 51.0)] == COMPARABLE
    # a tie goes to the most recently evaluated data
    tie = [row("old", 50.0, date="2025-01-01"), row("new", 50.0, fingerprint=ELSEWHERE, date="2026-03-01")]
    assert board_lib.reference_fingerprint(tie) == ELSEWHERE
    assert board_lib.reference_fingerprint([row("p", 1.0, coverage=50.0)]) is None
    given = board_lib.merge(rows, ELSEWHERE)  # the data the Space serves, when the caller knows it
    assert labelled(given)[("m1", 50.0)] == COMPARABLE and labelled(given)[("m2", 51.0)] == OTHER_DATA


def test_coverage_is_read_from_n_and_n_corpus_when_not_recorded():
    assert board_lib.coverage(row("m", 1.0, coverage=None) | {"n": 1000, "n_corpus": 1000}) == 100.0
    assert board_lib.coverage({"n": 5, "n_corpus": 10}) == 50.0
    assert board_lib.coverage({"n": 5}) is None
    assert board_lib.comparison(row("m", 1.0, coverage=None) | {"n": None}, HERE) == PARTIAL


def test_families_are_spelled_as_the_paper_spells_them():
    frame = board_lib.merge(ROWS, HERE)
    assert set(frame.loc[frame["Origin"] == "evaluated", "Family"]) == {"Qwen2", "Qwen2.5"}
    reported = board_lib.reported_rows()["family"]
    assert all(canonical_family(f) == f for f in reported)  # the paper's names are fixed points
    cases = {
        ("qwen2", "Qwen/Qwen2-7B-Instruct"): "Qwen2",
        ("qwen2", "Qwen/Qwen2.5-14B-Instruct"): "Qwen2.5",
        ("qwen2", "Qwen/Qwen1.5-7B-Chat"): "Qwen1.5",
        ("qwen3_5", "Qwen/Qwen3.5-9B"): "Qwen3.5",
        ("gemma2", "google/gemma-2-9b-it"): "Gemma2",
        ("gemma3_text", "google/gemma-3-270m-it"): "Gemma3",
        ("gemma3", "google/gemma-3-12b-it"): "Gemma3",
        ("olmo2", "allenai/OLMo-2-1124-7B-Instruct"): "OLMo2",
        ("olmo3", None): "OLMo3",
        ("llama", "meta-llama/Llama-3.1-8B-Instruct"): "Llama3",
        ("llama", "meta-llama/Llama-2-7b-chat-hf"): "Llama2",
        ("qwen2", "org/qwen-7b-chat"): "Qwen2",  # a size, not a release, after the name
        ("qwen2", "org/Llama-3-merge"): "Qwen2",  # the architecture decides the line
        (None, "Qwen/Qwen2.5-7B-Instruct"): "Qwen2.5",
        ("gpt_oss", None): "gpt_oss",
        (None, None): "unknown",
    }
    for (model_type, model_id), family in cases.items():
        assert canonical_family(model_type, model_id) == family, (model_type, model_id)


def test_board_on_a_store_picks_up_rows_and_labels_them(tmp_path):
    """Rows recorded through the store's own submit/claim/finish path, read by ``Board``."""
    store = SQLiteStore(tmp_path / "store")
    board = Board(store)
    assert set(board.frame()[COMPARISON]) == {PAPER}
    for i, result in enumerate(ROWS):
        job = store.submit(result["model"], f"{i:040x}", result["protocol"] or PROTOCOL, "test")
        claimed = store.claim("w")
        assert claimed is not None and claimed.id == job.id
        assert store.finish(claimed, result, [])
    frame = board.frame()  # no restart: the store's version changed
    assert labelled(frame)[("org/full", 60.0)] == COMPARABLE
    assert labelled(frame)[("org/full", 80.0)] == PARTIAL
    assert "Qwen2" in board.families() and "Human" not in board.families()
    elsewhere = labelled(Board(store, data_fingerprint=ELSEWHERE).frame())
    assert elsewhere[("org/other-data", 90.0)] == COMPARABLE and elsewhere[("org/full", 60.0)] == OTHER_DATA


def test_plot_frames_carry_the_comparison_label():
    scatter, bars = board_lib.plot_frames(board_lib.merge(ROWS, HERE))
    assert set(scatter.loc[scatter["model"] == "org/other-data", "comparison"]) == {OTHER_DATA}
    assert set(bars.loc[bars["model"] == "org/full", "comparison"]) == {COMPARABLE, PARTIAL}


# -- uncertainty: intervals, the separation mark, the probe columns ------------------------------------------------
N_ITEMS = 400
IDS = [f"q{i:03d}" for i in range(N_ITEMS)]


def planted(right: set[int]) -> pd.Series:
    """Per-item correctness, right on the item numbers in ``right``."""
    return pd.Series([i in right for i in range(N_ITEMS)], index=IDS)


# A 280 right; B 240: 80 items only A gets right, 40 only B (separated from A); C 239: B with 2 items lost and
# 1 gained (3 discordant items: not separated from B).
A = set(range(280))
B = set(range(200)) | set(range(300, 340))
C = (B - {199, 339}) | {350}
PLANTED = {"org/a": A, "org/b": B, "org/c": C, "org/partial": set(range(390))}


def planted_board() -> pd.DataFrame:
    rows = [
        row(model, 100 * len(right) / N_ITEMS, full_ci_low=55.04, full_ci_high=58.96)
        for model, right in PLANTED.items()
        if model != "org/partial"
    ]
    rows += [
        row("org/partial", 97.5, coverage=5.0),  # scored higher on a --limit run: not the row above org/a
        row("org/imported", 50.0),  # imported from the Hub: no outputs here
    ]
    correctness = {uncertainty.key(m, "1" * 40): planted(right) for m, right in PLANTED.items()}
    return board_lib.merge(rows, HERE, correctness=correctness)


def marks(frame: pd.DataFrame) -> dict[str, str]:
    return dict(zip(frame["Model"], frame[SEPARATION]))


def test_intervals_are_shown_as_text_on_evaluated_rows_only():
    frame = planted_board()
    evaluated = frame[frame["Model"] == "org/a"].iloc[0]
    assert evaluated[FULL_CI] == "55.0–59.0"
    assert evaluated[SUBSET_CI] == ""  # no interval recorded
    assert set(frame.loc[frame["Origin"] != "evaluated", FULL_CI]) == {""}  # the paper's rows, the references
    assert FULL_CI in board_lib.DEFAULT_COLUMNS and SUBSET_CI in board_lib.CHOICES
    shown = board_lib.select(frame, columns=["Full", FULL_CI, SUBSET_CI])
    assert shown.columns.tolist() == ["Model", COMPARISON, "Full", FULL_CI, SUBSET_CI]


A_VS_B = binomtest(40, 120, 0.5).pvalue  # McNemar by hand: 80 items only A right, 40 only B
B_VS_C = binomtest(1, 3, 0.5).pvalue  # 2 items only B right, 1 only C


def test_a_row_not_separated_from_the_next_by_full_is_marked_by_a_paired_test():
    got = marks(planted_board())
    assert A_VS_B < 0.05 <= B_VS_C
    assert got["org/b"] == f"≠ org/a (p={A_VS_B:.2g})"  # separated: no ≈
    assert got["org/c"] == f"≈ org/b (p={B_VS_C:.2g})"
    assert got["org/a"] == ""  # the best comparable row: nothing above it (the partial run is not comparable)
    assert got["org/partial"] == got["org/imported"] == ""  # not comparable; no outputs
    assert set(planted_board().loc[lambda f: f["Origin"] != "evaluated", SEPARATION]) == {""}
    assert uncertainty.p_value(planted(B), planted(B)) == 1.0  # identical per-item correctness
    assert uncertainty.mark(1.0, "org/b") == "≈ org/b (p=1)" and uncertainty.mark(None, "org/b") == ""


def test_next_by_full_mark_survives_sorting_and_filtering():
    """The mark names the row it was tested against (the next better comparable row by Full), so sorted by
    another column, ascending, or with that row filtered out, each row's mark says the same; the legend and
    the column say "next by Full", not "the row above"."""
    frame = planted_board()
    expected = {"org/b": f"≠ org/a (p={A_VS_B:.2g})", "org/c": f"≈ org/b (p={B_VS_C:.2g})"}
    views = [
        board_lib.select(frame, sort_by="Full", descending=False),  # org/c now sits above org/b
        board_lib.select(frame, sort_by="Model", descending=True),
        board_lib.select(frame, search="org/c"),  # org/b filtered out
        board_lib.select(frame, search="org/b"),
    ]
    for shown in views:
        for model, mark in marks(shown).items():
            if model in expected:
                assert mark == expected[model], (model, shown["Model"].tolist())
    assert marks(views[0])["org/c"] != "" and views[0]["Model"].tolist().index("org/c") < views[0][
        "Model"
    ].tolist().index("org/b")
    assert SEPARATION == "≈ next by Full" and "next better comparable row by Full" in board_lib.LEGEND
    assert "row above" not in board_lib.LEGEND and "above" not in SEPARATION
    # two revisions of one model on the board: the mark says which
    rows = [row("org/x", 60.0, revision="1" * 40), row("org/x", 59.0, revision="2" * 40), row("org/y", 58.0)]
    right = {("org/x", "1" * 40): A, ("org/x", "2" * 40): B, ("org/y", "1" * 40): C}
    twins = board_lib.merge(rows, HERE, correctness={k: planted(v) for k, v in right.items()})
    assert set(twins[SEPARATION]) >= {f"≠ org/x@1111111 (p={A_VS_B:.2g})", f"≈ org/x@2222222 (p={B_VS_C:.2g})"}


def test_the_mark_compares_only_the_items_both_models_answered():
    below = planted(B).iloc[:300]  # items q000..q299: 40 of B's right items (300..339) are not in common
    assert uncertainty.p_value(below, planted(A)) == binomtest(0, 80, 0.5).pvalue
    assert uncertainty.p_value(below, planted(A).iloc[300:]) is None  # nothing in common: not tested


def test_probe_columns_are_offered_hidden_and_p_values_keep_their_significant_digits():
    probes = ["Circular", "Circ. drop", "Letter RStd", "PriDe", "Order 1st", "Order p", "ECE", "Acc@10%"]
    assert set(probes) <= set(board_lib.CHOICES) and not set(probes) & set(board_lib.DEFAULT_COLUMNS)
    rows = [row("org/m", 60.0, circular=41.2345, order_p=1.234567e-9), row("org/n", 50.0, order_p=0.5)]
    shown = board_lib.select(board_lib.merge(rows, HERE), columns=["Circular", "Order p"], search="org/")
    assert shown.columns.tolist() == ["Model", COMPARISON, "Circular", "Order p"]
    assert shown["Circular"].iloc[0] == 41.23 and pd.isna(shown["Circular"].iloc[1])  # null until a probe ran
    assert shown["Order p"].tolist() == [1.2e-9, 0.5]  # 2 significant digits, not 0.0
    assert [uncertainty.p_text(p) for p in (0.41, 0.0031, 1.234e-9, 1.0)] == ["0.41", "0.0031", "1.2e-09", "1"]


def test_the_about_section_explains_every_probe_and_uncertainty_column_on_the_board():
    text = about.probes_markdown()
    calibration = calibration_lib.summarise(pd.DataFrame({"answer_type": []}))  # the calibration columns
    described = {c.label for c in RESULT_COLUMNS if c.board and c.name in {*PROBE_COLUMNS, *calibration}}
    for label in [*described, FULL_CI, SUBSET_CI, SEPARATION]:
        assert f"**{label}**" in text, label
    assert "not knowledge" in text and "does not prove the items were not seen" in text


def test_about_columns_every_board_column_has_a_row_generated_from_its_declaration():
    text = about.about_markdown(PROTOCOL)
    table = [
        line for line in text.splitlines() if line.startswith("| ") and not line.startswith(("| Column ", "| ---"))
    ]
    cells = {}
    for line in table:
        label, meaning, covers, higher = (c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1])
        cells[label] = (meaning.replace("\\|", "|"), covers, higher)
    offered = board_lib.select(board_lib.merge(ROWS, HERE), columns=board_lib.CHOICES).columns.tolist()
    assert list(cells) == offered  # one row per column the board offers, in board order
    declared = {c.label: c for c in RESULT_COLUMNS if c.board} | {c.label: c for c in board_lib.DERIVED}
    declared[COMPARISON] = board_lib.COMPARISON_COLUMN
    for label, column in declared.items():
        meaning, covers, higher = cells[label]
        assert meaning.startswith(column.doc.replace("<", "&lt;").replace(">", "&gt;")), label
        assert covers == (column.covers or "—"), label
        assert higher == {True: "yes", False: "no (lower is better)", None: "—"}[column.higher_is_better], label
    for label in ("Subset on", "Coverage (%)", "Data fingerprint", "Data", COMPARISON, "Origin", "Conf. gap"):
        assert len(cells[label][0]) > 30, label  # defined, not only named
    assert "single-answer" in cells["Single"][1] and "multi-answer" in cells["Multi"][1]
    assert "practitioners" in cells["Subset"][1] and "every scorable item" in cells["Full"][1]


def test_about_columns_a_board_column_declared_without_its_meaning_is_refused():
    with pytest.raises(ValueError, match="'new_score' is on the board but says nothing"):
        ResultColumn("new_score", "New score", "float32", True, covers="Full's items")
    ResultColumn("n_new", "New items", "int32", board=False)  # off the board: nothing to define
    with pytest.raises(ValueError, match="'New CI' says nothing"):
        board_lib.DerivedColumn("New CI", "Full", True, "")


def test_board_marks_rows_from_the_outputs_recorded_in_the_store(tmp_path):
    """The store's outputs parts (only model, revision, protocol, item_id, correct are read); a part
    without per-item correctness (a stand-in harness's) gives no mark."""
    store = SQLiteStore(tmp_path / "store")
    for i, (model, right) in enumerate([("org/a", A), ("org/b", B), ("org/c", C), ("org/stand-in", C)]):
        part = tmp_path / f"{i}.parquet"
        outputs = pd.DataFrame({"model": model, "item_id": IDS, "generated_text": "A"})
        if model != "org/stand-in":
            outputs = outputs.assign(correct=planted(right).to_numpy(), revision="1" * 40, protocol=PROTOCOL)
        outputs.to_parquet(part)
        job = store.submit(model, f"{i:040x}", PROTOCOL, "test")
        claimed = store.claim("w")
        assert claimed is not None and claimed.id == job.id
        assert store.finish(claimed, row(model, 100 * len(right) / N_ITEMS - 0.01 * (model == "org/stand-in")), [part])
    got = marks(Board(store).frame())
    assert got["org/b"].startswith("≠ org/a (p=") and got["org/c"].startswith("≈ org/b (p=")
    assert got["org/stand-in"] == ""


def test_comparable_is_the_served_data_after_a_corpus_fix(tmp_path, demo_tree, demo_items):
    """After a corpus fix, the one row run on the fixed data ranks and the majority run on the old data
    reads 'other data': the reference is the served corpus's fingerprint, as the harness computes it."""
    import json

    from tcmqa.build import build
    from tcmqa.data import load_config
    from tcmqa.runs import data_fingerprint

    fixed_items = [dict(item) for item in demo_items]
    fixed_items[0]["question"] += " (corrected)"
    (tmp_path / "fixed.jsonl").write_text("".join(json.dumps(item, ensure_ascii=False) + "\n" for item in fixed_items))
    fixed = tmp_path / "fixed"
    build([str(tmp_path / "fixed.jsonl")], fixed)
    old, new = board_lib.served_fingerprint(str(demo_tree)), board_lib.served_fingerprint(str(fixed))
    scorable = [item for item in load_config(str(fixed), "corpus").to_list() if not item["flagged"]]
    assert new == data_fingerprint(scorable) and old != new
    store = SQLiteStore(tmp_path / "store")
    results = [row("org/stale-1", 60.0, old), row("org/stale-2", 61.0, old), row("org/current", 50.0, new)]
    for i, result in enumerate(results):
        store.submit(result["model"], f"{i:040x}", PROTOCOL, "test")
        assert store.finish(store.claim("w"), result, [])
    frame = Board(store, data_fingerprint=new).frame()
    assert labelled(frame)[("org/current", 50.0)] == COMPARABLE
    assert labelled(frame)[("org/stale-1", 60.0)] == labelled(frame)[("org/stale-2", 61.0)] == OTHER_DATA
    assert frame.loc[frame[COMPARISON] == COMPARABLE, "Model"].iloc[0] == "org/current"


def test_order_first_never_without_chance():
    """Order 1st is shown only in one cell with its chance rate, whatever columns are chosen, however the board
    is sorted: a CPU run (23 other orders, chance 4.17%) and a GPU run (119, 0.83%) each read against their own.
    Sorting by Order 1st sorts by its value."""
    rows = [
        row("org/cpu", 60.0, order_first=6.4712, order_chance=100 / 24, order_p=4e-8),
        row("org/gpu", 50.0, order_first=1.2, order_chance=100 / 120, order_p=0.01),
        row("org/high", 40.0, order_first=10.5, order_chance=100 / 24, order_p=1e-12),
        row("org/unprobed", 30.0),
    ]
    frame = board_lib.merge(rows, HERE)
    expected = {"org/cpu": "6.47 (chance 4.17)", "org/gpu": "1.20 (chance 0.83)", "org/high": "10.50 (chance 4.17)"}
    for columns in (["Order 1st"], ["Order p", "Order 1st"], board_lib.CHOICES, board_lib.DEFAULT_COLUMNS):
        shown = board_lib.select(frame, columns=columns, search="org/")
        if "Order 1st" not in columns:
            assert "Order 1st" not in shown
            continue
        cells = dict(zip(shown["Model"], shown["Order 1st"]))
        assert {m: cells[m] for m in expected} == expected and cells["org/unprobed"] == ""
    ranked = board_lib.select(frame, columns=["Order 1st"], search="org/", sort_by="Order 1st")
    assert ranked["Model"].tolist() == ["org/high", "org/cpu", "org/gpu", "org/unprobed"]  # 10.5 > 6.47: by value
    chance = next(c for c in RESULT_COLUMNS if c.name == "order_first").read_against
    assert chance is not None and chance[0] == "order_chance"  # declared once, in the schema
    assert "'x (chance y)'" in about.probes_markdown()
