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
import pandas as pd
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
    "any": ("any", "不限", "不限"),
    "single_answer": ("single-answer", "单选题", "單選題"),
    "multi_answer": ("multi-answer", "多选题", "多選題"),
    "domain_unrated": ("unrated", "未分类", "未分類"),  # an item no practitioner gave a domain
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
    # empty states (tcmqa.leaderboard.empty): why a part is empty and what to do
    "empty_subset_grows": (
        "the subset grows as practitioners answer (Practitioners tab)",
        "子集随中医师作答而扩大（见“中医师作答”页）",
        "子集隨中醫師作答而擴大（見「中醫師作答」頁）",
    ),
    "empty_subset_none": (
        "the practitioners' subset is empty so far, so there is nothing to set it beside yet",
        "中医师子集目前为空，暂时无可对照",
        "中醫師子集目前為空，暫時無可對照",
    ),
    "empty_subset_not_in": (
        "this model's items are not in the practitioners' subset ({size} items so far), so there is nothing to set "
        "it beside yet",
        "该模型的试题不在中医师子集中（子集目前 {size} 题），暂时无可对照",
        "該模型的試題不在中醫師子集中（子集目前 {size} 題），暫時無可對照",
    ),
    "empty_model_page": (
        "**{model}**: {n} items scored; {why}: {grows}. Its Full accuracy is on the Board; Compare sets it beside "
        "another model item by item.",
        "**{model}**：已评分 {n} 题；{why}：{grows}。其 Full 正确率见排行榜；“模型对比”可逐题与另一模型对照。",
        "**{model}**：已評分 {n} 題；{why}：{grows}。其 Full 正確率見排行榜；「模型對比」可逐題與另一模型對照。",
    ),
    "empty_facts": (
        "No {what} values for **{model}**: its results row records none (they come from the letter log-probs and "
        "the probe passes of a full run).",
        "**{model}** 没有{what}数值：其结果行未记录（这些数值来自完整评测的字母对数概率与探针轮次）。",
        "**{model}** 沒有{what}數值：其結果列未記錄（這些數值來自完整評測的字母對數機率與探針輪次）。",
    ),
    "empty_calibration": ("calibration", "校准", "校準"),
    "empty_probe": ("probe", "探针", "探針"),
    "empty_or": (" or ", "或", "或"),
    "empty_blank_subset": (
        "Subset and Δ human are blank for {rows}: none of the items it was scored on is in the practitioners' "
        "subset yet; {grows}, and the cells fill in once it holds one of them.",
        "{rows} 的 Subset 与 Δ human 为空：其评分的试题尚无一题在中医师子集中；{grows}，子集含其试题后即会填上。",
        "{rows} 的 Subset 與 Δ human 為空：其評分的試題尚無一題在中醫師子集中；{grows}，子集含其試題後即會填上。",
    ),
    "empty_no_responses": (
        "**Practitioners' answers**: none yet. This item is not in the practitioners' subset; {grows}.",
        "**中医师作答**：暂无。此题不在中医师子集中；{grows}。",
        "**中醫師作答**：暫無。此題不在中醫師子集中；{grows}。",
    ),
    "empty_no_outputs": (
        "**Models' outputs**: none yet. No model has per-item outputs here; submit one (Submit tab).",
        "**模型输出**：暂无。此处尚无模型的逐题输出；请在“提交模型”页提交。",
        "**模型輸出**：暫無。此處尚無模型的逐題輸出；請在「提交模型」頁提交。",
    ),
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
    "queue_col_job": ("Job", "任务", "任務"),
    "queue_col_model": ("Model", "模型", "模型"),
    "queue_col_status": ("Status", "状态", "狀態"),
    "queue_col_progress": ("Progress", "进度", "進度"),
    "queue_col_submitted": ("Submitted (UTC)", "提交时间（UTC）", "提交時間（UTC）"),
    "phase_loading": ("Loading the model", "加载模型", "載入模型"),
    "phase_evaluating": ("Evaluating", "评测", "評測"),
    "phase_rotations": ("Rotations", "选项轮换", "選項輪換"),
    "phase_order_test": ("Order test", "选项顺序检验", "選項順序檢驗"),
    "phase_publishing": ("Publishing", "发布", "發布"),
    "progress_claimed": ("claimed", "已领取", "已領取"),
    "progress_done": ("done", "完成", "完成"),
    "progress_estimating": ("estimating…", "估算中…", "估算中…"),
    "progress_minutes_left": ("about {minutes} min left", "约剩 {minutes} 分钟", "約剩 {minutes} 分鐘"),
    "progress_under_a_minute": ("under a minute left", "不到 1 分钟", "不到 1 分鐘"),
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
    # Item explorer
    "explorer_hint": (
        "Search the stems and options, filter, and click a row to open its item. **Consensus**: how many of the "
        "item's practitioners answered it correctly (subset items). **Outcome**: the chosen model against the "
        "practitioners' majority. Items in a practitioner block still being answered show no consensus or "
        "outcome and are left out of those filters.",
        "搜索题干和选项、筛选，点击一行打开该题。**一致程度**：该题的中医师中答对的人数（子集试题）。"
        "**结果**：所选模型与中医师多数意见的对比。仍在作答中的中医师题组里的试题不显示一致程度和结果，也不参与这两项筛选。",
        "搜尋題幹和選項、篩選，點擊一列開啟該題。**一致程度**：該題的中醫師中答對的人數（子集試題）。"
        "**結果**：所選模型與中醫師多數意見的對比。仍在作答中的中醫師題組裡的試題不顯示一致程度和結果，也不參與這兩項篩選。",
    ),
    "explorer_search": ("Search stem and options", "搜索题干和选项", "搜尋題幹和選項"),
    "explorer_search_hint": ("e.g. 肺 or 麻黄", "例如 肺 或 麻黄", "例如 肺 或 麻黃"),
    "explorer_model": ("Model (for the outcome)", "模型（用于结果）", "模型（用於結果）"),
    "explorer_domain": ("Domain", "领域", "領域"),
    "explorer_type": ("Answer type", "题型", "題型"),
    "explorer_rated": ("Rated difficulty (mean)", "评定难度（平均）", "評定難度（平均）"),
    "explorer_easiest": ("1 easiest", "1 最易", "1 最易"),
    "explorer_hardest": ("5 hardest", "5 最难", "5 最難"),
    "explorer_source": ("Source difficulty", "原始难度", "原始難度"),
    "explorer_consensus": ("Consensus", "一致程度", "一致程度"),
    # not the bare word "correct": the open-block tests search the page's config for it
    "explorer_correct": ("answered right", "人答对", "人答對"),
    "explorer_outcome": ("Model vs practitioners", "模型与中医师对比", "模型與中醫師對比"),
    "explorer_previous": ("◀ Previous", "◀ 上一页", "◀ 上一頁"),
    "explorer_page": ("Page", "页码", "頁碼"),
    "explorer_next": ("Next ▶", "下一页 ▶", "下一頁 ▶"),
    "explorer_item": ("Item", "试题", "試題"),
    "explorer_item_id": ("Item id (or click a row above)", "试题 id（或点击上方一行）", "試題 id（或點擊上方一列）"),
    "explorer_models_page": ("Page of models", "模型页码", "模型頁碼"),
    "explorer_show": ("Show item", "显示试题", "顯示試題"),
    "explorer_responses": ("Practitioners' answers", "中医师的答案", "中醫師的答案"),
    "explorer_outputs": (
        "**Models' outputs** (one revision per model: its latest full run; P(A)–P(E): each letter's probability "
        "as the first generated token, renormalised over A–E)",
        "**模型输出**（每个模型一个版本：最近一次完整评测；"
        "P(A)–P(E)：各字母作为第一个生成词元的概率，在 A–E 上重新归一）",
        "**模型輸出**（每個模型一個版本：最近一次完整評測；"
        "P(A)–P(E)：各字母作為第一個生成詞元的機率，在 A–E 上重新歸一）",
    ),
    # Practitioners
    "practice_hint": (
        "Licensed TCM practitioners answer the same items as the models, under the paper's protocol: a fixed "
        "private block of items, one item per screen, the answer, one to three domains, a difficulty from 1 to 5, "
        "and a flag for a defective item. Your answers are stored at once; come back any time to resume. The "
        "reference answers are shown only once your block is complete.",
        "执业中医师在与模型相同的试题上作答，遵循论文的流程：一组固定的专属试题，每屏一题，给出答案、一至三个领域、"
        "1 到 5 的难度，并可标记有误的试题。答案即时保存，随时可以回来继续。整组完成后才显示参考答案。",
        "執業中醫師在與模型相同的試題上作答，遵循論文的流程：一組固定的專屬試題，每屏一題，給出答案、一至三個領域、"
        "1 到 5 的難度，並可標記有誤的試題。答案即時儲存，隨時可以回來繼續。整組完成後才顯示參考答案。",
    ),
    "practice_keys": (
        "Keys: **A–E** choose an answer · **1–5** the difficulty · **F–O** a domain (the letter beside it; again "
        "to untick) · **Enter** submits. In the name field, **Enter** starts.",
        "快捷键：**A–E** 选答案 · **1–5** 难度 · **F–O** 领域（见各领域旁的字母；再按一次取消）· **Enter** 提交。"
        "在姓名栏按 **Enter** 开始。",
        "快速鍵：**A–E** 選答案 · **1–5** 難度 · **F–O** 領域（見各領域旁的字母；再按一次取消）· **Enter** 提交。"
        "在姓名欄按 **Enter** 開始。",
    ),
    "practice_name": (
        "Your name (local mode; Enter starts)",
        "你的姓名（本地模式；按 Enter 开始）",
        "你的姓名（本地模式；按 Enter 開始）",
    ),
    "practice_key": (
        "Your key (this browser keeps it; an admin enters the operator's token)",
        "你的密钥（此浏览器会保存；管理员填写运维令牌）",
        "你的金鑰（此瀏覽器會保存；管理員填寫運維權杖）",
    ),
    "practice_licence": (
        "I hold a TCM practitioner licence (asked once)",
        "我持有中医执业资格证（只问一次）",
        "我持有中醫執業資格證（只問一次）",
    ),
    "practice_licence_number": (
        "Licence number (optional; kept private, never published)",
        "执业证号（可选；保密，不会公开）",
        "執業證號（可選；保密，不會公開）",
    ),
    "practice_start": ("Start / resume my block", "开始 / 继续我的题组", "開始 / 繼續我的題組"),
    "practice_header": (
        "Block {block} · item {position} of {size} · {kind}",
        "第 {block} 组 · 第 {position} 题，共 {size} 题 · {kind}",
        "第 {block} 組 · 第 {position} 題，共 {size} 題 · {kind}",
    ),
    "practice_answered": ("{n} answered", "已答 {n} 题", "已答 {n} 題"),
    "practice_answer_one": ("Answer (one letter)", "答案（一个字母）", "答案（一個字母）"),
    "practice_answer_many": ("Answer (two or more letters)", "答案（两个或以上字母）", "答案（兩個或以上字母）"),
    "practice_domains": ("Domains (one to three)", "领域（一至三个）", "領域（一至三個）"),
    "practice_difficulty": (
        "Difficulty for you (1 easiest, 5 hardest)",
        "对你而言的难度（1 最易，5 最难）",
        "對你而言的難度（1 最易，5 最難）",
    ),
    "practice_flag": (
        "Flag this item as incorrect (optional)",
        "问题报错：标记本题有误（可选）",
        "問題報錯：標記本題有誤（可選）",
    ),
    "practice_comment": ("Comment (optional)", "备注（可选）", "備註（可選）"),
    "practice_pause": ("Pause", "暂停一下", "暫停一下"),
    "practice_resume": ("Resume (paused)", "继续（已暂停）", "繼續（已暫停）"),
    "practice_paused": (
        "**Paused.** The item is hidden and this time is recorded as paused: press **Resume** to go on.",
        "**已暂停。** 试题已隐藏，这段时间记为暂停：按 **继续** 接着作答。",
        "**已暫停。** 試題已隱藏，這段時間記為暫停：按 **繼續** 接著作答。",
    ),
    "practice_submit": ("Submit and next", "提交并下一题", "提交並下一題"),
    "practice_next": ("Start another block", "开始下一组", "開始下一組"),
    "practice_missing": (
        "⚠️ Still needed before this item can be recorded: {missing}.",
        "⚠️ 记录本题之前还需要：{missing}。",
        "⚠️ 記錄本題之前還需要：{missing}。",
    ),
    "practice_missing_answer": ("your **answer** (A–E)", "你的**答案**（A–E）", "你的**答案**（A–E）"),
    "practice_missing_difficulty": (
        "a **difficulty** from 1 to 5",
        "1 到 5 的**难度**",
        "1 到 5 的**難度**",
    ),
    "practice_missing_domain": ("at least one **domain**", "至少一个**领域**", "至少一個**領域**"),
    "list_separator": ("; ", "；", "；"),
    "practice_next_mine": (  # {s}: the English plural
        "Your next block would complete **{n} subset item{s}** (items the study left short of raters).",
        "你的下一组将补足 **{n} 道子集试题**（研究中作答人数不足的试题）。",
        "你的下一組將補足 **{n} 道子集試題**（研究中作答人數不足的試題）。",
    ),
    "practice_next_any": (
        "The next block would complete **{n} subset item{s}** (items the study left short of raters).",
        "下一组将补足 **{n} 道子集试题**（研究中作答人数不足的试题）。",
        "下一組將補足 **{n} 道子集試題**（研究中作答人數不足的試題）。",
    ),
    "practice_recorded": ("✅ Recorded.", "✅ 已记录。", "✅ 已記錄。"),
    "practice_signed_in": ("Signed in as **{who}**.", "已登录：**{who}**。", "已登入：**{who}**。"),
    "practice_welcome_back": (
        "Welcome back, **{who}**: your block resumes where you left it.",
        "欢迎回来，**{who}**：从你上次离开的地方继续。",
        "歡迎回來，**{who}**：從你上次離開的地方繼續。",
    ),
}

I18N = gr.I18n(
    **{
        locale: {
            **{key: texts[i] for key, texts in STRINGS.items()},
            **{f"domain_{key}": names[locale] for key, names in DOMAIN_NAMES.items()},
        }
        for i, locale in enumerate(LOCALES)
    }
)


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
    """A domain's name in the caller's language (or ``locale``); ``unrated`` too; an unknown key as it is."""
    if key in DOMAIN_NAMES:
        return DOMAIN_NAMES[key][locale or current()]
    return text(f"domain_{key}", locale) if f"domain_{key}" in STRINGS else key


def domain_names(frame: pd.DataFrame, column: str = "domain") -> pd.DataFrame:
    """A table for the page with its ``column`` of domain keys shown as their names (the caller's language)."""
    if column not in frame.columns:
        return frame
    return frame.assign(**{column: frame[column].map(lambda key: domain(str(key)))})


def domain_label(key: str) -> Any:
    """A domain's name for a component (a choice), translated in the browser."""
    if key not in DOMAIN_NAMES:
        raise KeyError(f"no domain {key!r} in tcmqa.schema.DOMAIN_NAMES")
    return I18N(f"domain_{key}")


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
        min_width=420,  # the three names on one line beside the title
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
