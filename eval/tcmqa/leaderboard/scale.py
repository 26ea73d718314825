"""The one scale in the Space: every comparable model and every practitioner on one ability axis.

The fit is :func:`tcmqa.irt.fit_2pl` (why a 2PL of our own rather than py-irt: :mod:`tcmqa.irt`'s module
doc) over the outcome matrix of

* every comparable board row with per-item outcomes (the run the row reads, from the store's outcomes,
  :mod:`tcmqa.leaderboard.outcomes`: no output row is read), on the items those runs answered, and
* every practitioner on the items they answered (the responses as the explorer serves them: the imported
  study and the Space's own, nothing of a block still being answered).

Off the request path. A board refresh asks for the fit over its comparable runs (:meth:`Scales.request`,
which returns at once) and shows the latest finished fit; one daemon thread fits the newest request, one
at a time. A fit is cached by what it was fitted on (:attr:`Scale.key`: each run's id and when it was
recorded, and a digest of the practitioners' answers): an unchanged key is never refitted. A refit starts
from the previous fit, its items and respondents matched by id and name (new ones from the defaults), so
a model or a finished block added converges in a few steps (docs/benchmarks.md, "The scale in the
Space", for the times at 1,000 models).

Beside the fit, per comparable run its accuracy in each unit (domain) of the exam
(:func:`tcmqa.passmark.pass_rows`, the corpus's domains): the board's Passes column.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from tcmqa import irt, passmark
from tcmqa.leaderboard.outcomes import Reference

log = logging.getLogger(__name__)

MODEL, PRACTITIONER = "model", "practitioner"
MEANING = (
    "**Difficulty** is the ability (on the board's Ability scale) at which a respondent answers the item right "
    "half the time; **discrimination** how sharply the chance of a right answer rises with ability there (near "
    "0 or negative: the item does not tell the able from the rest, which can mean a wrong key)."
)
NOT_FITTED = (
    "_Difficulty and discrimination: not fitted yet (the scale is fitted in the background over the comparable "
    "models and the practitioners; this item is not in it yet)._"
)


@dataclasses.dataclass(frozen=True)
class Scale:
    """One finished fit and what it was fitted on."""

    key: str
    outcome: irt.Outcomes  # respondents: name, kind, run ("" for a practitioner)
    fit: irt.Fit
    units: dict[str, dict[str, float]]  # run -> domain key -> accuracy (percent)
    seconds: float

    @property
    def abilities(self) -> pd.DataFrame:
        """Every respondent's ability and its standard error (:func:`tcmqa.irt.abilities`), with its run."""
        return irt.abilities(self.outcome, self.fit)

    @property
    def items(self) -> pd.DataFrame:
        """Every fitted item's difficulty and discrimination (:func:`tcmqa.irt.items`), indexed by item id."""
        return irt.items(self.outcome, self.fit).set_index("item_id")

    def by_run(self) -> pd.DataFrame:
        """The models' abilities indexed by run id."""
        frame = self.abilities
        return frame[frame["kind"] == MODEL].set_index("run")

    def practitioners(self) -> pd.DataFrame:
        frame = self.abilities
        return frame[frame["kind"] == PRACTITIONER].reset_index(drop=True)

    def ability_at(self, mark: float) -> float:
        """Where an accuracy of ``mark`` percent over the fitted items lies on the scale (the pass line)."""
        return irt.ability_at(self.fit, passmark.check_mark(mark) / 100)


def runs_key(infos: Sequence[object]) -> str:
    return "|".join(f"{i.run}@{i.at}" for i in infos)  # pyright: ignore[reportAttributeAccessIssue]


def responses_digest(responses: pd.DataFrame) -> str:
    """What the fit reads of the responses, as a digest independent of their order."""
    if not len(responses):
        return "none"
    hashed = pd.util.hash_pandas_object(responses[["practitioner_id", "item_id", "correct"]], index=False)
    return hashlib.sha256(np.sort(hashed.to_numpy()).tobytes()).hexdigest()[:16]


def outcome_matrix(reference: Reference, runs: Sequence[str], responses: pd.DataFrame) -> irt.Outcomes:
    """The items x respondents matrix of ``runs`` (on the items any of them answered) and the practitioners
    of ``responses`` (on those items; one who answered none of them is left out)."""
    store = reference.outcomes
    with store.lock:
        rows = np.array([store.row[r] for r in runs], dtype=np.int64)
        present, correct = store.present[rows], store.correct[rows]
        infos = [store.runs[i] for i in rows]
        columns = np.flatnonzero(present.any(axis=0))
        item_ids = np.array([store.items[i] for i in columns], dtype=object)
    models = np.where(present[:, columns], correct[:, columns], np.nan).T.astype(np.float32)
    at = pd.Index(item_ids).get_indexer(responses["item_id"].astype(str)) if len(responses) else np.array([], int)
    answered = responses[at >= 0]
    names = pd.Index(sorted(answered["practitioner_id"].astype(str).unique()))
    people = np.full((len(item_ids), len(names)), np.nan, dtype=np.float32)
    who = names.get_indexer(answered["practitioner_id"].astype(str))
    people[at[at >= 0], who] = answered["correct"].to_numpy(float)
    respondents = pd.DataFrame(
        {
            "name": [i.model for i in infos] + list(names),
            "kind": [MODEL] * len(infos) + [PRACTITIONER] * len(names),
            "run": [i.run for i in infos] + [""] * len(names),
            "revision": [i.revision for i in infos] + [""] * len(names),
        }
    )
    return irt.Outcomes(np.hstack([models, people]), item_ids, respondents)


def warm_start(previous: Scale | None, outcome: irt.Outcomes) -> irt.Fit | None:
    """The previous fit's parameters for ``outcome``'s items and respondents, matched by id and by (kind,
    run or name); new ones from the defaults (a = 1, b = 0, ability 0). None without a previous fit."""
    if previous is None:
        return None
    old = previous.fit
    item_at = pd.Index(previous.outcome.item_ids).get_indexer(outcome.item_ids)
    ids = lambda r: r["kind"] + ":" + r["run"].where(r["run"] != "", r["name"])  # noqa: E731
    person_at = pd.Index(ids(previous.outcome.respondents)).get_indexer(ids(outcome.respondents))

    def take(values: np.ndarray, at: np.ndarray, default: float) -> np.ndarray:
        return np.where(at >= 0, values[np.maximum(at, 0)], default)

    theta = take(old.theta, person_at, 0.0)
    return irt.Fit(
        a=take(old.a, item_at, irt.A_MEAN),
        b=take(old.b, item_at, 0.0),
        a_se=take(old.a_se, item_at, 0.0),
        b_se=take(old.b_se, item_at, 0.0),
        theta=theta,
        theta_se=take(old.theta_se, person_at, 0.0),
        iterations=0,
        converged=False,
    )


def unit_accuracies(outcome: irt.Outcomes, domains: pd.Series) -> dict[str, dict[str, float]]:
    """Per model (by run) its accuracy in each domain with items (``domains``: item id -> domain keys)."""
    models = outcome.respondents["kind"].to_numpy() == MODEL
    y = outcome.y[:, models]
    names = outcome.respondents.loc[models, "run"].tolist()
    item_domains = domains.reindex(outcome.item_ids).tolist()
    table = passmark.pass_rows(names, ~np.isnan(y), y == 1, item_domains)
    table = table[table["scope"].str.startswith("domain:")]
    return {
        run: dict(zip(rows["scope"].str.removeprefix("domain:"), rows["accuracy"]))
        for run, rows in table.groupby("model", sort=False)
    }


class Scales:
    """The Space's fits, one at a time in a background thread (module doc). ``responses``: the practitioners'
    answers as served (``practitioner_id``, ``item_id``, ``correct``); ``domains``: item id -> the corpus's
    domain keys. Both are read in the thread, never on a request."""

    def __init__(
        self,
        reference: Reference,
        responses: Callable[[], pd.DataFrame],
        domains: Callable[[], pd.Series],
    ):
        self.reference = reference
        self.responses, self.domains = responses, domains
        self._lock = threading.Lock()
        self._wanted: tuple[str, ...] | None = None
        self._asked = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._thread: threading.Thread | None = None
        self.latest: Scale | None = None

    def request(self, runs: Sequence[str]) -> Scale | None:
        """Ask for the fit over ``runs`` (and the practitioners as they stand now); the latest finished fit,
        at once (None before the first)."""
        with self._lock:
            self._wanted = tuple(dict.fromkeys(runs))
            self._idle.clear()
            self._asked.set()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="tcmqa-scale", daemon=True)
                self._thread.start()
        return self.latest

    def wait(self, timeout: float | None = None) -> Scale | None:
        """The latest fit once every request so far is fitted (tests, benchmarks)."""
        self._idle.wait(timeout)
        return self.latest

    def _loop(self) -> None:
        while True:
            self._asked.wait()
            with self._lock:
                self._asked.clear()
                runs = self._wanted
            try:
                if runs is not None:
                    self.refresh(runs)
            except Exception:  # the data may be unreachable: the previous fit stays, the next request retries
                log.exception("fitting the scale failed")
            with self._lock:
                if not self._asked.is_set():
                    self._idle.set()

    def refresh(self, runs: Sequence[str]) -> Scale | None:
        """Fit ``runs`` and the practitioners now, unless the latest fit is on the same; the latest fit."""
        self.reference.update()
        with self.reference.outcomes.lock:
            known = [r for r in runs if r in self.reference.outcomes.row]
            infos = [self.reference.outcomes.runs[self.reference.outcomes.row[r]] for r in known]
        if not known:
            return self.latest
        responses = self.responses()
        key = f"{runs_key(infos)}#{responses_digest(responses)}"
        if self.latest is not None and self.latest.key == key:
            return self.latest
        started = time.perf_counter()
        outcome = outcome_matrix(self.reference, known, responses)
        fit = irt.fit_2pl(outcome.y, start=warm_start(self.latest, outcome))
        units = unit_accuracies(outcome, self.domains())
        seconds = time.perf_counter() - started
        log.info(
            "scale: %d items x %d respondents fitted in %.1f s (%d steps)", *outcome.y.shape, seconds, fit.iterations
        )
        self.latest = Scale(key, outcome, fit, units, seconds)
        return self.latest
