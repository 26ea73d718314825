"""The option-order test (memorisation), after Ni et al. (arXiv 2409.01790), with model access only.

For each tested item, the log-likelihood of its text as published (stem and options, laid out as the
protocol lays them out, no instruction, :func:`tcmqa.prompts.render_item`) is compared with the same
text under K other orders of the options. The tokens every order shares (the stem) are conditioned on
and not scored (:func:`shared_prefix`): they are the same under every order, so ``published_logprob`` is
the log-likelihood of the options given the stem (all 119 when ``orders`` >= 119, else a seeded sample per
item). A model that has not seen the item has no reason to prefer the published order over any other:
under that null every order is equally likely to score highest, so the published one ranks first with
probability 1/(K+1), independently across items. A model that read the exam paper prefers the order it
read. Over n items, the number ranked first is tested against Binomial(n, 1/(K+1)) with an exact
one-sided p-value; the mean percentile of the published order (50 under the null) says how strong the
preference is where it is not first.

The null fails without memorisation where the published order follows a convention a model can prefer
having never seen the item: options in numeric order, an option that refers to the others ("以上都是",
"[A][C]"), options from shortest to longest, or identical options (which tie). Such items are left out
(their rows say why, ``convention``) and counted in ``order_excluded``. A tie with the published order
counts against it.

>>> convention({"options": dict(zip("ABCDE", ["1天", "3天", "5天", "7天", "10天"]))})
'ordered_numbers'
>>> convention({"options": dict(zip("ABCDE", ["肝", "心", "脾", "肺", "以上都是"]))})
'refers_to_others'
>>> convention({"options": dict(zip("ABCDE", ["[A][B]", "[A][C]", "[B][D]", "[C][E]", "[D][E]"]))})
'refers_to_others'
>>> convention({"options": dict(zip("ABCDE", ["肝", "心主血", "脾主运化", "肺主气司呼吸", "肾藏精主生长发育"]))})
'ordered_by_length'
>>> convention({"options": dict(zip("ABCDE", ["县级以上", "省级以上", "10天", "3天", "肺"]))})
''
>>> len(other_orders("q-1", 119)), len(other_orders("q-1", 23)), other_orders("q-1", 23) == other_orders("q-1", 23)
(119, 23, True)
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from tcmqa import prompts
from tcmqa_metric import LETTERS

ALL_ORDERS = math.factorial(len(LETTERS)) - 1  # 119 orders besides the published one
ITEMS = 1000  # items sampled for the test by default
ORDERS_ACCELERATED = ALL_ORDERS  # on a GPU every order is affordable
ORDERS_CPU = 23  # on a CPU a seeded sample (24 orders: chance 1/24)

_REFERS = re.compile(
    r"^(以上|上述|前述|前面|其余|其他)(各项|各项均|所述|选项|答案|说法|情况|几项|均|都|皆|全)*"
    r"(是|对|正确|不是|非|错|错误|不对|不正确|有|没有|无|可以|不可以|可|不可|适用)"
    r"|^(都|均|皆|全)(是|对|不是|不对|正确|错误|非)$"
    r"|^(none|all) of the above",
    re.IGNORECASE,
)
_LETTER = re.compile(r"(?<![A-Za-z])[A-E](?![A-Za-z])")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_CHINESE_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CHINESE_NUMBER = re.compile(r"[零一二两三四五六七八九十百]+")


def _number(text: str) -> float | None:
    """The first number in an option: Arabic digits, else a Chinese numeral (up to 999)."""
    match = _NUMBER.search(text)
    if match:
        return float(match.group())
    match = _CHINESE_NUMBER.search(text)
    if not match:
        return None
    value, digit = 0, None
    for char in match.group():
        if char in _CHINESE_DIGITS:
            digit = _CHINESE_DIGITS[char]
        else:  # 十 or 百 multiplies the digit before it (一 when none: 十 = 10)
            value += (1 if digit is None else digit) * (10 if char == "十" else 100)
            digit = None
    return float(value + (digit or 0))


def convention(item: Mapping[str, Any]) -> str:
    """Why the published order of ``item`` may be preferred without memorisation; "" when none."""
    options = [unicodedata.normalize("NFKC", str(item["options"][letter])).strip() for letter in LETTERS]
    if len(set(options)) < len(options):
        return "duplicate_options"
    if any(_REFERS.search(o) or len(set(_LETTER.findall(o))) >= 2 for o in options):
        return "refers_to_others"
    numbers = [_number(o) for o in options]
    if all(n is not None for n in numbers) and len(set(numbers)) >= 3:
        steps = np.diff(np.array(numbers, dtype=float))
        if (steps >= 0).all() or (steps <= 0).all():
            return "ordered_numbers"
    # strictly shortest to longest (or back): 10 of the sample's 2,590 remaining items, 3x what shuffled
    # options give; Unicode order was checked too and is at the chance rate
    lengths = np.diff([len(o) for o in options])
    if (lengths > 0).all() or (lengths < 0).all():
        return "ordered_by_length"
    return ""


def other_orders(item_id: str, orders: int, seed: int = 0) -> list[tuple[int, ...]]:
    """The option orders compared with the published one: all 119 when ``orders`` >= 119, else a sample
    of ``orders`` of them, fixed by the item id and ``seed`` (the same in every process and run)."""
    every = [p for p in itertools.permutations(range(len(LETTERS))) if p != tuple(range(len(LETTERS)))]
    if orders >= len(every):
        return every
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(f"{seed}:{item_id}".encode()).digest()[:8], "big"))
    return [every[i] for i in sorted(rng.choice(len(every), size=orders, replace=False))]


def reorder(item: Mapping[str, Any], order: Sequence[int]) -> dict[str, Any]:
    """``item`` with letter i showing published option ``order[i]`` (the answer is not needed here)."""
    published = [item["options"][letter] for letter in LETTERS]
    return {**item, "options": {letter: published[j] for letter, j in zip(LETTERS, order, strict=True)}}


def texts(item: Mapping[str, Any], orders: Sequence[Sequence[int]]) -> list[str]:
    """The item's text as published, then under each of ``orders``."""
    return [prompts.render_item(item)] + [prompts.render_item(reorder(item, order)) for order in orders]


def token_sequences(tokenizer: Any, item: Mapping[str, Any], orders: int, seed: int = 0) -> tuple[list[list[int]], int]:
    """The item's text as published, then under :func:`other_orders`, tokenized as the model reads text
    (with its special tokens), and the context every sequence shares (:func:`shared_prefix`)."""
    tokens = [tokenizer(text)["input_ids"] for text in texts(item, other_orders(item["id"], orders, seed))]
    return tokens, shared_prefix(tokens)


def shared_prefix(sequences: Sequence[Sequence[int]]) -> int:
    """Tokens all of an item's orders begin with (the stem, up to the first option that differs), at
    least 1 and short of the shortest sequence: the part every order shares is conditioned on, not
    scored, since it is the same under every order and cannot change a rank.

    >>> shared_prefix([[1, 2, 3, 4], [1, 2, 5, 6], [1, 2, 3, 7]])
    2
    """
    common = 0
    for column in zip(*sequences):
        if any(token != column[0] for token in column):
            break
        common += 1
    return max(1, min(common, min(map(len, sequences)) - 1))


def sample_items(items: Sequence[Mapping[str, Any]], n: int | None, seed: int = 0) -> list[Mapping[str, Any]]:
    """A stratified sample of ``n`` items (all when ``n`` is None or covers them), in corpus order.

    Strata are answer type x the source's top folder (the exam paper collection), allocated in
    proportion (largest remainders); within a stratum the items with the lowest seeded hash are taken.
    """
    if n is None or n >= len(items):
        return list(items)
    strata: dict[tuple[str, str], list[int]] = {}
    for index, item in enumerate(items):
        key = (str(item.get("answer_type")), str(item.get("source") or "").split("/")[0])
        strata.setdefault(key, []).append(index)
    quotas = {key: n * len(members) / len(items) for key, members in strata.items()}
    counts = {key: math.floor(q) for key, q in quotas.items()}
    for key in sorted(quotas, key=lambda k: (counts[k] - quotas[k], k))[: n - sum(counts.values())]:
        counts[key] += 1
    chosen: list[int] = []
    for key, members in strata.items():
        ranked = sorted(members, key=lambda i: hashlib.sha256(f"{seed}:{items[i]['id']}".encode()).hexdigest())
        chosen.extend(ranked[: counts[key]])
    return [items[i] for i in sorted(chosen)]


def rank(scores: Sequence[float]) -> tuple[int, float]:
    """(rank of ``scores[0]`` among all, ties counted against it; percentile of the others below it, ties
    half).

    >>> rank([-10.0, -12.0, -11.0]), rank([-12.0, -10.0, -12.0])
    ((1, 100.0), (3, 25.0))
    """
    published, others = scores[0], np.asarray(scores[1:], dtype=float)
    above, ties = int((others > published).sum()), int((others == published).sum())
    below = len(others) - above - ties
    return 1 + above + ties, 100 * (below + 0.5 * ties) / len(others)


def order_row(item: Mapping[str, Any], scores: Sequence[float] | None, reason: str = "") -> dict[str, Any]:
    """One ``order`` probe row (``model``/``revision``/``probe_version`` are added by the caller)."""
    tested = scores is not None and not reason
    position, percentile = rank(scores) if tested and scores is not None else (None, None)
    return {
        "item_id": item["id"],
        "answer_type": item["answer_type"],
        "probe": "order",
        "convention": reason,
        "n_orders": len(scores) if tested and scores is not None else None,
        "order_rank": position,
        "order_percentile": percentile,
        "published_logprob": float(scores[0]) if tested and scores is not None else None,
    }


def binomial_p(first: int, n: int, chance: float) -> float:
    """P(X >= first) for X ~ Binomial(n, chance): the one-sided exact test.

    >>> round(binomial_p(3, 10, 0.1), 4)
    0.0702
    """
    from scipy import stats

    return float(stats.binom.sf(first - 1, n, chance)) if n else math.nan


def summarise(rows: pd.DataFrame) -> dict[str, Any]:
    """The results row's order-test columns from ``order`` rows."""
    tested = rows[rows["convention"].fillna("") == ""].dropna(subset=["order_rank"])
    excluded = int((rows["convention"].fillna("") != "").sum())
    if tested.empty:
        return {"order_first": None, "order_chance": None, "order_p": None, "order_percentile": None,
                "n_order": 0, "order_excluded": excluded}  # fmt: skip
    n_orders = tested["n_orders"].unique()
    if len(n_orders) != 1:
        raise ValueError(f"the order rows mix numbers of orders ({sorted(n_orders)}); rerun the probe afresh")
    chance = 1 / float(n_orders[0])
    first = int((tested["order_rank"] == 1).sum())
    return {
        "order_first": 100 * first / len(tested),
        "order_chance": 100 * chance,
        "order_p": binomial_p(first, len(tested), chance),
        "order_percentile": float(tested["order_percentile"].mean()),
        "n_order": len(tested),
        "order_excluded": excluded,
    }
