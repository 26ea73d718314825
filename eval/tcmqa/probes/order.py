"""The option-order test (memorisation), after Ni et al. (arXiv 2409.01790), with model access only.

For each tested item, the log-likelihood of its text as published (stem and options, laid out as the
protocol lays them out, no instruction, :func:`tcmqa.prompts.render_item`) is compared with the same
text under other orders of its options. The tokens every order shares (the stem) are conditioned on and
not scored (:func:`shared_prefix`), so ``published_logprob`` is the log-likelihood of the options given
the stem.

Exam papers do not order options at random: shorter options tend to come first, numbers run in order,
the five organs come as 肝心脾肺肾, "以上都是" comes last, the right answer stands at E less often. A
model can prefer such orders without having seen the item, so comparing the published order with every
other order would flag a habit as memory. The test therefore compares the published order only with the
orders that share all of its declared features (:func:`option_features`): each option keeps its place
unless it trades with an option of the same length (characters and display width), the same number,
the same place in a canonical sequence (:data:`CANONICAL`), the same role as a reference to the others,
and the same correctness, and only where what every two places share in characters stays the same
(:func:`shared_surface`: similar options stand together in exam papers). An item with no such other
order is not testable (``convention``: ``no_equivalent_order``); options that name other options by
letter ("AB", "A和B", "[A][C]") change meaning when the options move, so such items are not tested
either (``refers_by_letter``).

The null: the model has not seen the items, and whatever it prefers about option orders depends on an
order only through these features. Then every order compared is equally likely to score highest (they
share every feature the preference can see), so the published order ranks first with probability
1/(orders compared), whatever the preference and however strong; independently across items. The count
ranked first is tested against that Poisson-binomial with an exact one-sided p-value
(:func:`poisson_binomial_p`); the mean percentile of the published order (50 under the null) says how
strong the preference is where it is not first. A tie with the published order counts against it. A
habit about a feature not declared here (a convention this module does not know, such as Unicode order)
can still raise the flag; a large p does not prove the items unseen.

Why orders that share the features rather than a model of the habit: a regression of each order's
log-likelihood on its features holds only for the habit's form and its fitted strength, and an
empirical null needs items from the same papers that the model cannot have seen. Within orders that
share the features the null is exact for every habit that is any function of them, at the price of
the items and orders it leaves out (tests/test_order_null.py plants such habits on the real sample).

>>> item = {"id": "q", "answer": ["B"], "options": dict(zip("ABCDE", ["肝", "心", "脾", "肺", "肾"]))}
>>> convention(item)  # five organs in their canonical order: no other order shares their places
'no_equivalent_order'
>>> item = {"id": "q", "answer": ["B"], "options": dict(zip("ABCDE", ["肝郁", "心火", "痰浊", "食积", "血瘀"]))}
>>> equivalent_orders(item)  # 肝 and 心 keep their places (五脏), as does the answer; the others may trade
[(0, 1, 2, 4, 3), (0, 1, 3, 2, 4), (0, 1, 3, 4, 2), (0, 1, 4, 2, 3), (0, 1, 4, 3, 2)]
>>> other_orders(item, 2), len(other_orders(item, 23))  # a sample fixed by the item id, else all of them
([(0, 1, 3, 2, 4), (0, 1, 4, 3, 2)], 5)
>>> convention({"id": "q", "answer": ["A"], "options": dict(zip("ABCDE", ["AB", "AC", "BC", "BD", "CE"]))})
'refers_by_letter'
>>> convention({"id": "q", "answer": ["A"], "options": dict(zip("ABCDE", ["心", "肝", "[A][B]", "肾", "无"]))})
'refers_by_letter'
>>> len(other_orders({"id": "q", "answer": ["A"], "options": dict(zip("ABCDE", "vwxyz"))}, 23))
23
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
ORDERS_ACCELERATED = ALL_ORDERS  # on a GPU every order sharing the published order's features
ORDERS_CPU = 23  # on a CPU at most a seeded 23 of them per item
PERMUTATIONS = tuple(itertools.permutations(range(len(LETTERS))))  # the published order first

# Sequences TCM (and exam papers) list in a fixed order; an option belongs to one when it begins with one
# of its terms (a term of two or more characters anywhere in it). Two or more options of an item in one
# sequence keep their places: a model may prefer the canonical order (or its reverse) without memory.
CANONICAL: dict[str, tuple[str, ...]] = {
    name: tuple(terms.split())
    for name, terms in {
        "五行": "木 火 土 金 水",
        "五脏": "肝 心 脾 肺 肾",
        "六腑": "胆 胃 小肠 大肠 膀胱 三焦",
        "五味": "酸 苦 甘 辛 咸",
        "五色": "青 赤 黄 白 黑",
        "五志": "怒 喜 思 悲 恐",
        "五官": "目 舌 口 鼻 耳",
        "五体": "筋 脉 肉 皮 骨",
        "五时": "春 夏 长夏 秋 冬",
        "五方": "东 南 中 西 北",
        "四气": "寒 热 温 凉",
        "六淫": "风 寒 暑 湿 燥 火",
        "六经": "太阳 阳明 少阳 太阴 少阴 厥阴",
        "卫气营血": "卫 气 营 血",
        "八纲": "阴 阳 表 里 寒 热 虚 实",
        "四诊": "望 闻 问 切",
        "君臣佐使": "君 臣 佐 使",
        "升降浮沉": "升 降 浮 沉",
        "寸关尺": "寸 关 尺",
        "浮中沉": "浮 中 沉",
        "轻重": "轻 中 重 危",
        "上下": "上 中 下",
        "初末": "初 中 末",
        "早晚": "早 中 晚",
        "前后": "前 中 后",
        "大小": "小 中 大",
        "高低": "低 中 高",
        "数": "一 二 三 四 五 六 七 八 九 十",
        "天干": "甲 乙 丙 丁 戊 己 庚 辛 壬 癸",
        "地支": "子 丑 寅 卯 辰 巳 午 未 申 酉 戌 亥",
    }.items()
}

_REFERS = re.compile(
    r"^(以上|上述|前述|前面|其余|其他)(各项|各项均|所述|选项|答案|说法|情况|几项|均|都|皆|全)*"
    r"(是|对|正确|不是|非|错|错误|不对|不正确|有|没有|无|可以|不可以|可|不可|适用)"
    r"|^(都|均|皆|全)(是|对|不是|不对|正确|错误|非)$"
    r"|^(none|all) of the above",
    re.IGNORECASE,
)
_LETTER = re.compile(r"(?<![A-Za-z])[A-E](?![A-Za-z])")
# "AB", "A和C", "A、B、D", "[A][C]": an option made of two or more option letters
_COMBINATION = re.compile(
    r"[\[(（【]?[A-E][\])）】]?(?:\s*(?:和|与|及|以及|、|,|，|\+|/|;|；)?\s*[\[(（【]?[A-E][\])）】]?)+"
)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_CHINESE_DIGITS = {"零": 0, "一": 1, "二": 2, "两": 2, "三": 3, "四": 4, "五": 5, "六": 6, "七": 7, "八": 8, "九": 9}
_CHINESE_NUMBER = re.compile(r"[零一二两三四五六七八九十百]+")
_ROMAN = re.compile(r"(?<![A-Za-z])(X|IX|IV|V?I{1,3}|V)(?![A-Za-z])")
_ROMAN_VALUES = {"I": 1, "II": 2, "III": 3, "IV": 4, "V": 5, "VI": 6, "VII": 7, "VIII": 8, "IX": 9, "X": 10}


def _number(text: str) -> float | None:
    """The first number in an option: Arabic digits, else a Chinese numeral (up to 999), else a Roman one."""
    match = _NUMBER.search(text)
    if match:
        return float(match.group())
    match = _CHINESE_NUMBER.search(text)
    if not match:
        roman = _ROMAN.search(text)
        return None if roman is None else float(_ROMAN_VALUES[roman.group()])
    value, digit = 0, None
    for char in match.group():
        if char in _CHINESE_DIGITS:
            digit = _CHINESE_DIGITS[char]
        else:  # 十 or 百 multiplies the digit before it (一 when none: 十 = 10)
            value += (1 if digit is None else digit) * (10 if char == "十" else 100)
            digit = None
    return float(value + (digit or 0))


def _options(item: Mapping[str, Any]) -> list[str]:
    """The options as published, NFKC-normalised and stripped (the form the features are read from)."""
    return [unicodedata.normalize("NFKC", str(item["options"][letter])).strip() for letter in LETTERS]


def _width(text: str) -> int:
    """Display width: wide and full-width characters count two."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def canonical_places(options: Sequence[str]) -> list[tuple[tuple[str, int], ...]]:
    """Per option, its (sequence, place) in each :data:`CANONICAL` sequence that two or more of the
    options belong to (at different places); () for the others.

    >>> canonical_places(["轻型", "中型", "重型", "心", "无"])
    [(('轻重', 0),), (('轻重', 1),), (('轻重', 2),), (), ()]
    """
    found: list[dict[str, int]] = []
    for option in options:
        places = {}
        for name, terms in CANONICAL.items():
            hits = [k for k, t in enumerate(terms) if option.startswith(t) or (len(t) > 1 and t in option)]
            if hits:
                places[name] = max(hits, key=lambda k: len(terms[k]))  # 长夏 rather than 夏
        found.append(places)
    shared = {name for name in CANONICAL if len({places[name] for places in found if name in places}) >= 2}
    return [tuple((name, place) for name, place in places.items() if name in shared) for places in found]


def refers_by_letter(options: Sequence[str]) -> bool:
    """Whether options name other options by letter ("A和B", "[A][C]", or two or more like "AB"): the
    options they name change when the options move.

    >>> refers_by_letter(["PSA", "PET", "CEA", "AFP", "MRI"]), refers_by_letter(["AB", "AC", "肝", "心", "肾"])
    (False, True)
    """
    named = any(len(set(_LETTER.findall(o))) >= 2 for o in options)
    return named or sum(bool(_COMBINATION.fullmatch(o)) for o in options) >= 2


def option_features(item: Mapping[str, Any]) -> list[tuple[Any, ...]]:
    """Per option, every feature of it that an order of the options can follow: its length in characters
    and display width, its number, its places in canonical sequences, the text of an option that refers
    to the others ("以上都是"), and whether it is a right answer. Options with equal features may trade
    places without changing any of these of the order."""
    options = _options(item)
    places = canonical_places(options)
    raw = [str(item["options"][letter]) for letter in LETTERS]
    return [
        (len(text), _width(text), _number(option), places[k], option if _REFERS.search(option) else "",
         LETTERS[k] in item["answer"])
        for k, (text, option) in enumerate(zip(raw, options, strict=True))
    ]  # fmt: skip


def shared_surface(options: Sequence[str]) -> np.ndarray:
    """What every two options share on the surface: characters (2 x 5 x 5: [0] characters, [1] runs of
    two). Exam papers put similar options next to each other; an order that keeps this matrix keeps every
    relation of similarity between places (neighbours, distances, the similar pair's place).

    >>> shared_surface(["肝肾阴虚", "肾阴虚", "脾虚", "心", "肺"])[:, 0, :3].tolist()
    [[4, 3, 1], [3, 2, 0]]
    """
    chars = [set(o) for o in options]
    runs = [{o[k : k + 2] for k in range(len(o) - 1)} for o in options]
    return np.array([[[len(a & b) for b in sets] for a in sets] for sets in (chars, runs)])


def equivalent_orders(item: Mapping[str, Any]) -> list[tuple[int, ...]]:
    """The other orders of ``item``'s options that share every declared feature of the published order
    (order[i]: the published option shown at letter i): each option's :func:`option_features` at each
    place and the :func:`shared_surface` of every two places; one per distinct text; none when options
    refer by letter."""
    options = _options(item)
    if refers_by_letter(options):
        return []
    features = option_features(item)
    shared = shared_surface(options)
    published = tuple(str(item["options"][letter]) for letter in LETTERS)
    seen = {published}
    found = []
    for order in PERMUTATIONS[1:]:
        text = tuple(published[j] for j in order)
        if text in seen or any(features[j] != features[i] for i, j in enumerate(order)):
            continue
        if (shared[:, order][:, :, order] == shared).all():
            seen.add(text)
            found.append(order)
    return found


def convention(item: Mapping[str, Any]) -> str:
    """Why ``item`` is left out of the order test ("" when it is tested)."""
    if refers_by_letter(_options(item)):
        return "refers_by_letter"
    return "" if equivalent_orders(item) else "no_equivalent_order"


def other_orders(item: Mapping[str, Any], orders: int, seed: int = 0) -> list[tuple[int, ...]]:
    """The option orders compared with the published one: every :func:`equivalent_orders` when there are
    no more than ``orders``, else a sample of ``orders`` of them, fixed by the item id and ``seed`` (the
    same in every process and run)."""
    every = equivalent_orders(item)
    if orders >= len(every):
        return every
    digest = hashlib.sha256(f"{seed}:{item['id']}".encode()).digest()[:8]
    rng = np.random.default_rng(int.from_bytes(digest, "big"))
    return [every[i] for i in sorted(rng.choice(len(every), size=orders, replace=False))]


def reorder(item: Mapping[str, Any], order: Sequence[int]) -> dict[str, Any]:
    """``item`` with letter i showing published option ``order[i]`` (the answer is not needed here)."""
    published = [item["options"][letter] for letter in LETTERS]
    return {**item, "options": {letter: published[j] for letter, j in zip(LETTERS, order, strict=True)}}


def texts(item: Mapping[str, Any], orders: Sequence[Sequence[int]]) -> list[str]:
    """The item's text as published, then under each of ``orders``."""
    return [prompts.render_item(item)] + [prompts.render_item(reorder(item, order)) for order in orders]


def token_sequences(tokenizer: Any, item: Mapping[str, Any], orders: int, seed: int = 0) -> tuple[list[list[int]], int]:
    """The item's text as published, then under :func:`other_orders`, tokenized (:func:`tokenize_orders`)."""
    return tokenize_orders(tokenizer, item, other_orders(item, orders, seed))


def tokenize_orders(
    tokenizer: Any, item: Mapping[str, Any], orders: Sequence[Sequence[int]]
) -> tuple[list[list[int]], int]:
    """The item's text as published, then under each of ``orders``, tokenized as the model reads text
    (with its special tokens), and the context every sequence shares (:func:`shared_prefix`)."""
    tokens = [tokenizer(text)["input_ids"] for text in texts(item, orders)]
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


def rank(scores: Sequence[float], item_id: str = "") -> tuple[int, float]:
    """(rank of ``scores[0]`` among all, ties counted against it; percentile of the others below it, ties
    half). A score that is not a finite number is an error, never a rank.

    >>> rank([-10.0, -12.0, -11.0]), rank([-12.0, -10.0, -12.0])
    ((1, 100.0), (3, 25.0))
    >>> rank([float("nan"), -10.0, -11.0], "q-1")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: item q-1: the engine scored an order nan (scores [nan, -10.0, -11.0]); a log-likelihood must ...
    """
    values = np.asarray(scores, dtype=float)
    if not np.isfinite(values).all():
        bad = values[~np.isfinite(values)][0]
        raise ValueError(
            f"item {item_id}: the engine scored an order {bad} (scores {values.tolist()[:6]}); a log-likelihood "
            "must be finite: check the engine and the model's dtype, then rerun the probe"
        )
    published, others = values[0], values[1:]
    above, ties = int((others > published).sum()), int((others == published).sum())
    below = len(others) - above - ties
    return 1 + above + ties, 100 * (below + 0.5 * ties) / len(others)


def order_row(item: Mapping[str, Any], scores: Sequence[float] | None, reason: str = "") -> dict[str, Any]:
    """One ``order`` probe row (``model``/``revision``/``probe_version`` are added by the caller)."""
    tested = scores is not None and not reason
    position, percentile = rank(scores, item["id"]) if tested and scores is not None else (None, None)
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


def poisson_binomial_p(first: int, chances: Sequence[float]) -> float:
    """P(X >= first) where X counts successes of independent trials with these ``chances``: the exact
    one-sided test of the number ranked first (a binomial when every chance is the same).

    >>> round(poisson_binomial_p(3, [0.1] * 10), 4), round(poisson_binomial_p(2, [0.5, 0.5, 0.25]), 4)
    (0.0702, 0.375)
    """
    from scipy import stats

    if not len(chances):
        return math.nan
    values, counts = np.unique(np.asarray(chances, dtype=float), return_counts=True)
    pmf = np.ones(1)
    for chance, n in zip(values, counts, strict=True):  # trials of equal chance are a binomial
        pmf = np.convolve(pmf, stats.binom.pmf(np.arange(n + 1), n, chance))
    return float(min(1.0, pmf[max(first, 0) :].sum()))


def summarise(rows: pd.DataFrame) -> dict[str, Any]:
    """The results row's order-test columns from ``order`` rows: the chance rate is the mean over tested
    items of 1/(orders compared), and the p-value is exact for those chances."""
    tested = rows[rows["convention"].fillna("") == ""].dropna(subset=["order_rank"])
    excluded = int((rows["convention"].fillna("") != "").sum())
    if tested.empty:
        return {"order_first": None, "order_chance": None, "order_p": None, "order_percentile": None,
                "n_order": 0, "order_excluded": excluded}  # fmt: skip
    chances = 1 / tested["n_orders"].to_numpy(dtype=float)
    first = int((tested["order_rank"] == 1).sum())
    return {
        "order_first": 100 * first / len(tested),
        "order_chance": 100 * float(chances.mean()),
        "order_p": poisson_binomial_p(first, chances),
        "order_percentile": float(tested["order_percentile"].mean()),
        "n_order": len(tested),
        "order_excluded": excluded,
    }
