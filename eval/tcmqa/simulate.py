"""``tcmqa simulate``: a full-scale SIMULATED study, written in the real schemas.

This is simulation, not data. It exists so that every table and figure can be exercised and
benchmarked at the paper's scale (38,279 items, 101 raters, 15,151 responses, 29 models, 1.1 M
output rows) before or without the real release, and so that tests can plant a property and
check the analysis recovers it. Real data always takes precedence: nothing here is a finding.

How it is made, so the output is honest about itself:

* raw sources as the real pipeline sees them (``raw/items.jsonl`` and a platform SQLite database
  with the ``user_interactions`` table) go through the real builder (``tcmqa build``), so the
  ``data/`` tree has exactly the layout, features and card of a built release; every stem,
  source and revision says SIMULATED;
* each item has a practitioner difficulty ``d`` (spread ``practitioner_spread``; it makes the three
  raters of an item agree, as in Table 6) and a model difficulty ``e`` shared by all models (spread
  ``model_spread``; it makes models agree with each other). A model's log-odds of being right are
  ``c + e' + dependence * d'`` with ``c`` solved per model and answer type to hit its target
  accuracy; ``dependence = 0`` plants the paper's finding (models ignore what practitioners find
  hard), anything else plants the opposite;
* raters follow the platform: rater ``u`` answers block ``(u - 1) // 3`` of 150 items in order;
  surplus responses continue into the next block and a deficit truncates random raters;
* model runs are written like the harness writes them (``runs/<model>/outputs/part-00000.parquet``
  and ``results.json``), scored by the metric module; margins grow with ``calibration`` when right;
* wrong keys and hard items can be planted (``swapped_keys``, ``hard_items``): a swapped item's
  published key is another answer of the same size while practitioners and models who know the item
  choose its true answer; a hard item's key is right but its difficulties for both rise by
  ``hard_shift``, so most answer it wrong, their errors spread over the other options. Which items
  were planted is written to ``raw/planted.parquet`` (for tests of the key audit, ``tcmqa.suspects``;
  no analysis reads it). With neither planted the study is the same, draw for draw, as without them.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sqlite3
import time
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from tcmqa.build import build
from tcmqa.outdir import replace_output
from tcmqa.prompts import PROTOCOL
from tcmqa.results import results_row
from tcmqa.schema import BLOCK_SIZE, DOMAINS, FEATURES, RATERS_PER_ITEM
from tcmqa_metric import LETTERS, score

SIMULATED = "SIMULATED"
DOMAIN_SHARES = np.array([27.2, 14.6, 27.3, 10.5, 31.1, 41.3, 14.5, 1.7, 10.3, 29.6])  # Table 1, as weights
RATING_SHARES = np.array([0.212, 0.238, 0.338, 0.126, 0.085])  # Table 3
_BITS = 1 << np.arange(5)
_LETTER_ARRAY = np.array(list(LETTERS))
_MASK_TEXT = np.array(["".join(c for i, c in enumerate(LETTERS) if m >> i & 1) for m in range(32)], dtype=object)


@dataclass
class SimulationConfig:
    """Scale and planted properties of a simulated study (defaults: the paper's scale and findings)."""

    n_items: int = 38_279
    multi_share: float = 0.062
    n_raters: int = 101
    n_responses: int = 15_151
    block_size: int = BLOCK_SIZE
    practitioner_accuracy: float = 0.62  # pooled over responses
    practitioner_spread: float = 1.6  # sd of item difficulty for practitioners (log-odds)
    rater_spread: float = 0.3  # sd of rater ability
    rating_noise: float = 1.0  # how loosely a rating follows the item's practitioner difficulty
    domain_shift: dict[str, float] = field(default_factory=lambda: {"regulation": 0.8, "diagnosis_patterns": -0.4})
    model_spread: float = 1.0  # sd of the item difficulty all models share
    dependence: float = 0.0  # how much model log-odds follow practitioner difficulty (0: not at all)
    calibration: float = 1.5  # mean margin when right is (1 + calibration) times the mean when wrong
    margin_scale: dict[str, float] = field(default_factory=lambda: {"Qwen2.5": 5.0, "Gemma4": 5.0, "Qwen3.5": 0.7})
    lp_flip: float = 0.08  # share of single-answer items where the log-prob channel disagrees with the text
    flag_rate: float = 0.002  # per response
    swapped_keys: float = 0.0  # share of items published with a wrong key (planted; see the module docstring)
    hard_items: float = 0.0  # share of items made hard for everyone, their key right (planted)
    hard_shift: float = 3.0  # log-odds a hard item's difficulties rise by
    seed: int = 0


def reported_models() -> pd.DataFrame:
    """The paper's 29 reported rows (``tcmqa/data/reported.csv``): names, families, sizes, targets."""
    with resources.as_file(resources.files("tcmqa").joinpath("data/reported.csv")) as path:
        return pd.read_csv(path)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def solve_intercepts(targets: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per-target intercept ``c`` with mean(sigmoid(c + offsets)) == target (bisection, vectorised)."""
    lo, hi = np.full(len(targets), -15.0), np.full(len(targets), 15.0)
    for _ in range(50):
        mid = (lo + hi) / 2
        too_high = _sigmoid(mid[:, None] + offsets[None, :]).mean(axis=1) > targets
        hi, lo = np.where(too_high, mid, hi), np.where(too_high, lo, mid)
    return (lo + hi) / 2


def _random_masks(rng: np.random.Generator, sizes: np.ndarray) -> np.ndarray:
    """One random letter set per row, of the given size (0..5), as A..E bitmasks."""
    order = np.argsort(rng.random((len(sizes), 5)), axis=1)
    chosen = np.arange(5)[None, :] < sizes[:, None]
    bits = np.zeros((len(sizes), 5), dtype=bool)
    np.put_along_axis(bits, order, chosen, axis=1)
    return (bits * _BITS).sum(axis=1)


def _wrong_masks(rng: np.random.Generator, answer: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Random letter sets of the given sizes that differ from the answer (a full answer gets four)."""
    sizes = np.where((sizes == 5) & (answer == 31), 4, sizes)
    masks = _random_masks(rng, sizes)
    while (same := masks == answer).any():
        masks[same] = _random_masks(rng, sizes[same])
    return masks


def _mask_sizes(masks: np.ndarray) -> np.ndarray:
    return ((masks[:, None] & _BITS) > 0).sum(axis=1)


@dataclass
class _Items:
    """The latent truth behind the simulated items (never written out)."""

    answer: np.ndarray  # bitmask: the true answer, what those who know the item choose
    key: np.ndarray  # bitmask: the published key (the true answer unless swapped)
    swapped: np.ndarray  # bool: the key was planted wrong
    hard: np.ndarray  # bool: planted hard, key right
    multi: np.ndarray
    d: np.ndarray  # practitioner difficulty
    e: np.ndarray  # model difficulty
    domain: np.ndarray  # primary domain index


def _items(cfg: SimulationConfig, rng: np.random.Generator) -> _Items:
    n = cfg.n_items
    multi = np.zeros(n, dtype=bool)
    multi[rng.choice(n, round(n * cfg.multi_share), replace=False)] = True
    sizes = np.where(multi, rng.choice([2, 3, 4, 5], n, p=[0.2, 0.3, 0.3, 0.2]), 1)
    domain = rng.choice(len(DOMAINS), n, p=DOMAIN_SHARES / DOMAIN_SHARES.sum())
    shift = np.array([cfg.domain_shift.get(k, 0.0) for k in DOMAINS])[domain]
    answer = _random_masks(rng, sizes)
    d, e = rng.normal(0, cfg.practitioner_spread, n) + shift, rng.normal(0, cfg.model_spread, n)
    key, swapped, hard = answer.copy(), np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    if cfg.swapped_keys or cfg.hard_items:  # its own stream: the unplanted study stays draw for draw the same
        planting = np.random.default_rng([cfg.seed, 1])
        chosen = planting.permutation(n)
        n_swapped, n_hard = round(n * cfg.swapped_keys), round(n * cfg.hard_items)
        swapped[chosen[:n_swapped]] = True
        hard[chosen[n_swapped : n_swapped + n_hard]] = True
        key[swapped] = _wrong_masks(planting, answer[swapped], _mask_sizes(answer[swapped]))
        d[hard] += cfg.hard_shift
        e[hard] += cfg.hard_shift
    return _Items(answer=answer, key=key, swapped=swapped, hard=hard, multi=multi, d=d, e=e, domain=domain)


def _write_items(path: Path, items: _Items, rng: np.random.Generator) -> None:
    n = len(items.answer)
    has_expl = rng.random(n) < 0.616
    has_diff = rng.random(n) < 0.998
    source_difficulty = rng.integers(0, 9, n)
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            f.write(
                json.dumps(
                    {
                        "question_id": i,
                        "question": f"【{SIMULATED}】模擬題 {i}",
                        "choices": {c: f"{SIMULATED} 選項 {c}{i}" for c in LETTERS},
                        "answer": _MASK_TEXT[items.key[i]],
                        "explanation": f"{SIMULATED} explanation" if has_expl[i] else None,
                        "topic": f"{SIMULATED} topic {items.domain[i]}",
                        "difficulty": int(source_difficulty[i]) if has_diff[i] else None,
                        "source": f"{SIMULATED}/tcmqa-simulate",
                        "category": None,
                    },
                    ensure_ascii=False,
                )
                + "\n"
            )


def _responses_per_rater(cfg: SimulationConfig, rng: np.random.Generator) -> np.ndarray:
    """Responses of each rater: full blocks, the surplus to the last rater, a deficit cut at random."""
    counts = np.full(cfg.n_raters, cfg.block_size)
    gap = cfg.n_responses - counts.sum()
    if gap > 0:
        counts[-1] += gap
    while gap < 0:
        u = rng.integers(cfg.n_raters)
        cut = min(-gap, counts[u], cfg.block_size // 3)
        counts[u] -= cut
        gap += cut
    return counts


def _write_platform(path: Path, cfg: SimulationConfig, items: _Items, rng: np.random.Generator) -> None:
    """The platform's ``user_interactions`` table, with the raw quirks the builder handles."""
    counts = _responses_per_rater(cfg, rng)
    starts = np.arange(cfg.n_raters) // RATERS_PER_ITEM * cfg.block_size
    platform_items = rng.permutation(cfg.n_items)[: int((starts + counts).max())]
    ability = rng.normal(0, cfg.rater_spread, cfg.n_raters)
    rows_u, rows_i = [], []
    for u in range(cfg.n_raters):
        rows_i.append(platform_items[starts[u] : starts[u] + counts[u]])
        rows_u.append(np.full(counts[u], u))
    user, item = np.concatenate(rows_u), np.concatenate(rows_i)
    d = items.d[item]
    offsets = ability[user] - d
    intercept = solve_intercepts(np.array([cfg.practitioner_accuracy]), offsets)[0]
    correct = rng.random(len(item)) < _sigmoid(intercept + offsets)
    answer = items.answer[item]
    sizes = np.where(items.multi[item], np.clip(_mask_sizes(answer) + rng.integers(-1, 2, len(item)), 1, 5), 1)
    selected = np.where(correct, answer, _wrong_masks(rng, answer, sizes))
    latent = d + rng.normal(0, cfg.rating_noise, len(item))
    cuts = np.quantile(latent, np.cumsum(RATING_SHARES)[:-1])
    rating = np.searchsorted(cuts, latent) + 1
    n_labels = rng.choice([1, 2, 3], len(item), p=[0.823, 0.13, 0.047])
    seconds = rng.lognormal(np.log(23.5), 0.6, len(item))
    paused = np.where(rng.random(len(item)) < 0.05, rng.exponential(60, len(item)), 0.0)
    flagged = rng.random(len(item)) < cfg.flag_rate
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE user (user_id INTEGER PRIMARY KEY, username TEXT)")
    con.execute(
        "CREATE TABLE user_interactions (user_id INTEGER NOT NULL, question_id INTEGER NOT NULL,"
        " correctness INTEGER NOT NULL, selected_choices TEXT, individual_question_time FLOAT NOT NULL,"
        " stopped_for FLOAT NOT NULL, selected_category TEXT, selected_difficulty INTEGER,"
        " is_flagged INTEGER NOT NULL, PRIMARY KEY (user_id, question_id))"
    )
    con.executemany("INSERT INTO user VALUES (?, ?)", [(u + 1, f"{SIMULATED}-{u + 1}") for u in range(cfg.n_raters)])
    rows = []
    for k in range(len(item)):
        letters = _MASK_TEXT[selected[k]]
        others = rng.choice(len(DOMAINS), n_labels[k] - 1, replace=False) if n_labels[k] > 1 else []
        labels = sorted({int(items.domain[item[k]]) + 1, *(int(o) + 1 for o in others)})
        rows.append(
            (
                int(user[k]) + 1,
                int(item[k]),
                int(correct[k]),
                letters if len(letters) == 1 else json.dumps(list(letters)),
                float(seconds[k]),
                float(paused[k]),
                json.dumps([str(c) for c in labels]),
                int(rating[k]),
                int(flagged[k]),
            )
        )
    con.executemany("INSERT INTO user_interactions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
    con.commit()
    con.close()


def _slug(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model)


def _list_array(masks: np.ndarray) -> pa.Array:
    """Bitmasks -> Arrow list<string> of sorted letters."""
    bits = (masks[:, None] & _BITS) > 0
    offsets = np.concatenate([[0], np.cumsum(bits.sum(axis=1))]).astype(np.int32)
    values = np.broadcast_to(_LETTER_ARRAY, bits.shape)[bits]
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values, pa.string()))


def _model_outputs(
    cfg: SimulationConfig,
    model: pd.Series,
    items: _Items,
    item_ids: np.ndarray,
    intercepts: dict[str, float],
    per_item: dict[str, np.ndarray],
    rng: np.random.Generator,
) -> pa.Table:
    """One model's output rows (OUTPUTS features) over every corpus item."""
    n = len(item_ids)
    logit = np.where(items.multi, intercepts["multi"], intercepts["single"]) + per_item["offset"]
    correct = rng.random(n) < _sigmoid(logit)
    answer = items.answer
    answer_size = _mask_sizes(answer)
    wrong_size = np.where(items.multi, np.clip(answer_size + rng.integers(-2, 2, n), 1, 5), 1)
    wrong_size = np.where(~items.multi & (rng.random(n) < 0.03), 0, wrong_size)  # an empty answer now and then
    pred = np.where(correct, answer, _wrong_masks(rng, answer, wrong_size))
    scored = score(
        list(_MASK_TEXT[pred]), list(_MASK_TEXT[items.key]), np.where(items.multi, "multi", "single"), per_item=True
    )["per_item"]
    lp_knows = ~items.multi & (correct ^ (rng.random(n) < cfg.lp_flip))
    first = np.argmax((answer[:, None] & _BITS) > 0, axis=1)
    lp_index = np.where(lp_knows, first, (first + rng.integers(1, 5, n)) % 5)
    lp_correct = ~items.multi & (lp_index == np.argmax((items.key[:, None] & _BITS) > 0, axis=1))
    scale = cfg.margin_scale.get(model["family"], 2.0)
    margin = rng.exponential(scale, n) * (1 + cfg.calibration * lp_knows)
    top = -rng.exponential(0.3, n)
    order = np.argsort(rng.random((n, 5)) + 2 * (np.arange(5)[None, :] == lp_index[:, None]), axis=1)[:, ::-1]
    values = np.column_stack([top, top - margin, *(top - margin - rng.exponential(2.0, (3, n)))])
    logprobs = np.empty((n, 5), dtype=np.float32)
    np.put_along_axis(logprobs, order, values.astype(np.float32), axis=1)
    text = np.char.add("答案：", _MASK_TEXT[pred].astype(str))
    columns = {
        "model": pa.array(np.full(n, model["model"])),
        "item_id": pa.array(item_ids),
        "answer_type": pa.array(np.where(items.multi, "multi", "single")),
        "generated_text": pa.array(text),
        "prediction": _list_array(pred),
        "correct": pa.array(np.asarray(scored["exact_match"], dtype=bool)),
        "precision": pa.array(np.asarray(scored["precision"], dtype=np.float32)),
        "recall": pa.array(np.asarray(scored["recall"], dtype=np.float32)),
        "f1": pa.array(np.asarray(scored["f1"], dtype=np.float32)),
        "letter_logprobs": pa.StructArray.from_arrays(
            [pa.array(logprobs[:, j]) for j in range(5)], names=list(LETTERS)
        ),
        "lp_prediction": pa.array(_LETTER_ARRAY[lp_index]),
        "lp_correct": pa.array(lp_correct),
        "margin": pa.array(margin.astype(np.float32)),
        "finish_reason": pa.array(np.full(n, "stop")),
        "n_prompt_tokens": pa.array(per_item["n_prompt_tokens"]),
        "prompt_hash": pa.array(per_item["prompt_hash"]),
        "protocol": pa.array(np.full(n, PROTOCOL)),
        "revision": pa.array(np.full(n, SIMULATED.lower())),
    }
    return pa.table(columns).cast(FEATURES["outputs"].arrow_schema)


def simulate(out: str | Path, cfg: SimulationConfig | None = None, models: pd.DataFrame | None = None) -> Path:
    """Write a simulated study under ``out``: ``raw/``, ``data/`` (a built tree) and ``runs/``.

    ``models`` needs columns model, family, params_b, single, multi (target exact match, percent);
    it defaults to the paper's 29 reported rows.
    """
    cfg = cfg or SimulationConfig()
    models = reported_models() if models is None else models
    out = Path(out)
    (out / "raw").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(cfg.seed)
    items = _items(cfg, rng)
    _write_items(out / "raw" / "items.jsonl", items, rng)
    _write_platform(out / "raw" / "annotation_platform.sqlite", cfg, items, rng)
    build([str(out / "raw" / "items.jsonl")], out / "data", str(out / "raw" / "annotation_platform.sqlite"))
    _mark_card(out / "data" / "README.md", cfg)

    corpus = pq.read_table(out / "data" / "corpus", columns=["id", "flagged"]).to_pandas()
    subset = pq.read_table(out / "data" / "subset", columns=["item_id", "majority_correct"]).to_pandas()
    item_ids = np.arange(cfg.n_items).astype(str)
    flagged = corpus.set_index("id")["flagged"].reindex(item_ids).to_numpy()
    offset = -(items.e - items.e.mean()) - cfg.dependence * (items.d - items.d.mean())
    per_item = {
        "offset": offset,
        "n_prompt_tokens": rng.integers(120, 400, cfg.n_items).astype(np.int32),
        "prompt_hash": np.array([hashlib.sha256(f"{SIMULATED} prompt {i}".encode()).hexdigest() for i in item_ids]),
    }
    targets = {t: models[t].to_numpy() / 100 for t in ("single", "multi")}
    intercepts = {
        t: solve_intercepts(np.clip(targets[t], 1e-3, 1 - 1e-3), offset[items.multi == (t == "multi")]) for t in targets
    }
    for k, model in models.reset_index(drop=True).iterrows():
        table = _model_outputs(
            cfg, model, items, item_ids, {t: intercepts[t][k] for t in intercepts}, per_item, rng
        ).filter(pa.array(~flagged))  # the harness skips flagged items
        run = out / "runs" / _slug(model["model"])
        (run / "outputs").mkdir(parents=True, exist_ok=True)
        pq.write_table(table, run / "outputs" / "part-00000.parquet")
        row = results_row(
            table.to_pandas(),
            subset,
            family=model["family"],
            params_b=float(model["params_b"]),
            engine="simulation",
            engine_version=SIMULATED.lower(),
            dtype="none",
        )
        (run / "results.json").write_text(json.dumps(row, indent=1), encoding="utf-8")
    (out / "SIMULATION.json").write_text(json.dumps(asdict(cfg), indent=1), encoding="utf-8")
    planted = {"item_id": item_ids, "key": _MASK_TEXT[items.key], "answer": _MASK_TEXT[items.answer]}
    pq.write_table(pa.table(planted | {"swapped": items.swapped, "hard": items.hard}), out / "raw" / "planted.parquet")
    return out


def _mark_card(card: Path, cfg: SimulationConfig) -> None:
    """Say SIMULATED at the top of the card body, after its YAML header."""
    text = card.read_text(encoding="utf-8")
    head, sep, body = text.partition("\n---\n")
    banner = (
        f"> **{SIMULATED} DATA.** Written by `tcmqa simulate` (seed {cfg.seed}); not TCMQA items, "
        "not practitioner responses, not model outputs. Planted settings: SIMULATION.json.\n\n"
    )
    card.write_text(head + sep + banner + body, encoding="utf-8")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = SimulationConfig()
    parser.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="where to write raw/, data/ and runs/: a new or empty folder; an earlier simulation there is replaced",
    )
    for name in ("n_items", "n_raters", "n_responses", "seed"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(defaults, name))
    for name in (
        "multi_share",
        "practitioner_accuracy",
        "practitioner_spread",
        "model_spread",
        "dependence",
        "calibration",
        "swapped_keys",
        "hard_items",
        "hard_shift",
    ):
        parser.add_argument(f"--{name.replace('_', '-')}", type=float, default=getattr(defaults, name))


def main(args: argparse.Namespace) -> int:
    knobs = {k: v for k, v in vars(args).items() if k in SimulationConfig.__dataclass_fields__}
    start = time.perf_counter()
    parts = ("raw", "data", "runs", "SIMULATION.json")
    out = simulate(replace_output(args.out, "SIMULATION.json", parts, "tcmqa simulate"), SimulationConfig(**knobs))
    print(
        f"{SIMULATED} study written to {out} in {time.perf_counter() - start:.1f}s "
        f"(data: {out / 'data'}, runs: {out / 'runs'})"
    )
    return 0
