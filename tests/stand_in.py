"""A stand-in for ``tcmqa eval``: writes what the harness writes (outputs/part-*.parquet, a full
results.json row and, with ``--probes``, a probes part typed with ``PROBES`` after a "rotations" progress
line) after a delay set by environment variables, so worker crashes, timeouts and concurrency are
exercised in seconds. The real harness runs in test_space_e2e.py.

Like the harness it resumes: with ``--resume`` it skips the steps an earlier attempt finished in the
same ``--out``. Each start appends ``model pid parent-pid first-step`` to ``$STAND_IN_STARTS``.
``$STAND_IN_NETWORK_FAILS=N``: the model's first N starts fail as the harness does when the Hub is down
(a ConnectionError, exit ``EXIT_TRANSIENT``), and so does every start while the file ``$STAND_IN_HUB_DOWN``
exists (the fake Hub's ``down_flag``: its outage, met by the model download at start). ``$STAND_IN_DUMP``: a
file each start writes its argv and environment to (JSON). ``$STAND_IN_ENGINE_ARGS``: a file holding the
results row's engine_args. Given the hidden pool (``--pool``) it records the pool's size and version in the
row, as the harness does.
"""

STAND_IN = r"""
import argparse, json, os, sys, time
from pathlib import Path
p = argparse.ArgumentParser()
for flag in ("--model", "--revision", "--data", "--out", "--name", "--family"):
    p.add_argument(flag)
p.add_argument("--resume", action="store_true")
p.add_argument("--probes", action="store_true")
for flag in ("--pool", "--released"):
    p.add_argument(flag)
p.add_argument("--pool-only", action="store_true")
a = p.parse_args()
out = Path(a.out)
out.mkdir(parents=True, exist_ok=True)
steps = int(os.environ.get("STAND_IN_STEPS", "1"))
done = [i for i in range(steps) if (out / f"step-{i}").exists()] if a.resume else []
with open(os.environ["STAND_IN_STARTS"], "a") as f:
    f.write(f"{a.model} {os.getpid()} {os.getppid()} {len(done)}\n")
if os.environ.get("STAND_IN_DUMP"):
    Path(os.environ["STAND_IN_DUMP"]).write_text(json.dumps({"argv": sys.argv, "env": dict(os.environ)}))
starts = [line.split()[0] for line in Path(os.environ["STAND_IN_STARTS"]).read_text().splitlines()]
hub_down = os.environ.get("STAND_IN_HUB_DOWN")  # the fake Hub's outage flag
network_fails = int(os.environ.get("STAND_IN_NETWORK_FAILS", "0"))
if starts.count(a.model) <= network_fails or (hub_down and Path(hub_down).exists()):
    from tcmqa.runs import EXIT_TRANSIENT
    print("ConnectionError: huggingface.co is unreachable", file=sys.stderr)
    sys.exit(EXIT_TRANSIENT)
(out / "run.json").write_text("{}")
for i in range(steps):
    if i in done:
        continue
    print(f"{i + 1}/{steps} items", flush=True)
    time.sleep(float(os.environ.get("STAND_IN_SLEEP", "0")))
    (out / f"step-{i}").touch()
if os.environ.get("STAND_IN_FAIL"):
    print("Traceback: CUDA out of memory", file=sys.stderr)
    sys.exit(3)
import pandas as pd  # imported late: a start is on record before the slow imports
import pyarrow as pa
import pyarrow.parquet as pq
from tcmqa.models import local_revision
from tcmqa.schema import PROBES, RESULTS
(out / "outputs").mkdir(parents=True, exist_ok=True)
pd.DataFrame({"model": [a.model], "item_id": ["1"]}).to_parquet(out / "outputs" / "part-00000.parquet")
revision = a.revision or (local_revision(a.model) if Path(a.model).is_dir() else None)
row = {name: None for name in RESULTS} | {"model": a.model, "full": 20.0, "n": 10, "engine": "stand-in",
                                          "revision": os.environ.get("STAND_IN_REVISION", revision)}
if os.environ.get("STAND_IN_BAD_ROW"):
    row["full"] = "twenty"
if os.environ.get("STAND_IN_ENGINE_ARGS"):  # what a tampered harness might record
    row["engine_args"] = Path(os.environ["STAND_IN_ENGINE_ARGS"]).read_text()
if a.pool:  # the hidden pool the worker handed it: its size and version in the row, as the harness does
    pool = json.loads(Path(a.pool).read_text())
    row |= {"n_fresh": len(pool["items"]), "pool_version": pool["version"], "fresh": 0.0, "model_released": a.released}
(out / "results.json").write_text(json.dumps(row))
if a.probes:
    print("rotations: 100%|##########| 1/1 [00:00<00:00, 9.00item/s]", flush=True)
    probe = {name: None for name in PROBES} | {"model": a.model, "item_id": "1", "probe": "rotation", "rotation": 2,
                                               "answer": ["B"], "prediction": ["B"], "correct": True}
    (out / "probes").mkdir(exist_ok=True)
    pq.write_table(pa.Table.from_pylist([probe], schema=PROBES.arrow_schema), out / "probes" / "rotation-00000.parquet")
"""
