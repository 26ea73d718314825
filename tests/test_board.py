"""The board ranks together only comparable rows (same data fingerprint, same protocol, full coverage)
and shows the others apart, labelled; the practitioner reference sits with the rows it was computed
beside; families are spelled as the paper spells them."""

from __future__ import annotations

import pandas as pd

from tcmqa.leaderboard import board as board_lib
from tcmqa.leaderboard.board import (
    COMPARABLE,
    COMPARISON,
    HUMAN_NAME,
    OTHER_DATA,
    OTHER_PROTOCOL,
    PAPER,
    PARTIAL,
    UNKNOWN_DATA,
    Board,
)
from tcmqa.prompts import PROTOCOL
from tcmqa.results import PAPER_HUMAN_REFERENCE, canonical_family
from tcmqa.schema import RESULTS
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


def test_comparable_rows_are_ranked_together_first_and_the_rest_apart_in_groups():
    frame = board_lib.merge(ROWS, HERE)
    groups = frame[COMPARISON].tolist()
    order = [board_lib.COMPARISONS.index(g) for g in groups]
    assert order == sorted(order)  # groups in board order: comparable first, the paper's rows last
    comparable = frame[frame[COMPARISON] == COMPARABLE]
    assert comparable["Model"].tolist() == ["org/full", "org/second", HUMAN_NAME]  # best Full first, reference last
    assert frame["Model"].iloc[0] == "org/full"  # though a partial run and other data scored higher
    for sort_by, descending in (("Full", False), ("Params (B)", True), ("Model", False)):
        shown = board_lib.select(frame, columns=board_lib.DEFAULT_COLUMNS, sort_by=sort_by, descending=descending)
        ranks = [board_lib.COMPARISONS.index(g) for g in shown[COMPARISON]]
        assert ranks == sorted(ranks), sort_by
    ascending = board_lib.select(frame, sort_by="Full", descending=False)
    assert ascending["Model"].tolist()[:3] == ["org/second", "org/full", HUMAN_NAME]


def test_the_comparison_column_is_always_shown_after_the_model():
    frame = board_lib.merge(ROWS, HERE)
    shown = board_lib.select(frame, columns=["Full"])
    assert shown.columns.tolist() == ["Model", COMPARISON, "Full"]
    partial = board_lib.select(frame, search="org/full")
    assert partial[[COMPARISON, "Full"]].values.tolist() == [[COMPARABLE, 60.0], [PARTIAL, 80.0]]
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
    assert frame["Model"].iloc[0] == "org/full" and frame[COMPARISON].iloc[0] == COMPARABLE
    assert labelled(frame)[("org/full", 80.0)] == PARTIAL
    assert "Qwen2" in board.families() and "Human" not in board.families()
    assert Board(store, data_fingerprint=ELSEWHERE).frame()[COMPARISON].iloc[0] == COMPARABLE


def test_plot_frames_carry_the_comparison_label():
    scatter, bars = board_lib.plot_frames(board_lib.merge(ROWS, HERE))
    assert set(scatter.loc[scatter["model"] == "org/other-data", "comparison"]) == {OTHER_DATA}
    assert set(bars.loc[bars["model"] == "org/full", "comparison"]) == {COMPARABLE, PARTIAL}
