"""Publication to the Hub: the evaluation queue's results, outputs, probes and request statuses, in few commits.

The queue lives in a database (``tcmqa.store``); the Hub is only where finished work is published.
A finished job is an entry in the store's publication outbox; a ``Publisher`` (one thread in the app or
a worker) drains that outbox into the benchmark dataset repo, many jobs per commit:

    results/<job id>.parquet              one row, typed with ``tcmqa.schema.RESULTS`` (``results`` config)
    outputs/<job id>-part-NNNNN.parquet   the job's per-item outputs (``outputs`` config)
    probes/<job id>-part-NNNNN.parquet    the job's per-item probe rows (``probes`` config), if it was probed

and, when a requests repo is given, mirrors the queue's statuses there at most once per
``mirror_every_s`` (``requests/<job id>.json``, the Open LLM Leaderboard's convention), only for jobs
whose status changed. Nothing commits per heartbeat or per page view.

Only full-coverage rows are published (:func:`partial_reason`): a row scored on fewer items than its corpus
holds (``--limit``, ``--subset-only``, a shard) would stand on the board as the model's result. Such a job
stays FINISHED in the store with its row; its publication is set aside as "not published: partial" (the
reason in the outbox's ``last_error`` and the log) and never retried.

The Hub caps commits per repository (about 128 an hour) and answers HTTP 429 past it; it also has
bad minutes (5xx, dropped connections). Every call goes through ``with_retries`` (exponential backoff
with full jitter, ``Retry-After`` honoured); a publication that still fails is recorded in the store
(``publication_failed``) and tried again later, so the queue never waits on the Hub. The Publisher
also keeps its own commit budget per repo (``commit_limit``), below the Hub's cap, so that a busy
queue slows publication down (bigger batches) instead of running into 429s.

Modules (callers import from the one that holds the name):

- :mod:`tcmqa.hub.retries`: which Hub errors are worth another try, and the retries themselves
- :mod:`tcmqa.hub.files`: the published files (paths, the results Parquet, the public request JSON)
- :mod:`tcmqa.hub.committer`: what every commit shares (lock, retried calls, commit budget, hold after failures)
- :mod:`tcmqa.hub.mirror`: the requests mirror (queue statuses)
- :mod:`tcmqa.hub.responses`: the ``responses`` and ``subset`` configs (practitioner mode)
- :mod:`tcmqa.hub.withheld`: the rows of items in open practice blocks, held back from a job's parts until
  the blocks are finished (then the job is published again, in full)
- :mod:`tcmqa.hub.publisher`: ``Publisher``, the outbox drained into the results repo, with the three above
"""
