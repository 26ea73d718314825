"""A thousand-model study draws: the figures whose side grows with the number of models stay within what
matplotlib can draw (65,536 px) at the report's 110 dpi."""

from __future__ import annotations

import io
import time

import matplotlib

matplotlib.use("Agg")

from PIL import Image

from tcmqa import figures


def test_a_figure_of_many_models_is_drawn_within_matplotlib_limits() -> None:
    n = 700  # 0.45 in a model: 34,870 px at 110 dpi uncapped, and 1,320 models would pass the limit
    d = {"models": [f"org/model-{i}" for i in range(n)], "title": "Figure 1"}
    d |= {key: [50.0] * n for key in ("full", "single", "multi")}
    start = time.perf_counter()
    fig = figures.accuracy_by_answer_type_draw(d)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    width, _ = Image.open(io.BytesIO(buffer.getvalue())).size
    assert 110 * 6 < width <= 110 * figures.MAX_SPAN_IN * 1.05 < 65_536
    print(f"{n} models drawn in {time.perf_counter() - start:.1f}s, {width} px wide")
