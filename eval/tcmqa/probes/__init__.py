"""Probes: further passes over a finished run's items that test what one fixed option order cannot.

Versioned apart from the scored protocol (``PROBE_VERSION``; a probe never changes a protocol v1 row):

* :mod:`tcmqa.probes.rotation`: the five cyclic rotations of the options (CircularEval, letter bias,
  PriDe), with the protocol's prompt, rendering and decoding;
* :mod:`tcmqa.probes.order`: the option-order test for memorisation (prefill only);
* :mod:`tcmqa.probes.calibration`: calibration and selective accuracy from the stored letter log-probs
  (no pass; every results row carries it).

:mod:`tcmqa.probes.run` runs the first two over a run folder (``tcmqa probe RUN_DIR``, or
``tcmqa eval --probes`` in the same engine load) and writes the ``probes`` config's rows beside the run's
outputs. To add a probe: a module here with a function from the run's items to ``PROBES`` rows and a
``summarise(rows)`` giving its results columns (declared in ``tcmqa.schema.RESULT_COLUMNS``), then a
stage in :func:`tcmqa.probes.run.run_probes`; bump ``PROBE_VERSION`` when a probe's rows change meaning.
"""

PROBE_VERSION = "p2"  # p2: the order test compares only orders that share the published order's features
