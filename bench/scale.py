"""The Space's hot paths with a thousand evaluated models: time and peak memory per operation.

    python bench/scale.py [--models 100 300 1000] [--items 38279] [--out .cache/bench/scale]

A store is filled through its own API (submit, claim, finish) with M models, each with a simulated
outputs part over every item (38,279 by default: the real 4,100-item sample and copies of its items
under new ids, so the corpus has the paper's size and the real practitioner data). Practitioner mode
runs on the sample's platform database (the real study) with this Space's own responses on top. For
each M it prints:

* record a model: ``Store.finish`` of one model's 38,279-row part (with its outcome aggregated);
* a response to the board: one practitioner response, then the refreshed board; and the response that
  finishes a block (its items enter the subset);
* a board refresh after a new model, and a cold one (a new process's first: the outcomes loaded, every
  adjacent pair tested);
* an explorer query (a text search, and a model-outcome filter) and a two-model comparison.

Memory is the process's peak resident set during the operation (``VmHWM`` after ``clear_refs``), so
it includes what the process already holds (the corpus, the matrices). The CPU's name is printed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import REPO, SAMPLE, cpu_name, sample_tree, set_env

set_env()

from tcmqa.build import build  # noqa: E402  (after the environment is set)
from tcmqa.data import load_config  # noqa: E402
from tcmqa.leaderboard import board as board_lib  # noqa: E402
from tcmqa.leaderboard import browse, compare, outcomes  # noqa: E402
from tcmqa.leaderboard.explorer import Explorer  # noqa: E402
from tcmqa.leaderboard.practice import PracticeLoader  # noqa: E402
from tcmqa.prompts import PROTOCOL  # noqa: E402
from tcmqa.schema import OUTPUTS  # noqa: E402
from tcmqa.store import SQLiteStore  # noqa: E402

PAPER_ITEMS = 38_279


def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(seconds, peak resident MB during the call, its result)."""
    Path("/proc/self/clear_refs").write_text("5")  # reset the peak resident set (Linux)
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, _peak_mb(), result


def scale_tree(out: Path, n_items: int) -> Path:
    """The sample's items plus copies of those the builder keeps, under new ids, up to ``n_items`` scorable items,
    built with the sample's platform database."""
    tree = out / f"tree-{n_items}"
    if (tree / "corpus").is_dir():
        return tree
    lines = (SAMPLE / "items.jsonl").read_text(encoding="utf-8").splitlines()
    items = [json.loads(line) for line in lines if line.strip()]
    kept = {row["id"] for row in load_config(str(sample_tree()), "corpus").select_columns(["id"]).to_list()}
    valid = [i for i in items if str(i["question_id"]) in kept]  # copies of items the schema filter drops would go too
    top = max(int(i["question_id"]) for i in items) + 1
    copies = []
    for k in range(n_items - len(valid)):
        item = dict(valid[k % len(valid)])
        item["question_id"] = top + k
        item["question"] = f"{item['question']}（{k}）"  # not a duplicate of its original
        copies.append(item)
    path = out / f"items-{n_items}.jsonl"
    path.write_text("\n".join(json.dumps(i, ensure_ascii=False) for i in items + copies) + "\n", encoding="utf-8")
    build([str(path)], tree, str(SAMPLE / "annotation_platform.sqlite"))
    return tree


class Models:
    """Simulated outputs parts: model k is right on an item with probability from its skill and the item's."""

    def __init__(self, corpus: list[dict], folder: Path):
        self.ids = pa.array([i["id"] for i in corpus], pa.string())
        self.answers = [list(i["answer"]) for i in corpus]
        self.types = pa.array([i["answer_type"] for i in corpus], pa.string())
        self.ease = np.random.default_rng(0).normal(0, 1, len(corpus))
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def part(self, k: int) -> Path:
        rng = np.random.default_rng(k)
        skill = rng.normal(0, 0.7)
        right = rng.random(len(self.ease)) < 1 / (1 + np.exp(-(skill + self.ease)))
        prediction = [a if r else ["E"] if a != ["E"] else ["A"] for a, r in zip(self.answers, right, strict=True)]
        n = len(self.ids)
        columns = {
            "model": pa.array([f"bench/model-{k:04d}"] * n, pa.string()),
            "revision": pa.array([f"{k:040x}"] * n, pa.string()),
            "protocol": pa.array([PROTOCOL] * n, pa.string()),
            "item_id": self.ids,
            "answer_type": self.types,
            "prediction": pa.array(prediction, pa.list_(pa.string())),
            "correct": pa.array(right),
        }
        schema = OUTPUTS.arrow_schema
        table = pa.table([columns[f.name] if f.name in columns else pa.nulls(n, f.type) for f in schema], schema=schema)
        path = self.folder / f"model-{k:04d}.parquet"
        pq.write_table(table, path)
        return path


def record(store: SQLiteStore, models: Models, k: int, fingerprint: str, n_items: int) -> None:
    """Model ``k`` submitted, claimed and finished through the store's API."""
    path = models.part(k)
    job = store.submit(f"bench/model-{k:04d}", f"{k:040x}", PROTOCOL, "bench")
    claimed = store.claim("bench")
    assert claimed is not None and claimed.id == job.id
    full = float(pq.read_table(path, columns=["correct"])["correct"].to_numpy().mean() * 100)
    row = {
        "model": job.model,
        "revision": job.revision,
        "origin": "evaluated",
        "family": f"F{k % 12}",
        "params_b": round(0.1 * (1.3 ** (k % 30)), 2),
        "full": full,
        "protocol": PROTOCOL,
        "data_fingerprint": fingerprint,
        "coverage": 100.0,
        "n": n_items,
        "n_corpus": n_items,
    }
    assert store.finish(claimed, row, [path])
    path.unlink()


def respond(practice: Any, account: str) -> bool:
    """One response of ``account`` (a block assigned on its first); False when its block is done."""
    view = practice.current(account)
    if view is None:
        return False
    key = list(practice.items[view.item_id]["answer"])
    practice.submit(account, view.item_id, key, domains=["diagnosis_patterns"], difficulty=3, seconds=20.0)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, nargs="+", default=[100, 300, 1000])
    parser.add_argument("--items", type=int, default=PAPER_ITEMS)
    parser.add_argument("--out", type=Path, default=REPO / ".cache" / "bench" / "scale")
    parser.add_argument("--block", type=int, default=20, help="practice block size (one rater per block here)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    t, _, tree = measure(lambda: scale_tree(args.out, args.items))
    print(f"CPU: {cpu_name()}; tree of {args.items:,} items ready in {t:.1f}s", flush=True)
    corpus = load_config(str(tree), "corpus").to_list()
    scored = [i for i in corpus if not i["flagged"]]
    fingerprint = board_lib.served_fingerprint(str(tree))
    store_dir = args.out / f"store-{args.items}"
    if store_dir.exists():
        import shutil

        shutil.rmtree(store_dir)
    store = SQLiteStore(store_dir)
    models = Models(scored, args.out / "parts")
    loader = PracticeLoader(str(tree), store, block_size=args.block, raters=1, admins=["bench"])
    practice = loader.get()
    board = board_lib.Board(store, fingerprint, practice=loader)
    explorer = Explorer(str(tree), store, loader, raters=1)
    comparator = compare.Comparator(str(tree), store, raters=1)
    rows: list[dict[str, Any]] = []
    recorded = 0
    for m in sorted(args.models):
        start = time.perf_counter()
        while recorded < m - 1:
            record(store, models, recorded, fingerprint, len(scored))
            recorded += 1
        fill_s = time.perf_counter() - start
        board.frame()  # warm: the board as a running Space holds it
        t_record, mb_record, _ = measure(lambda k=recorded: record(store, models, k, fingerprint, len(scored)))
        recorded += 1
        t_refresh, mb_refresh, frame = measure(board.frame)
        account = f"rater-{m}"
        practice.confirm(account, True)
        respond(practice, account)  # the block assigned
        board.frame()
        t_response, mb_response, _ = measure(lambda a=account: (respond(practice, a), board.frame()))
        while len(practice.store.practice_responses(account=account)) < args.block - 1:
            respond(practice, account)
        t_block, mb_block, _ = measure(lambda a=account: (respond(practice, a), board.frame()))
        cold = board_lib.Board(store, fingerprint, practice=loader)
        outcomes._SHARED.clear()  # a new process: nothing loaded
        t_cold, mb_cold, _ = measure(cold.frame)
        leader = str(frame[frame["Comparison"] == board_lib.COMPARABLE]["Model"].iloc[0])
        explorer.browse(browse.Filters(search="咳"), leader)  # the corpus and items table loaded once
        t_search, mb_search, found = measure(lambda m=leader: explorer.browse(browse.Filters(search="止咳"), m))
        t_outcome, mb_outcome, _ = measure(
            lambda m=leader: explorer.browse(browse.Filters(outcome=next(iter(browse.OUTCOMES))), m)
        )
        other = f"bench/model-{(recorded // 2):04d}"
        t_compare, mb_compare, _ = measure(lambda a=leader, b=other: comparator.compare(a, b))
        rows.append(
            {
                "M": m,
                "fill (s)": round(fill_s, 1),
                "record a model": (t_record, mb_record),
                "response -> board": (t_response, mb_response),
                "block-finishing response -> board": (t_block, mb_block),
                "board refresh (new model)": (t_refresh, mb_refresh),
                "board refresh (cold)": (t_cold, mb_cold),
                "explorer search": (t_search, mb_search),
                "explorer outcome filter": (t_outcome, mb_outcome),
                "two-model comparison": (t_compare, mb_compare),
            }
        )
        print(f"M={m}: filled in {fill_s:.0f}s; search found {found.total} items", flush=True)
    print(f"\nCPU: {cpu_name()}; {args.items:,} items per model; time (ms) / peak resident (MB)\n")
    names = [k for k in rows[0] if k not in ("M", "fill (s)")]
    print("| operation | " + " | ".join(f"M = {r['M']:,}" for r in rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for name in names:
        cells = [f"{1000 * r[name][0]:,.0f} ms / {r[name][1]:,.0f} MB" for r in rows]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
