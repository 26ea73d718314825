"""The Space's languages: Simplified Chinese, Traditional Chinese and English, through gradio's own i18n.

One table (:data:`STRINGS`) holds every piece of the Space's text in the three languages, under a stable key.
Two ways out of it:

* :func:`t` for what a component is built with (a label, a tab, a button, a choice, a static Markdown): gradio's
  ``gr.I18n`` (:data:`I18N`, passed to ``launch`` with :data:`LAUNCH`) translates it in the browser;
* :func:`text` for what a handler renders (a note, a table's headers and cells): gradio translates no value a
  handler returns, so it is rendered in the caller's language, read from the request gradio is serving
  (:func:`current`).

Which language: ``?lang=`` in the page's address (the selector in the header sets it), else the browser's
languages (the ``Accept-Language`` header; the page's :data:`LOCALE_JS` reads the same list), else English;
one rule (:func:`pick`), which the page's script gets as data. Domain names come from
:data:`tcmqa.schema.DOMAIN_NAMES` (:func:`domain`), never their keys.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import gradio as gr
from gradio.context import LocalContext

from tcmqa.schema import DOMAIN_NAMES

LOCALES = ("en", "zh-CN", "zh-TW")
DEFAULT = "en"
LANGUAGE_NAMES = {"en": "English", "zh-CN": "简体中文", "zh-TW": "繁體中文"}
# language tags (lower case) that mean one of LOCALES; a tag is matched whole, then by its shorter prefixes
ALIASES = {
    "en": "en",
    "zh": "zh-CN",
    "zh-cn": "zh-CN",
    "zh-sg": "zh-CN",
    "zh-hans": "zh-CN",
    "zh-tw": "zh-TW",
    "zh-hk": "zh-TW",
    "zh-mo": "zh-TW",
    "zh-hant": "zh-TW",
}

# key -> (English, Simplified Chinese, Traditional Chinese)
STRINGS: dict[str, tuple[str, str, str]] = {
    # the page
    "title": ("TCMQA leaderboard", "TCMQA 排行榜", "TCMQA 排行榜"),
    "intro": (  # followed by the practitioners' majority vote on the subset (%)
        "Traditional Chinese Medicine licensing-exam questions, with a licensed-practitioner reference: the "
        "practitioners' majority vote on the subset scores",
        "中医执业资格考试试题，以执业中医师为参照：中医师多数投票在子集上的正确率为",
        "中醫執業資格考試試題，以執業中醫師為參照：中醫師多數投票在子集上的正確率為",
    ),
    "language": ("Language", "语言", "語言"),
    # tabs
    "tab_board": ("Board", "排行榜", "排行榜"),
    "tab_plots": ("Plots", "图表", "圖表"),
    "tab_explorer": ("Item explorer", "试题浏览", "試題瀏覽"),
    "tab_compare": ("Compare", "模型对比", "模型對比"),
    "tab_model": ("Model", "模型详情", "模型詳情"),
    "tab_submit": ("Submit", "提交模型", "提交模型"),
    "tab_queue": ("Queue", "评测队列", "評測隊列"),
    "tab_practitioners": ("Practitioners", "中医师作答", "中醫師作答"),
    "tab_about": ("About", "说明", "說明"),
    # Board
    "board_search": ("Search models", "搜索模型", "搜尋模型"),
    "board_search_hint": ("e.g. qwen2.5", "例如 qwen2.5", "例如 qwen2.5"),
    "board_family": ("Family", "模型系列", "模型系列"),
    "board_size_min": ("Min params (B)", "最少参数量（B）", "最少參數量（B）"),
    "board_size_max": ("Max params (B)", "最多参数量（B）", "最多參數量（B）"),
    "board_rows": ("Rows", "显示的行", "顯示的列"),
    "origin_reported": ("reported", "论文报告", "論文報告"),
    "origin_evaluated": ("evaluated", "本站评测", "本站評測"),
    "origin_reference": ("reference", "中医师参照", "中醫師參照"),
    "board_comparison": (
        "Comparison (only 'comparable' rows rank against each other)",
        "可比性（只有 comparable 的行相互排名）",
        "可比性（只有 comparable 的列相互排名）",
    ),
    "board_columns": (
        "Columns (answer types: Full, Single, Multi, Subset; probes and uncertainty: see About)",
        "列（题型：Full 全部、Single 单选、Multi 多选、Subset 子集；探针与不确定性见“说明”）",
        "欄（題型：Full 全部、Single 單選、Multi 多選、Subset 子集；探針與不確定性見「說明」）",
    ),
    "board_sort": ("Sort by", "排序依据", "排序依據"),
    "board_descending": ("Descending", "降序", "降序"),
    # Plots
    "plots_figure2": (
        "Figure 2: Full accuracy against parameters",
        "图 2：Full 正确率与参数量",
        "圖 2：Full 正確率與參數量",
    ),
    "plots_subset": (
        "Subset accuracy (the practitioners' reference included)",
        "子集正确率（含中医师参照）",
        "子集正確率（含中醫師參照）",
    ),
    "plots_subset_axis": ("Subset exact match (%)", "子集完全匹配（%）", "子集完全匹配（%）"),
    # Compare
    "compare_a": ("Model A", "模型 A", "模型 A"),
    "compare_b": ("Model B", "模型 B", "模型 B"),
    "compare_which": ("Items listed", "列出的试题", "列出的試題"),
    "compare_either": ("one is right, the other wrong", "一个对、一个错", "一個對、一個錯"),
    "compare_a_right": ("A right, B wrong", "A 对、B 错", "A 對、B 錯"),
    "compare_b_right": ("B right, A wrong", "B 对、A 错", "B 對、A 錯"),
    "compare_page": ("Page of differing items", "差异试题页码", "差異試題頁碼"),
    "compare_run": ("Compare", "对比", "對比"),
    "compare_outcomes": ("Outcomes (items)", "结果（题数）", "結果（題數）"),
    "compare_types": ("Exact match by answer type (%)", "按题型的完全匹配（%）", "按題型的完全匹配（%）"),
    "compare_domains": ("Exact match by domain (%)", "按领域的完全匹配（%）", "按領域的完全匹配（%）"),
    "compare_items": ("Items where they differ", "两者不同的试题", "兩者不同的試題"),
    # Model
    "model_select": ("Model", "模型", "模型"),
    "model_show": ("Show", "显示", "顯示"),
    "model_domains": ("By domain (subset items)", "按领域（子集试题）", "按領域（子集試題）"),
    "model_domain_plot": ("By domain", "按领域", "按領域"),
    "model_difficulty": ("By practitioner-rated difficulty", "按中医师评定难度", "按中醫師評定難度"),
    "model_difficulty_plot": ("By difficulty", "按难度", "按難度"),
    "model_consensus": ("By practitioner consensus", "按中医师一致程度", "按中醫師一致程度"),
    "model_consensus_plot": ("By consensus", "按一致程度", "按一致程度"),
    "model_calibration": ("Calibration", "校准", "校準"),
    "model_probes": ("Probes", "探针", "探針"),
    # Submit
    "submit_hint_hosted": (
        "Sign in with Hugging Face, then enter a model id and optionally a revision (branch, tag or sha).",
        "用 Hugging Face 账号登录，然后填写模型 id，可选填版本（分支、标签或 sha）。",
        "用 Hugging Face 帳號登入，然後填寫模型 id，可選填版本（分支、標籤或 sha）。",
    ),
    "submit_hint_local": (
        "Local mode: no sign-in; a Hub model id or a local model folder (safetensors) is accepted.",
        "本地模式：无需登录；可填写 Hub 模型 id 或本地模型文件夹（safetensors）。",
        "本地模式：無需登入；可填寫 Hub 模型 id 或本地模型資料夾（safetensors）。",
    ),
    "submit_model": ("Model id", "模型 id", "模型 id"),
    "submit_revision": ("Revision (optional)", "版本（可选）", "版本（可選）"),
    "submit_released": (
        "Release date (optional, YYYY-MM-DD)",
        "发布日期（可选，YYYY-MM-DD）",
        "發布日期（可選，YYYY-MM-DD）",
    ),
    "submit_released_hint": ("the Hub repo's creation date", "Hub 仓库的创建日期", "Hub 倉庫的建立日期"),
    "submit_released_info": (
        "'Fresh after release' scores the hidden items accepted after it",
        "“发布后新题”只计该日期之后收录的隐藏试题",
        "「發布後新題」只計該日期之後收錄的隱藏試題",
    ),
    "submit_kind": ("Evaluation", "评测方式", "評測方式"),
    "submit_kind_eval": ("Full evaluation", "完整评测", "完整評測"),
    "submit_kind_quick": ("Quick estimate", "快速估计", "快速估計"),
    "submit_kind_info": (
        "Quick estimate: a few hundred anchor items only, Full estimated with its measured error (shown apart on the "
        "board, never ranked); upgrade it to a full run later",
        "快速估计：只评测几百道锚定试题，给出 Full 的估计及其实测误差（在榜单上单独显示，不参与排名）；"
        "之后可升级为完整评测",
        "快速估計：只評測幾百道錨定試題，給出 Full 的估計及其實測誤差（在榜單上單獨顯示，不參與排名）；"
        "之後可升級為完整評測",
    ),
    "upgrade_button": ("Upgrade to a full run", "升级为完整评测", "升級為完整評測"),
    "submit_button": ("Submit for evaluation", "提交评测", "提交評測"),
    "job_id": ("Job id", "任务 id", "任務 id"),
    "show_log": ("Show log", "查看日志", "查看日誌"),
    "harness_log": ("Harness log (end)", "评测日志（末尾）", "評測日誌（末尾）"),
    # Queue
    "queue_table": ("Evaluation requests", "评测请求", "評測請求"),
    "admin_actions": (
        "Admin actions (accounts in TCMQA_ADMINS)",
        "管理员操作（TCMQA_ADMINS 中的账号）",
        "管理員操作（TCMQA_ADMINS 中的帳號）",
    ),
    "admin_account": ("Your account (local mode)", "你的账号（本地模式）", "你的帳號（本地模式）"),
    "admin_key": ("The operator's token", "运维令牌", "運維權杖"),
    "reason": ("Reason (recorded with your account)", "原因（与你的账号一并记录）", "原因（與你的帳號一併記錄）"),
    "admin_cancel": ("Cancel (PENDING or RUNNING)", "取消（PENDING 或 RUNNING）", "取消（PENDING 或 RUNNING）"),
    "admin_requeue": ("Re-queue (FAILED)", "重新排队（FAILED）", "重新排隊（FAILED）"),
    "admin_withdraw": ("Withdraw the published row", "撤回已发布的行", "撤回已發布的列"),
}

I18N = gr.I18n(**{locale: {key: texts[i] for key, texts in STRINGS.items()} for i, locale in enumerate(LOCALES)})


def pick(tag: str | None) -> str | None:
    """The locale a language tag means (``zh-HK`` -> ``zh-TW``, ``en-GB`` -> ``en``), or None."""
    parts = (tag or "").strip().lower().replace("_", "-").split("-")
    for n in range(len(parts), 0, -1):
        found = ALIASES.get("-".join(parts[:n]))
        if found:
            return found
    return None


def choose(lang: str | None, accept_language: str | None) -> str:
    """The page's locale: ``?lang=`` first, then the browser's languages in their order of preference."""
    if found := pick(lang):
        return found
    ranked = []
    for n, entry in enumerate((accept_language or "").split(",")):
        tag, _, q = entry.partition(";q=")
        try:
            weight = float(q) if q else 1.0
        except ValueError:
            weight = 0.0
        ranked.append((-weight, n, tag))
    for _, _, tag in sorted(ranked):
        if found := pick(tag):
            return found
    return DEFAULT


def current() -> str:
    """The locale of the call gradio is serving (the default outside one, e.g. a test calling a function)."""
    request = LocalContext.request.get(None)
    if request is None:
        return DEFAULT
    return choose(request.query_params.get("lang"), request.headers.get("accept-language"))


def t(key: str) -> Any:
    """A component's text, translated in the browser (an unknown key fails when the app is built)."""
    if key not in STRINGS:
        raise KeyError(f"no text {key!r} in tcmqa.leaderboard.lang.STRINGS: add it in the three languages")
    return I18N(key)


def text(key: str, locale: str | None = None, **values: Any) -> str:
    """A handler's text in the caller's language (or ``locale``), with ``values`` filled in."""
    texts = STRINGS[key]
    return texts[LOCALES.index(locale or current())].format(**values)


def domain(key: str, locale: str | None = None) -> str:
    """A domain's name in the caller's language (or ``locale``); an unknown key is shown as it is."""
    names = DOMAIN_NAMES.get(key)
    return names[locale or current()] if names else key


# on page load: the locale the address or the browser asks for (the rule of :func:`pick`, as data), applied
# through gradio's own ``changeLocale`` (the module the page already loaded) and shown in the selector
LOCALE_JS = """() => {
  const aliases = ALIASES;
  const pick = (tag) => {
    const parts = (tag || "").trim().toLowerCase().replace(/_/g, "-").split("-");
    for (let n = parts.length; n > 0; n--) {
      const found = aliases[parts.slice(0, n).join("-")];
      if (found) return found;
    }
    return null;
  };
  const asked = new URLSearchParams(location.search).get("lang");
  const locale = pick(asked) || [...(navigator.languages || []), navigator.language].map(pick).find(Boolean) || DEFAULT;
  const core = performance.getEntriesByType("resource").map((e) => e.name)
    .find((name) => /\\/assets\\/core-[^/]+\\.js$/.test(name));
  if (core) import(core).then((m) => m.changeLocale(locale));
  return locale;
}""".replace("ALIASES", json.dumps(ALIASES)).replace("DEFAULT", json.dumps(DEFAULT))
# the selector: the same page in the chosen language (reloaded, so that handlers render in it too)
SWITCH_JS = """(locale) => {
  const url = new URL(location.href);
  url.searchParams.set("lang", locale);
  location.href = url.toString();
}"""
LAUNCH: dict[str, Any] = {"i18n": I18N}  # what every ``launch`` of the Space passes


def language_selector(demo: gr.Blocks) -> gr.Radio:
    """The header's language switch: set at load from the address or the browser, a choice reloads in it.
    Call :func:`tab_labels` once every tab is built."""
    selector = gr.Radio(
        [(LANGUAGE_NAMES[locale], locale) for locale in LOCALES],
        label=t("language"),
        elem_id="language",
        container=False,
        scale=0,
        min_width=320,
    )
    demo.load(None, None, selector, js=LOCALE_JS)
    selector.input(None, selector, None, js=SWITCH_JS)
    return selector


def tab_labels(demo: gr.Blocks, public: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    """The tabs' names in the page's language at load. Gradio draws a tab's button once, in the locale the
    browser's own language gave, and the page's later switch (:data:`LOCALE_JS`) does not redraw it; so every
    tab whose ``elem_id`` is ``tab-NAME`` is sent its name (``tab_NAME``) again, rendered in the caller's language.
    ``public``: the guard's declaration of a view anyone may call."""
    tabs = [b for b in demo.blocks.values() if isinstance(b, gr.Tab) and (b.elem_id or "").startswith("tab-")]
    keys = [str(tab.elem_id).replace("-", "_") for tab in tabs]
    for key in keys:
        t(key)  # an unknown tab fails at build

    @public
    def tab_names() -> list[Any]:
        return [gr.Tab(label=text(key)) for key in keys]

    demo.load(tab_names, None, tabs, api_name=False, show_progress="hidden")
