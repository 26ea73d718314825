"""The Space's configuration, read once from the environment (Space variables and secrets)."""

from __future__ import annotations

import dataclasses
import os

from tcmqa.leaderboard.validation import Policy
from tcmqa.prompts import PROTOCOL


@dataclasses.dataclass(frozen=True)
class Settings:
    """Hosted mode is a Space (``SPACE_ID`` set): sign-in required, Hub store, no local folders."""

    hosted: bool
    store: str
    data: str
    start_worker: bool
    worker_args: str
    max_params_b: float
    remote_code_allowlist: frozenset[str]
    rate_limit: int
    rate_window_h: float
    refresh_s: float

    @classmethod
    def from_env(cls) -> Settings:
        env = os.environ.get
        hosted = bool(env("SPACE_ID"))
        default_store = "hub:TechTCM/TCMQA-requests,TechTCM/TCMQA" if hosted else ".cache/space"
        return cls(
            hosted=hosted,
            store=env("TCMQA_STORE", default_store),
            data=env("TCMQA_DATA", "TechTCM/TCMQA"),
            start_worker=env("TCMQA_START_WORKER", "0" if hosted else "1") == "1",
            worker_args=env("TCMQA_WORKER_ARGS", ""),
            max_params_b=float(env("TCMQA_MAX_PARAMS_B", "16")),
            remote_code_allowlist=frozenset(filter(None, env("TCMQA_REMOTE_CODE_ALLOWLIST", "").split(","))),
            rate_limit=int(env("TCMQA_RATE_LIMIT", "5")),
            rate_window_h=float(env("TCMQA_RATE_WINDOW_H", "24")),
            refresh_s=float(env("TCMQA_REFRESH_S", "10")),
        )

    def policy(self) -> Policy:
        return Policy(
            hosted=self.hosted,
            protocol=PROTOCOL,
            max_params_b=self.max_params_b,
            remote_code_allowlist=self.remote_code_allowlist,
            rate_limit=self.rate_limit,
            rate_window_s=self.rate_window_h * 3600,
        )
