"""The Space's configuration, read once from the environment (Space variables and secrets)."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

from tcmqa.ingest import DEFAULT_PSEUDONYM_KEY
from tcmqa.leaderboard.identity import check_admin_token
from tcmqa.leaderboard.practice.core import ABANDON_AFTER_S
from tcmqa.leaderboard.validation import Policy
from tcmqa.passmark import PASS_MARK, check_mark
from tcmqa.prompts import PROTOCOL
from tcmqa.schema import BLOCK_SIZE, HUB_ID, RATERS_PER_ITEM


@dataclasses.dataclass(frozen=True)
class Settings:
    """Hosted mode is a Space (``SPACE_ID`` set): sign-in required, results published to the Hub, no local folders."""

    hosted: bool
    store: str
    data: str
    start_worker: bool
    worker_args: str
    max_params_b: float
    rate_limit: int
    rate_window_h: float
    refresh_s: float
    pass_mark: float = PASS_MARK  # percent: the board's Passes column and the plots' line (TCMQA_PASS_MARK)
    publish: bool = False  # publish finished evaluations to the Hub (hosted default)
    results_repo: str = HUB_ID  # the dataset repo whose results/outputs configs receive them
    requests_repo: str = f"{HUB_ID}-requests"  # the public mirror of the requests (status, reason, times)
    # practitioner mode (tcmqa.leaderboard.practice)
    practice: bool = True  # the Practitioners tab
    practice_block_size: int = BLOCK_SIZE  # items per block
    practice_raters: int = RATERS_PER_ITEM  # practitioners per block
    practice_daily_cap: int | None = 300  # responses per account per UTC day (None: no cap)
    practice_admins: tuple[str, ...] = ()  # accounts allowed progress, export and exclusion
    responses_every_s: float = 600.0  # at most one responses/subset commit this often
    pseudonym_key: str = DEFAULT_PSEUDONYM_KEY  # the key of the public pseudonyms (a secret when hosted)
    study: str | None = None  # where the paper's study is read from (default: data), never what the Space published
    study_revision: str | None = None  # the pinned revision of a Hub study (the commit of its `tcmqa publish`)
    practice_abandon_after_s: float = ABANDON_AFTER_S  # a slot idle this long is offered to a new practitioner
    # local mode: the operator's token, an admin's key (tcmqa.leaderboard.identity); None: no admin locally
    admin_token: str | None = dataclasses.field(default=None, repr=False)

    @classmethod
    def from_env(cls) -> Settings:
        env = os.environ.get
        hosted = bool(env("SPACE_ID"))
        practice = env("TCMQA_PRACTICE", "1") == "1"
        key = env("TCMQA_PSEUDONYM_KEY") or DEFAULT_PSEUDONYM_KEY
        if hosted and practice and key == DEFAULT_PSEUDONYM_KEY:
            raise ValueError(
                "TCMQA_PSEUDONYM_KEY is not set (or is the public default key): a hosted Space with practitioner "
                "mode needs it as a secret, else anyone can link the published pseudonyms to their practitioners. "
                "Set TCMQA_PSEUDONYM_KEY in the Space's secrets (or TCMQA_PRACTICE=0)."
            )
        data = env("TCMQA_DATA", HUB_ID)
        study = env("TCMQA_STUDY") or data
        if hosted and practice and not env("TCMQA_STUDY_REVISION") and not Path(study).expanduser().exists():
            raise ValueError(
                f"TCMQA_STUDY_REVISION is not set: the paper's study would be read from {study}, the repo this "
                "Space publishes its responses to. Set TCMQA_STUDY_REVISION to the commit of the study's "
                "`tcmqa publish` (or TCMQA_STUDY to a tree of its own, or TCMQA_PRACTICE=0)."
            )
        # Hosted: SQLite on the Space's persistent storage (/data), or TCMQA_STORE=postgresql://... for a worker pool.
        default_store = "/data/tcmqa" if hosted else ".cache/space"
        return cls(
            hosted=hosted,
            store=env("TCMQA_STORE", default_store),
            data=data,
            start_worker=env("TCMQA_START_WORKER", "0" if hosted else "1") == "1",
            worker_args=env("TCMQA_WORKER_ARGS", ""),
            max_params_b=float(env("TCMQA_MAX_PARAMS_B", "16")),
            rate_limit=int(env("TCMQA_RATE_LIMIT", "5")),
            rate_window_h=float(env("TCMQA_RATE_WINDOW_H", "24")),
            refresh_s=float(env("TCMQA_REFRESH_S", "10")),
            pass_mark=pass_mark(env("TCMQA_PASS_MARK")),
            publish=env("TCMQA_PUBLISH", "1" if hosted else "0") == "1",
            results_repo=env("TCMQA_RESULTS_REPO", HUB_ID),
            requests_repo=env("TCMQA_REQUESTS_REPO", f"{HUB_ID}-requests"),
            practice=practice,
            practice_block_size=int(env("TCMQA_BLOCK_SIZE", str(BLOCK_SIZE))),
            practice_raters=int(env("TCMQA_RATERS", str(RATERS_PER_ITEM))),
            practice_daily_cap=int(env("TCMQA_DAILY_CAP", "300")) or None,
            practice_admins=tuple(a.strip() for a in env("TCMQA_ADMINS", "").split(",") if a.strip()),
            responses_every_s=float(env("TCMQA_RESPONSES_EVERY_S", "600")),
            pseudonym_key=key,
            study=study,
            study_revision=env("TCMQA_STUDY_REVISION") or None,
            practice_abandon_after_s=float(env("TCMQA_ABANDON_AFTER_H", str(ABANDON_AFTER_S / 3600))) * 3600,
            admin_token=check_admin_token(env("TCMQA_ADMIN_TOKEN")),
        )

    def practice_options(self) -> dict[str, Any]:
        """The keyword arguments of ``PracticeLoader`` (and so of ``Practice``) these settings give."""
        return {
            "study": self.study,
            "study_revision": self.study_revision,
            "block_size": self.practice_block_size,
            "raters": self.practice_raters,
            "daily_cap": self.practice_daily_cap,
            "admins": self.practice_admins,
            "pseudonym_key": self.pseudonym_key,
            "abandon_after_s": self.practice_abandon_after_s,
        }

    def policy(self) -> Policy:
        return Policy(
            hosted=self.hosted,
            protocol=PROTOCOL,
            max_params_b=self.max_params_b,
            rate_limit=self.rate_limit,
            rate_window_s=self.rate_window_h * 3600,
        )


def pass_mark(value: str | None) -> float:
    """``TCMQA_PASS_MARK`` as a mark (:func:`tcmqa.passmark.check_mark`'s rule); unset: the exam's 60%."""
    if value is None or not value.strip():
        return PASS_MARK
    try:
        mark = float(value)
    except ValueError:
        raise ValueError(f"TCMQA_PASS_MARK={value!r} is not a number: set a percentage such as {PASS_MARK:g}") from None
    try:
        return check_mark(mark)
    except ValueError as err:
        raise ValueError(f"TCMQA_PASS_MARK: {err}") from None
