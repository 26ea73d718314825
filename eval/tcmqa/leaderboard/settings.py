"""The Space's configuration, read once from the environment (Space variables and secrets)."""

from __future__ import annotations

import dataclasses
import os

from tcmqa.leaderboard.validation import Policy
from tcmqa.prompts import PROTOCOL
from tcmqa.schema import HUB_ID


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
    publish: bool = False  # publish finished evaluations to the Hub (hosted default)
    results_repo: str = HUB_ID  # the dataset repo whose results/outputs configs receive them
    requests_repo: str = f"{HUB_ID}-requests"  # the public mirror of the requests (status, reason, times)

    @classmethod
    def from_env(cls) -> Settings:
        env = os.environ.get
        hosted = bool(env("SPACE_ID"))
        # Hosted: SQLite on the Space's persistent storage (/data), or TCMQA_STORE=postgresql://... for a worker pool.
        default_store = "/data/tcmqa" if hosted else ".cache/space"
        return cls(
            hosted=hosted,
            store=env("TCMQA_STORE", default_store),
            data=env("TCMQA_DATA", HUB_ID),
            start_worker=env("TCMQA_START_WORKER", "0" if hosted else "1") == "1",
            worker_args=env("TCMQA_WORKER_ARGS", ""),
            max_params_b=float(env("TCMQA_MAX_PARAMS_B", "16")),
            rate_limit=int(env("TCMQA_RATE_LIMIT", "5")),
            rate_window_h=float(env("TCMQA_RATE_WINDOW_H", "24")),
            refresh_s=float(env("TCMQA_REFRESH_S", "10")),
            publish=env("TCMQA_PUBLISH", "1" if hosted else "0") == "1",
            results_repo=env("TCMQA_RESULTS_REPO", HUB_ID),
            requests_repo=env("TCMQA_REQUESTS_REPO", f"{HUB_ID}-requests"),
        )

    def policy(self) -> Policy:
        return Policy(
            hosted=self.hosted,
            protocol=PROTOCOL,
            max_params_b=self.max_params_b,
            rate_limit=self.rate_limit,
            rate_window_s=self.rate_window_h * 3600,
        )
