"""TCMQA's schema: the one definition of every config's features and of the facts they rest on.

Everything that names a column, a domain or a study constant imports it from here: the builder
(``tcmqa.ingest`` and ``loading_script/tcmqa.py``), the harness's output rows, the results row, the
dataset card, the board and the CLI. The results columns are declared once, in ``RESULT_COLUMNS``
(after the leaderboard template's ``ColumnContent``); the ``RESULTS`` features, the board's columns
and the CLI's row are all read from that declaration.
"""

from __future__ import annotations

import dataclasses

import datasets

from tcmqa_metric import LETTERS

CITATION = """\
@misc{tcmqa,
  title  = {TCMQA: A 38K-Question Traditional Chinese Medicine Benchmark with a Licensed-Practitioner Reference},
  author = {TechTCM},
  year   = {2026},
  url    = {https://huggingface.co/datasets/TechTCM/TCMQA}
}
"""
DESCRIPTION = "Five-option TCM licensing-exam questions with licensed-practitioner responses."
HOMEPAGE = "https://huggingface.co/datasets/TechTCM/TCMQA"
LICENSE = "cc-by-nc-sa-4.0"
HUB_ID = "TechTCM/TCMQA"
SPLIT = "test"  # every config has one split, named for what a benchmark is

# The ten domains of the paper's Table 1: stable English key -> its name in the Space's three languages
# (the one table of them; tcmqa.leaderboard.lang shows them); the platform numbers them 1..10 in this order.
DOMAIN_NAMES: dict[str, dict[str, str]] = {
    "foundational_theory": {"en": "Foundational theory", "zh-CN": "中医基础理论", "zh-TW": "中醫基礎理論"},
    "classical_texts": {"en": "Classical texts", "zh-CN": "中医经典文献", "zh-TW": "中醫經典文獻"},
    "diagnosis_patterns": {"en": "Diagnosis and patterns", "zh-CN": "诊断与辨证学", "zh-TW": "診斷與辨證學"},
    "meridians_acupuncture": {"en": "Meridians and acupuncture", "zh-CN": "经络与针灸学", "zh-TW": "經絡與針灸學"},
    "materia_medica": {"en": "Materia medica", "zh-CN": "中药本草学", "zh-TW": "中藥本草學"},
    "internal_medicine": {"en": "Internal medicine", "zh-CN": "中医内科学", "zh-TW": "中醫內科學"},
    "external_medicine": {"en": "External medicine", "zh-CN": "中医外科学", "zh-TW": "中醫外科學"},
    "ent_ophthalmology": {"en": "ENT and ophthalmology", "zh-CN": "中医五官科学", "zh-TW": "中醫五官科學"},
    "regulation": {"en": "Regulations", "zh-CN": "中医法规", "zh-TW": "中醫法規"},
    "other": {"en": "Other", "zh-CN": "其他", "zh-TW": "其他"},
}
# key -> the paper's (Traditional Chinese) label: the dataset card's and the tables' labels
DOMAINS: dict[str, str] = {key: names["zh-TW"] for key, names in DOMAIN_NAMES.items()}
DOMAIN_BY_PLATFORM_NUMBER: dict[str, str] = {str(i): key for i, key in enumerate(DOMAINS, 1)}
MAX_DOMAINS_PER_RESPONSE = 3  # a rater ticks up to three domains (Appendix A)

BLOCK_SIZE = 150  # items per practitioner block on the platform
RATERS_PER_ITEM = 3  # the paper's study: three practitioners per block (the Space's default; TCMQA_RATERS)
STUDY, SPACE = "study", "space"  # a response's source: the paper's study (a pinned import) or the Space

# ---------------------------------------------------------------------------------------------
# Features of the data configs
# ---------------------------------------------------------------------------------------------
_str = datasets.Value("string")
_letters = datasets.List(_str)
OPTIONS = datasets.Features({letter: _str for letter in LETTERS})

CORPUS = datasets.Features(
    {
        "id": _str,
        "question": _str,
        "options": OPTIONS,
        "answer": _letters,  # sorted letters, e.g. ["B", "D"]
        "answer_type": _str,  # "single" | "multi"
        "explanation": _str,
        "source_difficulty": datasets.Value("int32"),
        "topic": _str,
        "source": _str,
        "domains": datasets.List(_str),  # union of the raters' domain keys; [] if unrated
        "flagged": datasets.Value("bool"),  # any practitioner flagged it: excluded from results
        # a retired fresh item (tcmqa.store.pool): the ISO dates it was accepted (hidden) and made public;
        # null for the exam items
        "release_date": _str,
        "retired_date": _str,
        # the key as extracted from the exam paper: differs from answer where an erratum corrected it (tcmqa.errata)
        "original_answer": _letters,
    }
)

ERRATA = datasets.Features(
    {
        "item_id": _str,
        "verdict": _str,  # tcmqa.errata.VERDICTS: MMLU-Redux's categories
        "old_key": _letters,  # the key adjudicated on
        "new_key": _letters,  # the right letters of a wrong key; [] otherwise
        "drop": datasets.Value("bool"),  # the item leaves the corpus
        "reviewers": datasets.List(_str),
        "decided_date": _str,
        "corpus_revision": _str,  # the corpus revision the verdict was made on
        "comment": _str,
    }
)

RESPONSES = datasets.Features(
    {
        "response_id": _str,
        "item_id": _str,
        "practitioner_id": _str,  # stable pseudonym, one per person ("P..." study, "S..." Space)
        "source": _str,  # STUDY | SPACE: where the response was collected
        "block": datasets.Value("int32"),
        "rater_slot": datasets.Value("int32"),  # 0..raters-1 within the block
        "selected": _letters,
        "correct": datasets.Value("bool"),  # recomputed from the answer set
        "domains": datasets.List(_str),
        "domains_zh": datasets.List(_str),
        "difficulty": datasets.Value("int8"),  # 1 (easiest) .. 5 (hardest)
        "flagged": datasets.Value("bool"),
        "seconds": datasets.Value("float32"),
        "seconds_paused": datasets.Value("float32"),
    }
)

SUBSET = datasets.Features(
    {
        "item_id": _str,
        "answer_type": _str,
        "n_raters": datasets.Value("int8"),  # N: the subset holds items with exactly N responses
        "n_correct": datasets.Value("int8"),  # 0..N practitioners correct
        "majority_correct": datasets.Value("bool"),  # strictly more than N/2 correct (a tie is no majority)
        "practitioner_ids": datasets.List(_str),
        "rater_correct": datasets.List(datasets.Value("bool")),
        "rater_domains": datasets.List(datasets.List(_str)),
        "rater_difficulty": datasets.List(datasets.Value("int8")),
    }
)

OUTPUTS = datasets.Features(
    {
        "model": _str,
        "item_id": _str,
        "answer_type": _str,
        "generated_text": _str,
        "prediction": _letters,  # the text rule over generated_text
        "correct": datasets.Value("bool"),
        "precision": datasets.Value("float32"),
        "recall": datasets.Value("float32"),
        "f1": datasets.Value("float32"),
        "letter_logprobs": datasets.Features({letter: datasets.Value("float32") for letter in LETTERS}),
        "lp_prediction": _str,  # argmax over A-E of the first generated token
        "lp_correct": datasets.Value("bool"),
        "margin": datasets.Value("float32"),  # top-1 minus top-2 letter log-prob (nats)
        "finish_reason": _str,
        "n_prompt_tokens": datasets.Value("int32"),
        "prompt_hash": _str,  # sha256 of the rendered prompt text
        "protocol": _str,
        "revision": _str,
    }
)

# Per-item probe rows (``tcmqa.probes``): extra passes over the same items under PROBE_VERSION, never
# part of a protocol v1 row. A ``rotation`` row is one item under one cyclic rotation of its options
# (rotation 0 is the published order, copied from the v1 run); an ``order`` row is one item's option-order
# test. Columns that do not apply to a row's probe are null.
PROBES = datasets.Features(
    {
        "model": _str,
        "revision": _str,
        "item_id": _str,
        "answer_type": _str,
        "probe": _str,  # "rotation" | "order"
        "probe_version": _str,
        # rotation rows
        "rotation": datasets.Value("int8"),  # 0..4: option k of the published order is shown at letter k - rotation
        "answer": _letters,  # the reference letters under this rotation
        "generated_text": _str,
        "prediction": _letters,
        "correct": datasets.Value("bool"),
        "letter_logprobs": datasets.Features({letter: datasets.Value("float32") for letter in LETTERS}),
        "lp_prediction": _str,
        "lp_correct": datasets.Value("bool"),
        "prompt_hash": _str,
        # order rows
        "convention": _str,  # why the item is left out of the order test ("" when tested)
        "n_orders": datasets.Value("int32"),  # option orders scored, the published one included
        "order_rank": datasets.Value("int32"),  # 1: the published order is strictly the most likely
        "order_percentile": datasets.Value("float32"),  # share of other orders less likely (ties half), percent
        # log-likelihood of the options as published given what every order shares (the stem), nats
        "published_logprob": datasets.Value("float64"),
    }
)


# ---------------------------------------------------------------------------------------------
# The results config: one declaration per column
# ---------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class ResultColumn:
    """One column of the ``results`` config (one leaderboard row per model) and how it is shown."""

    name: str  # field name in the results config
    label: str  # header on the board and in the CLI row
    dtype: str  # a ``datasets.Value`` dtype
    higher_is_better: bool | None = None  # None: not a score (an id, a count, a fact about the run)
    shown: bool = False  # on the board by default
    board: bool = True  # offered on the board at all
    cli: bool = False  # in the row ``tcmqa eval`` prints
    doc: str = ""
    # (field, word): what the value means nothing without, on the same items; the board shows it in the
    # value's own cell, "6.47 (chance 4.17)", so no choice of columns, sort or filter shows the value alone
    read_against: tuple[str, str] | None = None
    covers: str = ""  # the items the value is computed on ('' where it is not computed on items: an id, a fact)

    def __post_init__(self) -> None:
        # the About tab's table of board columns is generated from these declarations: none may be blank
        if self.board and not self.doc.strip():
            raise ValueError(
                f"results column {self.name!r} is on the board but says nothing: declare doc='what it means'"
            )


RESULT_COLUMNS: tuple[ResultColumn, ...] = (
    ResultColumn("model", "Model", "string", shown=True, cli=True, doc="Hub id, or a local folder's name"),
    ResultColumn(
        "origin",
        "Origin",
        "string",
        shown=True,
        doc="where the row comes from: 'reported' (the paper's Table 4), 'evaluated' (run by this Space's harness) "
        "or 'reference' (the licensed practitioners' majority vote)",
    ),
    ResultColumn("family", "Family", "string", shown=True, doc="model family, e.g. Qwen2"),
    ResultColumn("params_b", "Params (B)", "float32", shown=True, doc="parameters in billions"),
    ResultColumn(
        "full",
        "Full",
        "float32",
        True,
        shown=True,
        cli=True,
        doc="exact match over all items, percent",
        covers="every scorable item of the data the row ran on (its corpus less the items practitioners flagged); a "
        "partial run: the items it ran (Coverage); the paper's rows: the paper's 38,279-item corpus",
    ),
    ResultColumn(
        "single",
        "Single",
        "float32",
        True,
        shown=True,
        cli=True,
        doc="exact match, single-answer items",
        covers="the single-answer items of Full's",
    ),
    ResultColumn(
        "multi",
        "Multi",
        "float32",
        True,
        shown=True,
        cli=True,
        doc="exact match, multi-answer items",
        covers="the multi-answer items of Full's",
    ),
    ResultColumn(
        "subset",
        "Subset",
        "float32",
        True,
        shown=True,
        cli=True,
        doc="exact match on the practitioners' comparison subset",
        covers="the practitioners' comparison subset among Full's items: items with a complete set of practitioners'"
        " responses (the study's N raters each), as its run recorded it or recounted on the subset as it "
        "stands (Subset on)",
    ),
    ResultColumn(
        "delta_human",
        "Δ human",
        "float32",
        True,
        shown=True,
        cli=True,
        doc="Subset minus the practitioners' majority vote on the same items, points",
        covers="Subset's items",
    ),
    ResultColumn(
        "lp_full",
        "LP Full",
        "float32",
        True,
        shown=True,
        cli=True,
        doc="exact match of the first-token log-prob channel, percent",
        covers="Full's items",
    ),
    ResultColumn(
        "multi_f1",
        "Multi F1",
        "float32",
        True,
        shown=True,
        cli=True,
        doc="multi-answer F1, percent",
        covers="Multi's items",
    ),
    ResultColumn(
        "confidence_gap",
        "Conf. gap",
        "float32",
        True,
        cli=True,
        doc="the log-prob channel's mean margin (top letter's log-prob minus the second's, nats, capped at its 99th "
        "percentile) on the items answered right minus on those answered wrong (the paper's Appendix B): larger, the "
        "model is surer when right; not comparable with the paper's (departure b)",
        covers="Full's items (the log-prob channel's margins, split by the generative answer's correctness)",
    ),
    # Fresh items (tcmqa.fresh): the hidden pool practitioners write and review, evaluated after the public items
    # in the same run (or by a back-fill when the pool grows); null on a row run without a pool.
    ResultColumn(
        "fresh",
        "Fresh",
        "float32",
        True,
        shown=True,
        cli=True,
        doc="exact match on the hidden pool's accepted items (never published, so never memorised), percent",
        covers="the hidden pool's accepted items the row was evaluated on (Fresh 95% CI gives how many)",
    ),
    ResultColumn(
        "public_minus_fresh",
        "Public − Fresh",
        "float32",
        False,
        shown=True,
        doc="Full minus Fresh, points: the same model on the public items and on never-published ones",
        covers="Full's items against Fresh's",
    ),
    ResultColumn(
        "fresh_gap",
        "Gap vs human",
        "float32",
        False,
        shown=True,
        doc="the model's public − fresh gap minus the practitioners' own (subset items against pool items with a "
        "blind-answer reference), points; a harder pool widens both gaps alike",
        covers="the model on Full's and Fresh's items; the practitioners on Subset's items and the pool items with a"
        " blind-answer reference",
    ),
    ResultColumn(
        "fresh_after_release",
        "Fresh after release",
        "float32",
        True,
        doc="Fresh on the pool items released (accepted) after the model's release date, percent",
        covers="Fresh's items accepted after the model's release date",
    ),
    ResultColumn(
        "pool_version",
        "Pool version",
        "string",
        doc="the hidden pool the fresh columns are on (digest of its accepted items): rows compare on one version",
        covers="the hidden pool's accepted items",
    ),
    ResultColumn("fresh_ci_low", "Fresh CI low", "float32", board=False, doc="95% bootstrap interval of Fresh, lower"),
    ResultColumn(
        "fresh_ci_high", "Fresh CI high", "float32", board=False, doc="95% bootstrap interval of Fresh, upper"
    ),
    ResultColumn("n_fresh", "Fresh items", "int32", board=False, doc="pool items evaluated"),
    ResultColumn(
        "fresh_gap_low", "Gap CI low", "float32", board=False, doc="95% normal interval of Gap vs human, lower"
    ),
    ResultColumn(
        "fresh_gap_high", "Gap CI high", "float32", board=False, doc="95% normal interval of Gap vs human, upper"
    ),
    ResultColumn(
        "fresh_gap_marked",
        "Gap marked",
        "bool",
        board=False,
        doc="the interval of Gap vs human lies above 0: the model gains on public items more than practitioners do",
    ),
    ResultColumn(
        "human_fresh",
        "Human fresh",
        "float32",
        board=False,
        doc="practitioners' majority of blind answers correct on the evaluated pool items, percent",
    ),
    ResultColumn(
        "n_fresh_after_release",
        "Fresh after release items",
        "int32",
        board=False,
        doc="pool items released after the model's release date",
    ),
    ResultColumn(
        "model_released",
        "Model released",
        "string",
        board=False,
        doc="the model's release date (YYYY-MM-DD): from the Hub (created) or given at submission",
    ),
    # Probes (tcmqa.probes): null until `tcmqa probe` (or `tcmqa eval --probes`) has run on the row's run.
    ResultColumn(
        "circular",
        "Circular",
        "float32",
        True,
        doc="CircularEval: exact match under all five cyclic rotations of the options, percent of the probed items",
        covers="the rotation probe's items (the comparison subset by default)",
    ),
    ResultColumn(
        "rotation_mean",
        "Rot. mean",
        "float32",
        True,
        doc="exact match averaged over the five rotations, percent of the probed items",
        read_against=("rotation_published", "published"),
        covers="the rotation probe's items",
    ),
    ResultColumn(
        "rotation_published",
        "Rot. published",
        "float32",
        True,
        board=False,
        doc="exact match in the published order on the items probed under the five rotations, percent",
    ),
    ResultColumn(
        "circular_drop",
        "Circ. drop",
        "float32",
        False,
        doc="exact match in the published order minus Circular, on the same items, points",
        covers="the rotation probe's items",
    ),
    ResultColumn(
        "recall_std",
        "Letter RStd",
        "float32",
        False,
        doc="selection bias: standard deviation of the recall of each answer letter A-E over rotations, points",
        covers="the rotation probe's items, under all five rotations",
    ),
    ResultColumn(
        "pride",
        "PriDe",
        "float32",
        True,
        doc="log-prob channel accuracy after PriDe removes the letter prior estimated under rotations, percent "
        "of the single-answer probed items left after estimation",
        read_against=("pride_lp", "LP"),
        covers="the rotation probe's single-answer items, less the 5% the letter prior is estimated on",
    ),
    ResultColumn(
        "pride_lp",
        "PriDe LP",
        "float32",
        True,
        board=False,
        doc="log-prob channel accuracy with the letter prior left in, on the items PriDe is scored on, percent",
    ),
    ResultColumn("n_rotation", "Rotated items", "int32", board=False, doc="items probed under the five rotations"),
    ResultColumn(
        "order_first",
        "Order 1st",
        "float32",
        doc="memorisation: share of tested items whose published option order is the most likely, percent",
        read_against=("order_chance", "chance"),
        covers="the order test's items: a stratified sample (1,000 by default) less those no other order can be "
        "compared with (Order excluded)",
    ),
    ResultColumn(
        "order_chance",
        "Order chance",
        "float32",
        board=False,
        doc="Order 1st expected by chance: the mean over tested items of 100/(orders compared)",
    ),
    ResultColumn(
        "order_p",
        "Order p",
        "float64",
        doc="one-sided exact (Poisson-binomial) p-value of Order 1st against chance; small means the published "
        "orders are preferred over orders that share their declared features (memorisation, or a habit about a "
        "feature not declared)",
        covers="Order 1st's items",
    ),
    ResultColumn(
        "order_percentile",
        "Order pct",
        "float32",
        board=False,
        doc="mean percentile of the published order among the orders compared (50 by chance)",
    ),
    ResultColumn("n_order", "Order items", "int32", board=False, doc="items in the order test"),
    ResultColumn(
        "order_excluded",
        "Order excluded",
        "int32",
        board=False,
        doc="sampled items left out of the order test: no other order shares the published order's features, or "
        "options name others by letter",
    ),
    ResultColumn(
        "ece",
        "ECE",
        "float32",
        False,
        doc="equal-mass expected calibration error (10 bins) of the log-prob channel, single-answer items, points",
        covers="the single-answer items of Full's",
    ),
    ResultColumn(
        "acc_top10",
        "Acc@10%",
        "float32",
        True,
        doc="log-prob channel accuracy on the 10% of single-answer items it is most confident on, percent",
        covers="the 10% of Full's single-answer items the log-prob channel is most confident on",
    ),
    ResultColumn(
        "acc_coverage_area",
        "Sel. area",
        "float32",
        True,
        doc="area under the accuracy-coverage curve of the log-prob channel, single-answer items, percent",
        covers="the single-answer items of Full's",
    ),
    ResultColumn("full_ci_low", "Full CI low", "float32", board=False, doc="95% bootstrap interval of Full, lower"),
    ResultColumn("full_ci_high", "Full CI high", "float32", board=False, doc="95% bootstrap interval of Full, upper"),
    ResultColumn(
        "subset_ci_low", "Subset CI low", "float32", board=False, doc="95% bootstrap interval of Subset, lower"
    ),
    ResultColumn(
        "subset_ci_high", "Subset CI high", "float32", board=False, doc="95% bootstrap interval of Subset, upper"
    ),
    ResultColumn("probe_version", "Probe version", "string", board=False, doc="version of tcmqa.probes that ran"),
    ResultColumn("revision", "Revision", "string", doc="model commit sha, or local-<hash of the folder>"),
    ResultColumn("engine", "Engine", "string", doc="the inference engine that ran it: vllm or transformers"),
    ResultColumn("protocol", "Protocol", "string", doc="protocol version of tcmqa.prompts"),
    ResultColumn("date", "Date", "string", doc="UTC date of the evaluation"),
    ResultColumn(
        "coverage",
        "Coverage (%)",
        "float32",
        doc="items scored as a share of the scorable corpus (n / n_corpus), percent; 100 for a full run",
        covers="Full's items against the scorable corpus",
    ),
    ResultColumn(
        "data_fingerprint",
        "Data fingerprint",
        "string",
        doc="fingerprint of the whole scorable corpus the items were drawn from (every unflagged item, "
        "tcmqa.runs.data_fingerprint): a --limit run and a full run on the same data share it",
        covers="the whole scorable corpus (not only the items run)",
    ),
    ResultColumn("data", "Data", "string", doc="the dataset it ran on: a Hub dataset id or a built tree's path"),
    ResultColumn(
        "data_revision",
        "Data revision",
        "string",
        board=False,
        doc="the dataset's commit sha on the Hub (as resolved, else as requested); null for a local tree",
    ),
    ResultColumn("n_corpus", "Corpus items", "int32", board=False, doc="scorable (unflagged) items in that corpus"),
    ResultColumn(
        "human_reference",
        "Human ref.",
        "float32",
        board=False,
        doc="practitioners' majority vote on the evaluated subset items, percent",
    ),
    ResultColumn("multi_precision", "Multi P", "float32", True, board=False, doc="multi-answer precision, percent"),
    ResultColumn("multi_recall", "Multi R", "float32", True, board=False, doc="multi-answer recall, percent"),
    ResultColumn(
        "multi_mean_pred_size",
        "Multi size",
        "float32",
        board=False,
        doc="mean number of letters predicted on multi-answer items",
    ),
    ResultColumn("n", "Items", "int32", board=False, cli=True, doc="items scored"),
    ResultColumn("n_single", "Single items", "int32", board=False),
    ResultColumn("n_multi", "Multi items", "int32", board=False),
    ResultColumn("n_subset", "Subset items", "int32", board=False),
    ResultColumn("engine_version", "Engine version", "string", board=False),
    ResultColumn("dtype", "Dtype", "string", board=False, doc="weights dtype of the run"),
    ResultColumn(
        "engine_args",
        "Engine args",
        "string",
        board=False,
        doc="the engine options of the run (`--engine-arg`, `--enforce-eager`, `--batch-size`) as sorted JSON",
    ),
    ResultColumn(
        "batch_invariant",
        "Batch-invariant",
        "bool",
        board=False,
        doc="ran with vLLM's batch-invariant kernels (an item's output does not depend on its batch); null: not said",
    ),
)
RESULTS = datasets.Features({c.name: datasets.Value(c.dtype) for c in RESULT_COLUMNS})

FEATURES: dict[str, datasets.Features] = {
    "corpus": CORPUS,
    "responses": RESPONSES,
    "subset": SUBSET,
    "outputs": OUTPUTS,
    "results": RESULTS,
    "probes": PROBES,
    "errata": ERRATA,
}
