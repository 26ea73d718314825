"""A stand-in for ``tcmqa eval``: writes what the harness writes (outputs/part-*.parquet and
results.json) after a delay set by environment variables, so worker crashes, timeouts and
concurrency are exercised in seconds. The real harness runs in test_space_e2e.py."""

STAND_IN = r"""
import argparse, json, os, sys, time
from pathlib import Path
import pandas as pd
p = argparse.ArgumentParser()
for flag in ("--model", "--revision", "--data", "--out", "--name", "--family"):
    p.add_argument(flag)
a = p.parse_args()
out = Path(a.out)
with open(os.environ["STAND_IN_STARTS"], "a") as f:
    f.write(f"{a.model} {os.getpid()}\n")
for i in range(int(os.environ.get("STAND_IN_STEPS", "1"))):
    print(f"{i + 1}/10 items", flush=True)
    time.sleep(float(os.environ.get("STAND_IN_SLEEP", "0")))
if os.environ.get("STAND_IN_FAIL"):
    print("Traceback: CUDA out of memory", file=sys.stderr)
    sys.exit(3)
(out / "outputs").mkdir(parents=True, exist_ok=True)
pd.DataFrame({"model": [a.model], "item_id": ["1"]}).to_parquet(out / "outputs" / "part-00000.parquet")
(out / "results.json").write_text(json.dumps({"model": a.model, "full": 20.0, "n": 10, "engine": "stand-in",
                                                 "revision": os.environ.get("STAND_IN_REVISION", a.revision)}))
"""
