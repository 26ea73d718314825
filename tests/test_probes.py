"""Probes: each statistic against planted truths (a bias it must catch, none it must not invent), known
answers by hand, and ``tcmqa probe`` end to end on the tiny model (rows, resume, refusals, v1 rows
untouched). The memorisation control (a model trained to memorise) is in test_memorisation.py."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import shutil

import numpy as np
import pandas as pd
import pytest

from tcmqa.harness import EvalConfig, run
from tcmqa.probes import PROBE_VERSION, calibration, order, rotation
from tcmqa.probes.run import PROBES_DIR, ProbeConfig, read_probes, run_probes
from tcmqa.results import PROBE_COLUMNS
from tcmqa_metric import LETTERS


# -- rotations --------------------------------------------------------------------------------
def test_every_rotation_keeps_the_answer_on_its_option_and_shows_each_option_once_per_letter(demo_items):
    from tcmqa.ingest import clean_item

    item = clean_item(next(i for i in demo_items if len(i["answer"]) > 1))
    shown = {letter: set() for letter in LETTERS}
    for k in range(rotation.ROTATIONS):
        turned = rotation.rotate(item, k)
        assert {turned["options"][a] for a in turned["answer"]} == {item["options"][a] for a in item["answer"]}
        assert turned["answer"] == sorted(turned["answer"])
        for letter in LETTERS:
            shown[letter].add(turned["options"][letter])
    assert all(options == set(item["options"].values()) for options in shown.values())
    with pytest.raises(ValueError, match="rotation must be"):
        rotation.rotate(item, 5)


def simulated_rotations(n_items: int, bias: dict[str, float], skill: float, seed: int = 0) -> pd.DataFrame:
    """Rotation rows of a simulated model: a letter's log-prob is ``skill`` on the right option, a letter
    bias, a fixed preference for each option's content and noise that differs between rotations; the
    generative prediction is the log-prob argmax."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n_items):
        gold = rng.integers(5)  # index of the right option in the published order
        noise = rng.normal(0, 1, size=5)  # a fixed preference for each option's content
        for k in range(rotation.ROTATIONS):
            shown_gold = LETTERS[(gold - k) % 5]
            logits = {}
            for j, letter in enumerate(LETTERS):
                content = (j + k) % 5  # published option shown at this letter
                logits[letter] = noise[content] + (skill if content == gold else 0.0) + bias.get(letter, 0.0)
                logits[letter] += rng.normal(0, 0.5)
            top = max(logits.values())
            norm = top + math.log(sum(math.exp(v - top) for v in logits.values()))
            lp = {letter: v - norm for letter, v in logits.items()}
            predicted = max(LETTERS, key=lp.__getitem__)
            rows.append(
                {
                    "item_id": f"q{i}",
                    "answer_type": "single",
                    "rotation": k,
                    "answer": [shown_gold],
                    "prediction": [predicted],
                    "correct": predicted == shown_gold,
                    "letter_logprobs": lp,
                    "lp_correct": predicted == shown_gold,
                }
            )
    return pd.DataFrame(rows)


def test_a_planted_letter_bias_is_measured_and_pride_removes_it():
    biased = rotation.summarise(simulated_rotations(400, {"A": 2.5}, skill=2.0))
    fair = rotation.summarise(simulated_rotations(400, {}, skill=2.0))
    assert biased["n_rotation"] == fair["n_rotation"] == 400
    # the bias: recall of A far above the others; unbiased recalls are equal up to noise
    assert biased["recall_std"] > 20, biased
    assert fair["recall_std"] < 5, fair
    # removing the prior recovers the unbiased model's accuracy; on a fair model it changes little
    assert biased["pride"] > biased["rotation_mean"] + 10, biased
    assert abs(biased["pride"] - fair["rotation_mean"]) < 6, (biased, fair)
    assert abs(fair["pride"] - fair["rotation_mean"]) < 6, fair
    # circular: never above the mean over rotations; the biased model loses more
    assert fair["circular"] <= fair["rotation_mean"] and biased["circular"] < fair["circular"]


def test_circular_accuracy_and_its_drop_by_hand():
    rows = pd.DataFrame(
        [
            {
                "item_id": item,
                "answer_type": "multi",
                "rotation": k,
                "answer": ["A", "B"],
                "prediction": [],
                "correct": correct,
                "letter_logprobs": dict.fromkeys(LETTERS, -1.6),
                "lp_correct": False,
            }
            for item, pattern in (("x", [1, 1, 1, 1, 1]), ("y", [1, 0, 1, 1, 1]), ("z", [0, 0, 0, 0, 0]))
            for k, correct in enumerate(map(bool, pattern))
        ]
        + [
            {
                "item_id": "w",
                "answer_type": "multi",
                "rotation": 0,
                "answer": ["A"],
                "prediction": ["A"],
                "correct": True,
                "letter_logprobs": dict.fromkeys(LETTERS, -1.6),
                "lp_correct": True,
            }
        ]
    )
    found = rotation.summarise(rows)
    # w lacks four rotations: left out. x is right under all five; y under four; z under none.
    assert found["n_rotation"] == 3
    assert found["circular"] == pytest.approx(100 / 3)
    assert found["rotation_mean"] == pytest.approx(100 * 9 / 15)
    assert found["circular_drop"] == pytest.approx(100 * 2 / 3 - 100 / 3)
    assert found["recall_std"] is None and found["pride"] is None  # no single-answer item


# -- calibration -------------------------------------------------------------------------------
def test_calibration_finds_a_planted_overconfidence_and_passes_a_calibrated_model():
    rng = np.random.default_rng(0)
    confidence = rng.uniform(0.2, 1.0, size=20000)
    calibrated = rng.uniform(size=confidence.size) < confidence
    overconfident = rng.uniform(size=confidence.size) < confidence - 0.15
    assert 100 * calibration.equal_mass_ece(confidence, calibrated) < 1.5
    assert 100 * calibration.equal_mass_ece(confidence, overconfident) == pytest.approx(15, abs=1.5)
    # selective accuracy: the most confident 10% of a calibrated model are right about 96% of the time
    assert calibration.selective_accuracy(confidence, calibrated) == pytest.approx(0.96, abs=0.02)
    assert calibration.accuracy_coverage_area(confidence, calibrated) > calibrated.mean()


def test_calibration_columns_from_output_rows_by_hand():
    rows = pd.DataFrame(
        {
            "answer_type": ["single", "single", "multi"],
            # renormalised over A-E: first row 0.8 on A (0.4 of 0.5), second 0.4 on B (0.2 of 0.5)
            "letter_logprobs": [
                dict(zip(LETTERS, np.log([0.4, 0.025, 0.025, 0.025, 0.025]))),
                dict(zip(LETTERS, np.log([0.1, 0.2, 0.1, 0.0005, 0.0995]))),
                dict.fromkeys(LETTERS, -1.0),
            ],
            "lp_correct": [True, False, False],
        }
    )
    found = calibration.summarise(rows)
    # bins of one item each (two items, ten bins): |1 - 0.8| and |0 - 0.4|, half each
    assert found["ece"] == pytest.approx(100 * (0.2 + 0.4) / 2)
    assert found["acc_top10"] == 100.0  # the top 10% is the one most confident item: right
    assert found["acc_coverage_area"] == pytest.approx(100 * (1 + 0.5) / 2)


# -- order test --------------------------------------------------------------------------------
def test_the_orders_compared_on_the_real_sample_share_every_feature(sample_dir):
    from tcmqa.ingest import InvalidRecord, clean_item

    reasons: dict[str, int] = {}
    sequences: dict[str, int] = {}
    for line in (sample_dir / "items.jsonl").read_text(encoding="utf-8").splitlines():
        try:
            item = clean_item(json.loads(line))
        except InvalidRecord:
            continue
        reason = order.convention(item)
        reasons[reason] = reasons.get(reason, 0) + 1
        for places in order.canonical_places(order._options(item)):
            for name, _ in places:
                sequences[name] = sequences.get(name, 0) + 1
        features, shared = order.option_features(item), order.shared_surface(order._options(item))
        for other in order.other_orders(item, order.ALL_ORDERS):
            assert [features[j] for j in other] == features, item
            assert (shared[:, other][:, :, other] == shared).all(), item
    print(reasons, sequences)
    assert reasons[""] > 0.4 * sum(reasons.values())  # enough items stay testable
    assert sequences["五脏"] >= 100 and sequences["五行"] >= 10 and sequences["六经"] >= 10


def test_order_nan_or_infinite_scores_raise_naming_the_item():
    item = {"id": "q-7", "answer_type": "single"}
    for bad in (math.nan, -math.inf, math.inf):
        with pytest.raises(ValueError, match="item q-7: the engine scored an order"):
            order.order_row(item, [-10.0, bad, -11.0])
        with pytest.raises(ValueError, match="must be finite"):
            order.rank([bad, -10.0, -11.0])
    assert order.order_row(item, [-10.0, -12.0, -11.0])["order_rank"] == 1


def test_order_summary_by_hand_with_as_many_orders_as_each_item_has():
    rows = pd.DataFrame(
        {
            "convention": ["", "", "", "", "no_equivalent_order"],
            "n_orders": [24, 2, 6, 24, None],
            "order_rank": [1, 1, 5, 24, None],
            "order_percentile": [100.0, 100.0, 20.0, 0.0, None],
        }
    )
    found = order.summarise(rows)
    assert found["n_order"] == 4 and found["order_excluded"] == 1
    assert found["order_first"] == 50.0
    assert found["order_chance"] == pytest.approx(100 * (1 / 24 + 1 / 2 + 1 / 6 + 1 / 24) / 4)
    assert found["order_percentile"] == 55.0
    # P(two or more of four firsts) with chances 1/24, 1/2, 1/6, 1/24, by enumeration
    chances = [1 / 24, 1 / 2, 1 / 6, 1 / 24]
    expected = sum(
        math.prod(c if hit else 1 - c for c, hit in zip(chances, hits))
        for hits in itertools.product([0, 1], repeat=4)
        if sum(hits) >= 2
    )
    assert found["order_p"] == pytest.approx(expected, rel=1e-12)


def test_the_stratified_sample_keeps_answer_type_shares_and_is_stable(demo_items):
    from tcmqa.ingest import clean_item

    items = [clean_item(i) for i in demo_items] * 4
    items = [{**item, "id": f"{item['id']}-{k}"} for k, item in enumerate(items)]
    picked = order.sample_items(items, 40, seed=0)
    multi_share = sum(i["answer_type"] == "multi" for i in items) / len(items)
    assert len(picked) == 40 and abs(sum(i["answer_type"] == "multi" for i in picked) / 40 - multi_share) < 0.05
    ids = {i["id"] for i in picked}
    assert {i["id"] for i in order.sample_items(list(reversed(items)), 40, seed=0)} == ids  # input order is moot
    assert order.sample_items(items, 40, seed=1) != picked
    assert order.sample_items(items, None) == items


# -- the engines' log-likelihood ----------------------------------------------------------------
def test_batched_loglikelihood_equals_one_unpadded_forward_per_sequence(tiny_engine):
    import torch

    texts = ["五行中，木的特性是\nA. 曲直", "肝主", "五脏中主藏血的是\nA. 心\nB. 肝\nC. 脾\nD. 肺\nE. 肾"]
    sequences = [tiny_engine.tokenizer(t)["input_ids"] for t in texts]
    for context in ([1, 1, 1], [len(sequences[0]) - 2, 1, 5]):
        batched = tiny_engine.loglikelihood(sequences, context)
        for seq, start, value in zip(sequences, context, batched, strict=True):
            with torch.inference_mode():
                logits = tiny_engine.model(input_ids=torch.tensor([seq])).logits[0].float()
            every = torch.log_softmax(logits[:-1], -1).gather(-1, torch.tensor(seq[1:])[:, None])[:, 0]
            assert value == pytest.approx(every[start - 1 :].sum().item(), abs=1e-4), (context, seq)
    assert tiny_engine.loglikelihood(sequences, 1) == pytest.approx(tiny_engine.loglikelihood(sequences), abs=1e-9)
    with pytest.raises(ValueError, match="at least one token"):
        tiny_engine.loglikelihood([[1]])
    with pytest.raises(ValueError, match="at least one token"):
        tiny_engine.loglikelihood([sequences[0]], len(sequences[0]))


def test_order_nan_an_impossible_padding_token_leaves_the_loglikelihood_finite(tiny_engine):
    """A padded position the engine does not score may hold -inf (a token the model rules out): it must
    be dropped, not multiplied by 0 (NaN)."""
    long, short = (
        tiny_engine.tokenizer("五脏中主藏血的是\nA. 心\nB. 肝\nC. 脾\nD. 肺\nE. 肾")["input_ids"],
        tiny_engine.tokenizer("肝主")["input_ids"],
    )

    def rule_out_padding(module, args, output):
        output = output.clone()
        output[..., tiny_engine.pad_id] = -math.inf
        return output

    handle = tiny_engine.model.get_output_embeddings().register_forward_hook(rule_out_padding)
    try:
        found = tiny_engine.loglikelihood([long, short])
        alone = tiny_engine.loglikelihood([short])  # no padding
    finally:
        handle.remove()
    assert all(math.isfinite(value) for value in found), found
    assert found[1] == pytest.approx(alone[0], abs=1e-4)


# -- tcmqa probe end to end ------------------------------------------------------------------
@pytest.fixture(scope="module")
def probed_run(tmp_path_factory, tiny_eval, tiny_engine):
    out = tmp_path_factory.mktemp("probed") / "run"
    run(EvalConfig(**tiny_eval, out=out), engine=tiny_engine)
    digest = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((out / "outputs").glob("*"))}
    results = run_probes(ProbeConfig(out, rotations="all", order_items="12", orders=5, chunk_size=4), tiny_engine)
    return out, digest, results


def test_probe_rows_columns_and_the_v1_run_untouched(probed_run, tiny_eval):
    out, digest, results = probed_run
    outputs = pd.concat(pd.read_parquet(p) for p in sorted((out / "outputs").glob("*.parquet")))
    assert digest == {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted((out / "outputs").glob("*"))}
    rows = read_probes(out)
    rotated, tested = rows[rows["probe"] == "rotation"], rows[rows["probe"] == "order"]
    assert len(rotated) == 5 * len(outputs) and set(rotated["rotation"]) == set(range(5))
    assert len(tested) == 12 and tested["n_orders"].dropna().between(2, 6).all()  # up to 5 others sharing features
    assert set(rows["probe_version"]) == {PROBE_VERSION}
    # rotation 0 is the v1 row itself
    zero = rotated[rotated["rotation"] == 0].set_index("item_id")
    v1 = outputs.set_index("item_id")
    for column in ("generated_text", "prompt_hash", "correct", "lp_prediction"):
        assert (zero.loc[v1.index, column] == v1[column]).all(), column
    # rotated prompts differ from the published one; answers moved with the options
    assert rotated.groupby("item_id")["prompt_hash"].nunique().eq(5).all()
    assert results["n_rotation"] == len(outputs) and results["n_order"] + results["order_excluded"] == 12
    assert results["n_order"] == tested["n_orders"].notna().sum() > 0
    assert json.loads((out / "results.json").read_text()) == results
    assert all(name in results for name in PROBE_COLUMNS) and results["probe_version"] == PROBE_VERSION


def test_probe_resumes_and_refuses_another_plan_or_model(probed_run, tiny_engine, tiny_dir, tmp_path):
    out, _, results = probed_run
    config = ProbeConfig(out, rotations="all", order_items="12", orders=5, chunk_size=4)
    (out / PROBES_DIR / "rotation-00001.parquet").unlink()  # as if the run died writing it
    again = run_probes(config, tiny_engine)
    done = json.loads((out / "probes.json").read_text())["generated_now"]
    assert done == {"rotation": 4, "order": 0} and again == results
    with pytest.raises(SystemExit, match="another plan"):
        run_probes(ProbeConfig(out, rotations="all", order_items="10", orders=5, chunk_size=4), tiny_engine)
    other = tmp_path / "other-model"
    shutil.copytree(tiny_dir, other)
    (other / "note.txt").write_text("another revision")
    from tcmqa.engines import load_engine

    engine = load_engine("transformers", str(other), dtype="float32", batch_size=4)
    with pytest.raises(SystemExit, match="revision"):
        run_probes(config, engine)


def test_tcmqa_probe_command_loads_the_run_model(probed_run, capsys, tmp_path):
    from tcmqa.cli import main

    out, _, results = probed_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    shutil.rmtree(copy / PROBES_DIR)
    (copy / "probes.json").unlink()
    assert main(["probe", str(copy), "--rotations", "none", "--order-items", "6", "--orders", "5"]) == 0
    printed = capsys.readouterr().out
    assert "Order 1st" in printed and "Circular" in printed
    again = json.loads((copy / "results.json").read_text())
    assert again["n_rotation"] == 0 and again["n_order"] + again["order_excluded"] == 6
    assert again["full"] == results["full"]  # the v1 columns are the run's


def with_multi_answer_items(single: pd.DataFrame, n_items: int) -> pd.DataFrame:
    """``single`` plus ``n_items`` multi-answer items under all five rotations, which the log-prob channel (one
    letter) always misses and the generative channel gets right."""
    rows = [
        {
            "item_id": f"m{i}",
            "answer_type": "multi",
            "rotation": k,
            "answer": ["A", "B"],
            "prediction": ["A", "B"],
            "correct": True,
            "letter_logprobs": dict.fromkeys(LETTERS, math.log(0.2)),
            "lp_correct": False,
        }
        for i in range(n_items)
        for k in range(rotation.ROTATIONS)
    ]
    return pd.concat([single, pd.DataFrame(rows)], ignore_index=True)


def test_pride_compared_on_its_items():
    """With no letter prior, PriDe equals the log-prob channel on PriDe's own scored items (pride_lp, computed
    where PriDe is), while LP Full, which counts the multi-answer items the channel always misses, is far below
    both; the board shows PriDe with pride_lp in one cell and the About text compares PriDe with that, never
    with LP Full."""
    from tcmqa.leaderboard import about
    from tcmqa.leaderboard import board as board_lib
    from tcmqa.schema import RESULTS

    rows = with_multi_answer_items(simulated_rotations(400, {}, skill=2.0), 150)
    found = rotation.summarise(rows)
    published = rows[rows["rotation"] == 0]
    lp_full = 100 * published["lp_correct"].mean()
    single_ids = list(dict.fromkeys(published.loc[published["answer_type"] == "single", "item_id"]))
    estimated = rotation._estimation_items(single_ids, rotation.PRIDE_SHARE, 0)
    scored = published[(published["answer_type"] == "single") & ~published["item_id"].isin(estimated)]
    assert found["pride_lp"] == pytest.approx(100 * scored["lp_correct"].mean())  # the same items, by hand
    assert abs(found["pride"] - found["pride_lp"]) < 3, found  # no prior: nothing to remove
    assert lp_full < found["pride"] - 15, (lp_full, found)  # LP Full would blame a prior that is not there
    biased = rotation.summarise(with_multi_answer_items(simulated_rotations(400, {"A": 2.5}, skill=2.0), 150))
    assert biased["pride"] > biased["pride_lp"] + 10, biased  # a planted prior: PriDe above its own baseline
    result = {name: None for name in RESULTS} | {"model": "org/m", "origin": "evaluated", **found}
    frame = board_lib.merge([result], "a" * 16)
    cell = frame.loc[frame["Model"] == "org/m", "PriDe"].iloc[0]
    assert cell == f"{found['pride']:.2f} (LP {found['pride_lp']:.2f})"
    text = about.probes_markdown()
    pride = next(line for line in text.splitlines() if line.startswith("- **PriDe**"))
    assert "above LP Full" not in pride and "Not comparable with LP Full" in pride and "(LP y)" in pride


def test_rotation_mean_compared_on_same_items():
    """Rot. mean is on the items probed under all five rotations; it is read against the published-order
    accuracy on those same items (rotation_published, computed where Rot. mean is), not against Full, which
    also counts items the rotations left out."""
    from tcmqa.leaderboard import about
    from tcmqa.leaderboard import board as board_lib
    from tcmqa.schema import RESULTS

    def item(item_id: str, pattern: list[int]) -> list[dict]:
        return [
            {
                "item_id": item_id,
                "answer_type": "multi",
                "rotation": k,
                "answer": ["A", "B"],
                "prediction": [],
                "correct": bool(right),
                "letter_logprobs": dict.fromkeys(LETTERS, -1.6),
                "lp_correct": False,
            }
            for k, right in enumerate(pattern)
        ]

    # x right under all five, y under four, z under none; w and v (one rotation each, right) are left out
    rows = pd.DataFrame(
        item("x", [1] * 5) + item("y", [0, 1, 1, 1, 1]) + item("z", [0] * 5) + item("w", [1]) + item("v", [1])
    )
    found = rotation.summarise(rows)
    assert found["rotation_mean"] == pytest.approx(100 * 9 / 15)
    assert found["rotation_published"] == pytest.approx(100 / 3)  # x only: y and z are wrong as published
    full = 100 * rows.loc[rows["rotation"] == 0, "correct"].mean()  # 3 of 5: w and v count here
    assert full == pytest.approx(60.0) and found["rotation_published"] != full
    result = {name: None for name in RESULTS} | {"model": "org/m", "origin": "evaluated", "full": full, **found}
    frame = board_lib.merge([result], "a" * 16)
    assert frame.loc[frame["Model"] == "org/m", "Rot. mean"].iloc[0] == "60.00 (published 33.33)"
    line = next(x for x in about.probes_markdown().splitlines() if x.startswith("- **Rot. mean**"))
    assert "gap to Full" not in line and "published order on the same items" in line
