"""Each run's outcome bitmaps (tcmqa.store.outcomes) and the reference kept as counts over them
(tcmqa.leaderboard.outcomes): aggregated once by the first reader after the run is recorded, replaced when
it is re-recorded, gone when it is withdrawn, for jobs finished before migration 7 too; the maintained
counts equal a recount and the old computation from output rows after random sequences of responses,
exclusions and new models."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa
from sources import wrong_answer
from test_practitioner_reference import answer_all, confirm, corpus, study_tree_of

import tcmqa.store as store_module
from tcmqa.leaderboard import outcomes
from tcmqa.leaderboard.practice import PracticeLoader
from tcmqa.prompts import PROTOCOL
from tcmqa.schema import OUTPUTS
from tcmqa.store import MIGRATIONS, SQLiteStore, Store

SHA = "b" * 40


def _part(path: Path, model: str, right: dict[str, bool]) -> Path:
    rows = [{"model": model, "item_id": i, "correct": c, "revision": SHA} for i, c in right.items()]
    pq.write_table(pa.Table.from_pylist(rows, schema=OUTPUTS.arrow_schema), path)
    return path


def _finish(store: Store, tmp_path: Path, model: str, *parts: dict[str, bool], **row: object) -> str:
    store.submit(model, SHA, PROTOCOL, "u")
    job = store.claim("w")
    paths = [_part(tmp_path / f"{model.replace('/', '_')}-{i}.parquet", model, p) for i, p in enumerate(parts)]
    assert store.finish(job, {"model": model, "revision": SHA, "protocol": PROTOCOL, **row}, paths)
    return job.id


def _vectors(store: Store, run: str) -> dict[str, bool]:
    """A stored outcome read back by item id: (item -> correct) over its answered items (the first read
    aggregates what was recorded since)."""
    store.outcome_index()
    items = store.item_numbers()
    [o] = store.outcomes([run], len(items))
    return {items[i]: bool(o.correct[i]) for i in np.flatnonzero(o.present)}


def test_outcome_recorded_replaced_and_withdrawn_with_its_run(url: str, tmp_path: Path) -> None:
    store = Store(url, cache_dir=tmp_path / "cache")
    # two parts; item "b" scored twice keeps its last record, as the outputs config does
    job = _finish(store, tmp_path, "org/a", {"a": True, "b": False}, {"b": True, "c": False})
    info = store.outcome_index()[job]
    assert (info.model, info.revision, info.protocol, info.source, info.n_items, info.n_correct) == (
        "org/a",
        SHA,
        PROTOCOL,
        "recorded",
        3,
        2,
    )
    assert _vectors(store, job) == {"a": True, "b": True, "c": False}
    other = _finish(store, tmp_path, "org/b", {"c": True, "d": True})
    assert _vectors(store, other) == {"c": True, "d": True}
    assert store.item_numbers() == ["a", "b", "c", "d"]  # numbered once, in order of first appearance
    assert _vectors(store, job) == {"a": True, "b": True, "c": False}  # an older bitmap reads at the new width

    # re-recorded (its claim lost and the job run again): the outcome is the new run's
    with store._write() as conn:
        conn.execute(sa.update(store_module.jobs_t).where(store_module.jobs_t.c.id == other).values(status="RUNNING"))
    job_b = store.get(other)
    assert store.finish(job_b, {"model": "org/b"}, [_part(tmp_path / "again.parquet", "org/b", {"d": False})])
    assert _vectors(store, other) == {"d": False}

    store.withdraw(job, "admin", "a wrong upload")
    assert set(store.outcome_index()) == {other}
    store.close()


def test_outcome_needs_correctness_and_published_runs_are_added_once(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "s")
    path = tmp_path / "stand-in.parquet"
    pd.DataFrame({"model": ["org/x"], "item_id": ["1"]}).to_parquet(path)  # a stand-in harness's part
    store.submit("org/x", SHA, PROTOCOL, "u")
    assert store.finish(store.claim("w"), {"model": "org/x"}, [path])
    assert store.outcome_index() == {}
    table = pa.table({"item_id": ["1", "2"], "correct": [True, False]})
    assert store.record_published([("org/p", "r1", 5.0, table)]) == 1
    assert store.record_published([("org/p", "r1", 5.0, table), ("org/q", "", 0.0, table)]) == 1
    assert {(i.model, i.revision, i.source, i.n_correct) for i in store.outcome_index().values()} == {
        ("org/p", "r1", "published", 1),
        ("org/q", "", "published", 1),
    }


def test_outcomes_of_jobs_finished_before_migration_7_are_aggregated_on_first_read(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_module, "MIGRATIONS", MIGRATIONS[:6])
    old = Store(url, cache_dir=tmp_path / "old")
    data = _part(tmp_path / "p.parquet", "org/old", {"x": True, "y": False}).read_bytes()
    with old._write() as conn:  # what version 6 wrote for a finished job
        conn.execute(
            sa.text(
                'INSERT INTO jobs (id, model, revision, protocol, "user", status, submitted_at, updated_at, '
                "attempts, status_at) VALUES ('j1', 'org/old', :r, :p, 'u', 'FINISHED', 1, 2, 1, 2)"
            ),
            {"r": SHA, "p": PROTOCOL},
        )
        conn.execute(sa.text("INSERT INTO results (job_id, row, recorded_at) VALUES ('j1', '{}', 2)"))
        conn.execute(sa.insert(store_module.outputs_t).values(job_id="j1", part=0, data=data))
    old.close()
    monkeypatch.undo()
    new = Store(url, cache_dir=tmp_path / "new")
    assert new.schema_version() == len(MIGRATIONS) >= 7
    assert new.record_outcomes() == 1 and new.record_outcomes() == 0  # once
    assert _vectors(new, "j1") == {"x": True, "y": False}
    new.close()


def _oracle(store: Store, subset: dict[str, bool], rows: list[dict]) -> list[tuple]:
    """The old computation, from every output row (the pandas path the counts replace)."""
    frames = [pd.read_parquet(p, columns=["model", "item_id", "correct"]) for p in store.outputs_files()]
    outputs = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["model", "item_id", "correct"])
    out = []
    for row in rows:
        mine = outputs[(outputs["model"] == row["model"]) & outputs["item_id"].isin(set(subset))]
        mine = mine.drop_duplicates("item_id", keep="last")
        if mine.empty:
            out.append((row["model"], None, None, None))
            continue
        human = 100 * sum(subset[i] for i in mine["item_id"]) / len(mine)
        out.append((row["model"], round(100 * float(mine["correct"].mean()), 9), round(human, 9), len(mine)))
    return out


def _seen(rows: list[dict]) -> list[tuple]:
    return [
        (r["model"], None, None, None)
        if r.get("subset_version") == "as recorded"
        else (r["model"], round(r["subset"], 9), round(r["human_reference"], 9), r["n_subset"])
        for r in rows
    ]


def test_reference_counts_equal_a_recount_after_random_subset_changes(tmp_path: Path) -> None:
    """Random subsets (items entering, leaving, their majority flipping) and runs added and withdrawn: the
    maintained counts equal a recount and the old pandas computation at every step."""
    rng = random.Random(7)
    store = SQLiteStore(tmp_path / "s")
    items = [f"i{k:02d}" for k in range(40)]
    reference = outcomes.Reference(outcomes.Outcomes(store))
    subset: dict[str, bool] = {}
    jobs: list[str] = []
    for step in range(60):
        action = rng.random()
        if action < 0.15 or not jobs:
            answered = rng.sample(items, rng.randint(5, 40))
            jobs.append(_finish(store, tmp_path, f"org/m{step}", {i: rng.random() < 0.6 for i in answered}))
        elif action < 0.2 and len(jobs) > 1:
            store.withdraw(jobs.pop(rng.randrange(len(jobs))), "admin", "random")
        else:
            for _ in range(rng.randint(1, 6)):  # a block finished, an exclusion, a flip
                item = rng.choice([*items, "never-answered"])
                if item in subset and rng.random() < 0.4:
                    del subset[item]
                else:
                    subset[item] = rng.random() < 0.7
        reference.set_subset(subset)
        assert {r: c.tolist() for r, c in reference.counts.items()} == {
            r: c.tolist() for r, c in reference.recount().items()
        }
        rows = store.results()
        assert _seen(reference.rows(rows)) == _oracle(store, subset, rows)


def test_practice_reference_follows_random_responses_exclusions_and_new_models(tmp_path: Path) -> None:
    """Practitioner mode end to end: blocks answered right or wrong, practitioners excluded and re-included,
    new models recorded, in a random order; after each step the board's reference rows equal the old
    computation on the subset as it stands."""
    rng = random.Random(11)
    tree = study_tree_of(tmp_path)
    store = SQLiteStore(tmp_path / "store")
    p = PracticeLoader(str(tree), store, block_size=4, admins=["admin"]).get()
    items = [i["id"] for i in corpus(tree) if not i["flagged"]]
    accounts = [f"rater{k}" for k in range(9)]
    confirm(p, *accounts)
    excluded: set[str] = set()
    n_models = 0
    for _ in range(14):
        action = rng.random()
        if action < 0.3 or n_models == 0:
            n_models += 1
            _finish(store, tmp_path, f"org/model-{n_models}", {i: rng.random() < 0.5 for i in items})
        elif action < 0.45 and len(excluded) < len(accounts):
            who = rng.choice(accounts)
            if who in excluded:
                p.include("admin", who, "reviewed")
                excluded.discard(who)
            elif p.store.practice_responses(account=who):
                p.exclude("admin", who, "random")
                excluded.add(who)
        else:
            who = rng.choice([a for a in accounts if a not in excluded])
            answer_all(p, who, right=rng.random() < 0.6)
        subset = p.subset_majority()
        rows = store.results()
        assert _seen(p.reference_rows(rows)) == _oracle(store, subset, rows)
    assert len(p.subset_majority()) > 16  # the Space's blocks entered the subset


def test_board_sets_the_subset_columns_in_place_after_a_response(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A practitioner's response changes only the subset columns: the board sets them in place of a merge,
    and what it shows equals a board merged anew, step after step; a new model merges again."""
    from tcmqa.leaderboard import board as board_lib

    rng = random.Random(3)
    tree = study_tree_of(tmp_path)
    store = SQLiteStore(tmp_path / "store")
    loader = PracticeLoader(str(tree), store, block_size=4, raters=1)
    p = loader.get()
    items = [i["id"] for i in corpus(tree) if not i["flagged"]]
    comparable = {"data_fingerprint": "fp", "coverage": 100.0, "origin": "evaluated"}
    for k in range(3):
        _finish(store, tmp_path, f"org/model-{k}", {i: rng.random() < 0.5 for i in items}, full=40.0 + k, **comparable)
    merges = []
    real_merge = board_lib.merge
    monkeypatch.setattr(board_lib, "merge", lambda *a, **k: merges.append(1) or real_merge(*a, **k))
    board = board_lib.Board(store, practice=loader)
    board.frame()
    assert len(merges) == 2  # the empty board made with it, then the first frame
    confirm(p, "ann", "bo")
    for account in ("ann", "bo"):
        while (view := p.current(account)) is not None:
            key = list(p.items[view.item_id]["answer"])
            p.submit(
                account,
                view.item_id,
                key if rng.random() < 0.7 else wrong_answer(key),
                domains=["other"],
                difficulty=2,
                seconds=5.0,
            )
            shown = board.frame()
            fresh = board_lib.Board(store, practice=loader).frame()
            pd.testing.assert_frame_equal(board_lib.select(shown), board_lib.select(fresh))
    # two per fresh board; on the running one only the first response merged (it brought the comparable
    # reference row: before any response here the rows are as recorded), the other seven set columns in place
    assert len(merges) == 2 + 2 * 8 + 1
    assert (shown["Origin"] == "reference").sum() == 2  # the paper's and the comparable rows' own
    on = shown.loc[shown["Origin"] == "evaluated", board_lib.SUBSET_ON]
    assert on.str.fullmatch(r"current [0-9a-f]{12}").all() and on.nunique() == 1  # one subset, its version
    _finish(store, tmp_path, "org/model-new", {i: True for i in items}, full=99.0, **comparable)
    assert "org/model-new" in board.frame()["Model"].tolist() and len(merges) == 2 + 2 * 8 + 2


def test_block_review_shows_the_models_best_on_the_block(tmp_path: Path) -> None:
    """A finished block's review sets beside each item the answers of the REVIEW_MODELS models best on the
    block (their accuracy counted over the outcomes), not every model's."""
    from tcmqa.leaderboard.practice.scoring import REVIEW_MODELS

    tree = study_tree_of(tmp_path)
    store = SQLiteStore(tmp_path / "store")
    p = PracticeLoader(str(tree), store, block_size=4, raters=1).get()
    confirm(p, "ann")
    block = answer_all(p, "ann")
    items = [i["id"] for i in corpus(tree) if not i["flagged"]]
    for k in range(REVIEW_MODELS + 2):  # model k right on the first k % 5 of the block's four items
        _finish(store, tmp_path, f"org/m{k:02d}", {i: i in block[: k % 5] for i in items})
    [assignment] = store.practice_assignments("ann")
    rows = p.review_rows("ann", assignment["block"])
    shown = set(rows[0]["models"])
    accuracy = {f"org/m{k:02d}": k % 5 for k in range(REVIEW_MODELS + 2)}
    assert len(shown) == REVIEW_MODELS and min(accuracy[m] for m in shown) >= max(
        accuracy[m] for m in set(accuracy) - shown
    )


def test_a_run_first_read_by_a_block_report_is_still_counted_by_the_board(tmp_path: Path) -> None:
    """Whichever reader loads a new run first (here a block report's model accuracies), the reference counts
    it: every reader refreshes the outcomes through Reference.update."""
    tree = study_tree_of(tmp_path)
    store = SQLiteStore(tmp_path / "store")
    p = PracticeLoader(str(tree), store, block_size=4, raters=1).get()
    items = [i["id"] for i in corpus(tree) if not i["flagged"]]
    _finish(store, tmp_path, "org/first", {i: True for i in items})
    assert p.models_on(items)["model"].tolist() == ["org/first"]  # the run loaded here first
    [row] = p.reference_rows(store.results())
    assert row["subset"] == 100.0 and row["subset_version"] != "as recorded"


def test_subset_ci_recounted_with_subset(tmp_path: Path) -> None:
    """Practitioners' responses change the subset: the board's Subset 95% CI is recounted with Subset (the
    in-place path and a fresh merge alike), so it always contains the Subset shown and equals the interval a
    results row computes from that run's correctness on the subset as it stands; the interval the run recorded
    on the subset of its day (planted far off) is not shown."""
    from tcmqa.leaderboard import board as board_lib
    from tcmqa.leaderboard import uncertainty
    from tcmqa.results import interval

    rng = random.Random(5)
    tree = study_tree_of(tmp_path)
    store = SQLiteStore(tmp_path / "store")
    loader = PracticeLoader(str(tree), store, block_size=4, raters=1)
    p = loader.get()
    items = [i["id"] for i in corpus(tree) if not i["flagged"]]
    right = {i: rng.random() < 0.5 for i in items}
    recorded = {"subset": 1.5, "subset_ci_low": 1.0, "subset_ci_high": 2.0}  # the subset of its day
    _finish(store, tmp_path, "org/m", right, full=40.0, data_fingerprint="fp", coverage=100.0, **recorded)
    board = board_lib.Board(store, practice=loader)
    confirm(p, "ann", "bo")
    seen = set()
    for account in ("ann", "bo"):
        while (view := p.current(account)) is not None:
            key = list(p.items[view.item_id]["answer"])
            letters = key if rng.random() < 0.6 else wrong_answer(key)
            p.submit(account, view.item_id, letters, domains=["other"], difficulty=2, seconds=5.0)
            subset = p.subset_majority()
            on_subset = pd.Series([right[i] for i in subset if i in right], dtype=bool)
            for frame in (board.frame(), board_lib.Board(store, practice=loader).frame()):
                shown = frame.loc[frame["Model"] == "org/m"].iloc[0]
                low, high = interval(on_subset)
                assert shown["Subset"] == round(100 * on_subset.mean(), 2)
                assert shown[board_lib.SUBSET_CI] == uncertainty.interval_text(low, high)
                assert low is not None and high is not None and low <= 100 * on_subset.mean() <= high
            seen.add(shown["Subset"])
    assert len(seen) > 2  # the subset did change Subset, step after step
