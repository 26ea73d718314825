"""The pass mark: per model, whether it reaches the licensing exam's line, overall, by domain, on fresh items."""

from __future__ import annotations

import pandas as pd
import pytest

from tcmqa.passmark import PASS_MARK, pass_table
from tcmqa.simulate import SimulationConfig, simulate
from tcmqa.study import load_study

MODELS = pd.DataFrame(
    {"model": ["fails", "passes"], "family": ["F", "F"], "params_b": [1.0, 9.0], "single": [40.0, 75.0],
     "multi": [10.0, 50.0]}
)  # fmt: skip


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    out = simulate(tmp_path_factory.mktemp("sim-pass"), SimulationConfig(n_items=1500, n_raters=15,
                   n_responses=2250, seed=9), MODELS)  # fmt: skip
    return load_study(out / "data", [out / "runs"])


def test_passmark_full_domain_and_fresh(study):
    fresh = pd.DataFrame({"model": ["fails", "passes"], "n_items": [40, 40], "accuracy": [65.0, 55.0]})
    table = pass_table(study, fresh=fresh).set_index(["model", "scope"])
    assert PASS_MARK == 60.0
    assert not table.at[("fails", "full"), "passes"] and table.at[("passes", "full"), "passes"]
    assert table.at[("passes", "full"), "accuracy"] == pytest.approx(100 * study.correct[:, 1].mean())
    assert table.at[("fails", "fresh"), "passes"] and not table.at[("passes", "fresh"), "passes"]
    domains = table.xs("passes").index[table.xs("passes").index.str.startswith("domain:")]
    assert len(domains) >= 5
    rated = study.corpus.set_index("id")["domains"].reindex(study.item_ids).map(len).gt(0).sum()
    assert table.xs("passes").loc[domains, "n_items"].max() <= rated
    stricter = pass_table(study, mark=80.0).set_index(["model", "scope"])
    assert not stricter.at[("passes", "full"), "passes"]


@pytest.mark.parametrize("mark", [0, 100, 360])
def test_passmark_refuses_a_mark_that_is_not_a_percentage(study, mark):
    with pytest.raises(ValueError, match="percentage between 0 and 100"):
        pass_table(study, mark=mark)
