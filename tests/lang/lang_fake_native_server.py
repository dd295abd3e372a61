"""A fake SGLang-native server (Starlette): records requests and answers from the fake char LM."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from lang_fake_lm import BOS_ID, char_logprob, encode
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

SAMPLING_KEYS = {
    "max_new_tokens", "min_new_tokens", "n", "stop", "stop_token_ids", "stop_regex", "temperature",
    "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty",
    "ignore_eos", "regex", "json_schema", "ebnf", "skip_special_tokens",
    "spaces_between_special_tokens", "no_stop_trim",
}  # fmt: skip


def _prev_char(token_id: int) -> str:
    return "" if token_id == BOS_ID else chr(token_id)


class FakeNativeServer:
    def __init__(
        self,
        reply: Callable[[str, dict], str] | None = None,
        *,
        model_path: str = "meta-llama/Meta-Llama-3-8B-Instruct",
        incremental: bool = False,
        api_key: str | None = None,
        legacy_routes: bool = False,
    ) -> None:
        self.reply = reply or (lambda prompt, sp: "fake reply")
        self.model_path = model_path
        self.incremental = incremental
        self.api_key = api_key
        self.legacy_routes = legacy_routes
        self.requests: list[dict[str, Any]] = []

    def generate_bodies(self) -> list[dict]:
        return [r["body"] for r in self.requests if r["path"] == "/generate"]

    def app(self) -> Starlette:
        routes = [
            Route("/get_model_info", self.model_info, methods=["GET"]),
            Route("/generate", self.generate, methods=["POST"]),
            Route("/flush_cache", self.flush_cache, methods=["POST", "GET"]),
            Route("/get_server_info", self.server_info, methods=["GET"]),
            Route("/health_generate", self.health, methods=["GET"]),
        ]
        if not self.legacy_routes:
            routes.append(Route("/server_info", self.server_info, methods=["GET"]))
        return Starlette(routes=routes)

    async def _record(self, request: Request) -> Response | None:
        raw = await request.body()
        body = json.loads(raw) if raw else None
        self.requests.append(
            {
                "path": request.url.path,
                "method": request.method,
                "body": body,
                "headers": dict(request.headers),
            }
        )
        if self.api_key and request.headers.get("authorization") != f"Bearer {self.api_key}":
            return JSONResponse({"error": "Unauthorized"}, status_code=401)
        return None

    async def model_info(self, request: Request) -> Response:
        return await self._record(request) or JSONResponse(
            {"model_path": self.model_path, "tokenizer_path": self.model_path, "is_generation": True}
        )

    async def server_info(self, request: Request) -> Response:
        return await self._record(request) or JSONResponse(
            {"version": "fake-0", "max_total_num_tokens": 4096}
        )

    async def health(self, request: Request) -> Response:
        return PlainTextResponse("ok")

    async def flush_cache(self, request: Request) -> Response:
        return await self._record(request) or PlainTextResponse("Cache flushed.\n")

    def _one(self, ids: list[int], prompt: str, sp: dict, body: dict, index: int) -> dict:
        max_new = sp.get("max_new_tokens", 128)
        out = "" if max_new == 0 else self.reply(prompt, sp)
        finish: dict[str, Any] = {"type": "stop", "matched": None}
        if max_new is not None and len(out) > max_new:
            out, finish = out[:max_new], {"type": "length", "length": max_new}
        stops = [s for s in sp.get("stop") or [] if s and s in out]
        if stops:
            stop = min(stops, key=out.index)
            out, finish = out[: out.index(stop)], {"type": "stop", "matched": stop}
        if max_new == 0:
            finish = {"type": "length", "length": 0}
        meta: dict[str, Any] = {
            "id": f"req-{len(self.requests)}-{index}",
            "finish_reason": finish,
            "prompt_tokens": len(ids),
            "completion_tokens": len(out),
            "cached_tokens": 0,
        }
        if body.get("return_logprob"):
            with_text = body.get("return_text_in_logprobs", False)
            start = body.get("logprob_start_len", -1)
            if start is not None and start >= 0:
                meta["input_token_logprobs"] = [
                    [
                        None if k == start else char_logprob(_prev_char(ids[k - 1]), chr(ids[k])),
                        ids[k],
                        chr(ids[k]) if with_text else None,
                    ]
                    for k in range(start, len(ids))
                ]
            prev = _prev_char(ids[-1])
            output = []
            for char in out:
                output.append([char_logprob(prev, char), ord(char), char if with_text else None])
                prev = char
            meta["output_token_logprobs"] = output
        return {"text": out, "output_ids": encode(out), "meta_info": meta}

    async def generate(self, request: Request) -> Response:
        denied = await self._record(request)
        if denied is not None:
            return denied
        body = self.requests[-1]["body"]
        sp = body.get("sampling_params") or {}
        unknown = sorted(set(sp) - SAMPLING_KEYS)
        if unknown:
            return JSONResponse({"error": f"unknown field `{unknown[0]}`"}, status_code=400)
        if "text" in body:
            texts = body["text"] if isinstance(body["text"], list) else [body["text"]]
            items = [([BOS_ID, *encode(t)], t) for t in texts]
        else:
            id_lists = body["input_ids"] if isinstance(body["input_ids"][0], list) else [body["input_ids"]]
            items = [(ids, "".join(map(chr, ids))) for ids in id_lists]
        if any("FAIL400" in prompt for _, prompt in items):
            return JSONResponse({"error": {"message": "The input is too long for the fake model."}}, 400)
        batch = isinstance(body.get("text", body.get("input_ids")), list) and (
            "text" in body or isinstance(body["input_ids"][0], list)
        )
        if sp.get("n", 1) > 1:
            items, batch = items * sp["n"], True
        results = [self._one(ids, prompt, sp, body, i) for i, (ids, prompt) in enumerate(items)]
        if body.get("stream"):
            return StreamingResponse(self._events(results[0]), media_type="text/event-stream")
        return JSONResponse(results if batch else results[0])

    async def _events(self, result: dict):
        text, meta = result["text"], result["meta_info"]
        for k in range(1, len(text) + 1):
            event_meta = dict(
                meta, completion_tokens=k, finish_reason=None if k < len(text) else meta["finish_reason"]
            )
            if "output_token_logprobs" in meta:
                lps = meta["output_token_logprobs"]
                event_meta["output_token_logprobs"] = lps[k - 1 : k] if self.incremental else lps[:k]
            if self.incremental:
                event = {"text": text[k - 1], "output_ids": encode(text[k - 1]), "meta_info": event_meta}
            else:
                event = {"text": text[:k], "output_ids": encode(text[:k]), "meta_info": event_meta}
            yield f"data: {json.dumps(event)}\n\n"
            await asyncio.sleep(0)
        yield "data: [DONE]\n\n"
