"""Key adjudication: the suspect list the study lead works from, the rule of a decision, and the errata export.

The study lead assigns a suspect item (``tcmqa.suspects``) to two reviewers; each gives a verdict in MMLU-Redux's
categories (``tcmqa.errata.VERDICTS``; a wrong key with the right letters) and a comment. A decision is two
reviewers agreeing (the same verdict and, for a wrong key, the same letters); while the verdicts given disagree,
the lead assigns another reviewer. Decided items export as errata (``tcmqa.errata.read_errata`` reads them;
``tcmqa build --errata`` applies them), the reviewers named by their public pseudonyms, never their accounts:

    tcmqa errata export --store DIR_OR_URL --out errata.jsonl

The gradio side and who may do what are :mod:`tcmqa.leaderboard.practice.adjudication`'s.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from tcmqa.errata import VERDICTS, check_erratum
from tcmqa.ingest import DEFAULT_PSEUDONYM_KEY, person_pseudonym
from tcmqa.outputs import OUTPUTS_DIR, RESULTS_FILE
from tcmqa.store import Store, open_store

log = logging.getLogger(__name__)

KEPT = ("key_correct", "wrong_key")  # the verdicts that keep an item scored; any other drops it
DECIDED, WAITING, DISAGREE = "decided", "awaiting verdicts", "disagreement: assign another reviewer"
DEFAULT_STORE = ".cache/space"  # the local Space's (tcmqa serve)


def checked_verdict(verdict: str | None, new_key: Sequence[str] | None, old_key: Sequence[str]) -> tuple[str, str]:
    """(verdict, the new key's sorted letters or "") as stored, or ValueError saying what to give."""
    if verdict not in VERDICTS:
        raise ValueError(f"choose a verdict: one of {', '.join(VERDICTS)}")
    letters = "".join(sorted(set(new_key or ())))
    if verdict == "wrong_key":
        if not letters:
            raise ValueError("a wrong key needs the right letters: tick them")
        if letters == "".join(sorted(old_key)):
            raise ValueError(f"{letters} is the published key: tick the right letters, or choose key_correct")
    elif letters:
        raise ValueError(f"right letters go with a wrong key only, not with {verdict}")
    return verdict, letters


def decision(reviews: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The verdict two or more reviewers agree on (verdict and new key), with those reviews; None while none."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for review in reviews:
        if review["verdict"]:
            groups.setdefault((review["verdict"], review["new_key"] or ""), []).append(review)
    agreed = [(key, group) for key, group in groups.items() if len(group) >= 2]
    if not agreed:
        return None
    (verdict, new_key), group = max(agreed, key=lambda kv: len(kv[1]))
    return {"verdict": verdict, "new_key": new_key, "reviews": group}


def status(reviews: Sequence[dict[str, Any]]) -> str:
    """Decided; awaiting a verdict; or every verdict given and no two agree (the lead assigns another)."""
    if decision(reviews) is not None:
        return DECIDED
    return WAITING if any(not r["verdict"] for r in reviews) else DISAGREE


def _date(seconds: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(seconds))


def errata_rows(store: Store, pseudonym_key: str = DEFAULT_PSEUDONYM_KEY) -> list[dict[str, Any]]:
    """Every decided adjudication as an erratum (checked by ``tcmqa.errata.check_erratum``), by rank: the
    agreeing reviewers by pseudonym, the day the decision was reached, their comments."""
    names = {p["account"]: person_pseudonym(p["number"], pseudonym_key) for p in store.practitioners()}
    rows = []
    for adjudication in store.adjudications():
        decided = decision(adjudication["reviews"])
        if decided is None:
            continue
        reviews = decided["reviews"]
        rows.append(
            check_erratum(
                {
                    "item_id": adjudication["item_id"],
                    "verdict": decided["verdict"],
                    "old_key": adjudication["old_key"],
                    "new_key": decided["new_key"],
                    "drop": decided["verdict"] not in KEPT,
                    "reviewers": [names.get(r["reviewer"], "unknown") for r in reviews],
                    "decided_date": _date(max(r["decided_at"] for r in reviews)),
                    "corpus_revision": adjudication["corpus_revision"],
                    "comment": " | ".join(r["comment"] for r in reviews if r["comment"]),
                }
            )
        )
    return rows


def write_errata(rows: Sequence[dict[str, Any]], path: str | os.PathLike) -> Path:
    """The errata as JSONL (what ``tcmqa build --errata`` reads), written whole or not at all."""
    path = Path(path)
    if path.suffix != ".jsonl":
        raise ValueError(f"{path}: the errata are written as JSONL; name the file *.jsonl")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=path.parent, suffix=".part", delete=False) as f:
        f.write("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    os.replace(f.name, path)
    return path


def store_runs(store: Store, folder: Path) -> list[Path]:
    """The store's recorded runs as run folders ``load_study`` reads (each model's one run, as the Space shows
    it: ``tcmqa.leaderboard.model_outputs.choose``): ``folder/<job>/outputs`` links to the job's parts."""
    from tcmqa.leaderboard.model_outputs import choose, recorded_runs

    rows = {row.get("model"): row for row in store.results()}  # the latest row of each model
    runs = []
    for run in choose(recorded_runs(store)).values():
        parts = store.outputs_files(run.job)
        if not parts:
            continue
        target = folder / run.job
        target.mkdir(parents=True, exist_ok=True)
        link = target / OUTPUTS_DIR
        if not link.exists():
            link.symlink_to(parts[0].parent, target_is_directory=True)
        meta = {k: v for k, v in (rows.get(run.model) or {}).items() if k in ("model", "family", "params_b")}
        (target / RESULTS_FILE).write_text(json.dumps(meta | {"model": run.model}), encoding="utf-8")
        runs.append(target)
    return runs


def suspect_list(data: str, store: Store, comments: pd.Series | None = None) -> pd.DataFrame:
    """The ranked suspect list (``tcmqa.suspects.audit``) of the data the Space serves, over the runs its store
    recorded and the practitioners' responses the data holds; ``attrs["corpus_revision"]``: the scored items'
    data fingerprint (the key revision a verdict is about)."""
    from tcmqa.study import load_study
    from tcmqa.suspects import audit

    with tempfile.TemporaryDirectory(prefix="tcmqa-suspects-") as folder:
        runs = store_runs(store, Path(folder))
        study = load_study(data, runs)
        ranked = audit(study, data, comments)
    ranked.attrs["corpus_revision"] = study.data_fingerprint
    return ranked


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="errata_command", required=True)
    export = sub.add_parser("export", help="the decided adjudications of a store as an errata file (JSONL)")
    # no default shown: TCMQA_STORE may be a database URL with its password
    export.add_argument(
        "--store", help=f"a SQLite directory or a database URL (default: $TCMQA_STORE or {DEFAULT_STORE})"
    )
    export.add_argument("--out", required=True, type=Path, help="the errata file to write (*.jsonl)")
    export.add_argument(
        "--pseudonym-key",
        default=None,
        help="the key of the reviewers' public pseudonyms (default: $TCMQA_PSEUDONYM_KEY, as the Space's)",
    )


def main(args: argparse.Namespace) -> int:
    if args.out.suffix != ".jsonl":
        raise SystemExit(f"tcmqa errata export: {args.out}: name the errata file *.jsonl")
    store = open_store(args.store or os.environ.get("TCMQA_STORE") or DEFAULT_STORE)
    key = args.pseudonym_key or os.environ.get("TCMQA_PSEUDONYM_KEY") or DEFAULT_PSEUDONYM_KEY
    rows = errata_rows(store, key)
    write_errata(rows, args.out)
    print(f"{len(rows)} decided item(s) written to {args.out}")
    return 0
