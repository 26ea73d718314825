"""The clock of the item on a practitioner's screen, kept by the server so that the seconds on an item and
the seconds paused are right across pause, submit, reload and resume (the page only reports signs of
life; it never says how long anything took).
"""

from __future__ import annotations

import threading
from typing import Any

AWAY_S = 30.0  # no word from the page for this long: it was closed or reloaded, and that time counts as paused


class ItemClocks:
    """Per account, the clock of the item on its screen: when it was first shown, the seconds paused so far,
    whether it is paused now, and when the page last said it was there.

    ``seconds`` is the whole time from the first showing to the submission and ``seconds_paused`` the part
    of it paused (``Practice.submit``'s rule): a pause, and any gap longer than ``away_s`` between the
    page's signs of life (closed, reloaded, asleep), count as paused. Kept in memory: a restart loses it.
    """

    def __init__(self, away_s: float = AWAY_S):
        self.away_s = away_s
        self._clocks: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def _current(self, who: str, item_id: str, now: float, start: bool) -> dict[str, Any] | None:
        c = self._clocks.get(who)
        if c is None or c["item_id"] != item_id:
            if not start:
                return None
            c = self._clocks[who] = {"item_id": item_id, "shown_at": now, "paused": 0.0, "paused_since": None}
        elif c["paused_since"] is None and now - c["seen_at"] > self.away_s:
            c["paused"] += now - c["seen_at"]  # the page was gone: not working time
        c["seen_at"] = now
        return c

    def show(self, who: str, item_id: str, now: float) -> bool:
        """The item is on screen (started if new, resumed as it was otherwise); whether it is paused."""
        with self._lock:
            c = self._current(who, item_id, now, start=True)
            return c is not None and c["paused_since"] is not None

    def touch(self, who: str, item_id: str, now: float) -> None:
        """The page says it is still there (the heartbeat); nothing starts."""
        with self._lock:
            self._current(who, item_id, now, start=False)

    def toggle(self, who: str, item_id: str, now: float) -> bool:
        """Pause or resume; whether it is paused now."""
        with self._lock:
            c = self._current(who, item_id, now, start=True)
            assert c is not None
            if c["paused_since"] is not None:
                c["paused"] += now - c["paused_since"]
                c["paused_since"] = None
            else:
                c["paused_since"] = now
            return c["paused_since"] is not None

    def times(self, who: str, item_id: str, now: float) -> tuple[float, float] | None:
        """(seconds, seconds paused) on the item until ``now``; None if this process never showed it."""
        with self._lock:
            c = self._current(who, item_id, now, start=False)
            if c is None:
                return None
            paused = c["paused"] + (now - c["paused_since"] if c["paused_since"] is not None else 0.0)
            return now - c["shown_at"], paused

    def done(self, who: str, item_id: str) -> None:
        with self._lock:
            if self._clocks.get(who, {}).get("item_id") == item_id:
                del self._clocks[who]
