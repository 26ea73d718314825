"""The running Space as a client without a browser reaches it: its public config, and any registered function
called by its index through ``/gradio_api/queue/join`` (the browser's own route, whatever the function's
``api_name``, the ``api_name=False`` ones too). What the leak tests call every function through."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx

I18N = "__i18n__"


class Page:
    """The app as anyone reaches it: its public config, and any function called by index over HTTP."""

    def __init__(self, url: str):
        self.url = url
        self.http = httpx.Client(base_url=url, timeout=60)
        self.config = self.http.get("config").json()
        self.components = {c["id"]: c for c in self.config["components"]}

    def call(self, fn_index: int, data: list[Any]) -> dict[str, Any]:
        """``fn_index`` run with ``data`` through the queue, as the browser's client does: the completion message."""
        session = uuid.uuid4().hex
        body = {"data": data, "fn_index": fn_index, "session_hash": session, "event_data": None, "trigger_id": None}
        joined = self.http.post("gradio_api/queue/join", json=body)
        if joined.status_code != 200:
            return {"success": False, "refused_at_join": joined.text}
        with self.http.stream("GET", "gradio_api/queue/data", params={"session_hash": session}) as stream:
            for line in stream.iter_lines():
                if line.startswith("data:"):
                    message = json.loads(line[5:])
                    if message.get("msg") == "process_completed":
                        return message
        raise AssertionError(f"no completion for fn {fn_index}")

    def fn(self, api_name: str) -> dict[str, Any]:
        return next(d for d in self.config["dependencies"] if d.get("api_name") == api_name)

    def elem(self, component_id: int) -> str:
        props = self.components[component_id].get("props", {})
        label = props.get("label") or ""
        if isinstance(label, str) and label.startswith(I18N):  # gr.I18n's label: its translation key, not the wrapper
            meta, end = json.JSONDecoder().raw_decode(label, len(I18N))
            label = f"{meta.get('key', '')}{label[end:]}"
        elif isinstance(label, dict):
            label = label.get("key", "")
        return f"{props.get('elem_id') or ''} {label}".lower()

    def shown(self, dependency: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        """What a call's completion put on the page, by elem_id."""
        outputs = zip(dependency["outputs"], result["output"]["data"], strict=True)
        return {self.components[c].get("props", {}).get("elem_id"): value for c, value in outputs}

    def by_elem(self, dependency: dict[str, Any], values: dict[str, Any]) -> list[Any]:
        """The inputs of ``dependency`` in order: ``values`` by elem_id, else the component's own value."""
        props = [self.components[cid].get("props", {}) for cid in dependency["inputs"]]
        return [values.get(p.get("elem_id"), p.get("value")) for p in props]

    def run(self, api_name: str, values: dict[str, Any]) -> dict[str, Any]:
        """The function named ``api_name`` called with ``values`` by elem_id: its outputs by elem_id (values or
        updates), or AssertionError with the completion message when it failed."""
        dependency = self.fn(api_name)
        done = self.call(dependency["id"], self.by_elem(dependency, values))
        assert done.get("success"), done
        return self.shown(dependency, done)
