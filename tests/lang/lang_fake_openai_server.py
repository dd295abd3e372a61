"""A fake OpenAI-compatible server (Starlette) whose "model" is scripted, with logprobs from the
fake char LM. Records every request body."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from lang_fake_lm import char_logprob, log_softmax
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


def _cut(text: str, max_tokens: int | None, stop: Any) -> tuple[str, str]:
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    hits = [text.index(s) for s in stops if s and s in text]
    if hits and (max_tokens is None or min(hits) <= max_tokens):
        return text[: min(hits)], "stop"
    if max_tokens is not None and len(text) > max_tokens:
        return text[:max_tokens], "length"
    return text, "stop"


def _biased_token(prev: str, logit_bias: dict[str, float]) -> str:
    bias = {chr(int(token_id)): value for token_id, value in logit_bias.items()}
    dist = log_softmax(prev or "\x01", bias)
    return max(dist, key=dist.get)


class FakeOpenAIServer:
    def __init__(
        self,
        complete: Callable[[str], str] | None = None,
        chat: Callable[[list[dict]], str] | None = None,
        chat_top_logprobs: Callable[[list[dict]], list[tuple[str, float]]] | None = None,
    ) -> None:
        """`chat_top_logprobs(messages)` scripts the top first tokens of a chat reply; without
        it they come from the fake char LM."""
        self.complete = complete or (lambda prompt: " completion")
        self.chat = chat or (lambda messages: "chat reply")
        self.chat_top_logprobs = chat_top_logprobs
        self.requests: list[dict[str, Any]] = []

    def app(self) -> Starlette:
        return Starlette(
            routes=[
                Route("/v1/completions", self.completions, methods=["POST"]),
                Route("/v1/chat/completions", self.chat_completions, methods=["POST"]),
            ]
        )

    def bodies(self, path: str) -> list[dict]:
        return [r["body"] for r in self.requests if r["path"] == path]

    async def completions(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append({"path": "/v1/completions", "body": body})
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        choices, prompt_tokens, completion_tokens = [], 0, 0
        for index, prompt in enumerate(prompts):
            if body.get("logit_bias"):
                raw = _biased_token(prompt[-1:], body["logit_bias"])
            else:
                raw = self.complete(prompt)
            out, finish = _cut(raw, body.get("max_tokens", 16), body.get("stop"))
            text = prompt + out if body.get("echo") else out
            logprobs = None
            if body.get("logprobs") is not None:
                base = 0 if body.get("echo") else len(prompt)
                full = prompt + out
                values = [None if k == 0 else char_logprob(full[k - 1], full[k]) for k in range(len(full))]
                logprobs = {
                    "tokens": list(text),
                    "token_logprobs": values[len(full) - len(text) :],
                    "text_offset": list(range(base, base + len(text))),
                    "top_logprobs": None,
                }
            choices.append({"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish})
            prompt_tokens += len(prompt)
            completion_tokens += len(out)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        head = {"id": f"cmpl-{len(self.requests)}", "created": int(time.time()), "model": body["model"]}
        if body.get("stream"):
            return self._stream({**head, "object": "text_completion"}, choices[0]["text"], usage, chat=False)
        return JSONResponse({**head, "object": "text_completion", "choices": choices, "usage": usage})

    async def chat_completions(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append({"path": "/v1/chat/completions", "body": body})
        messages = body["messages"]
        prev = (messages[-1]["content"] or " ")[-1] if messages else ""
        bias = {chr(int(k)): v for k, v in (body.get("logit_bias") or {}).items()}
        raw = _biased_token(prev, body["logit_bias"]) if bias else self.chat(messages)
        out, finish = _cut(raw, body.get("max_tokens"), body.get("stop"))
        logprobs = None
        if body.get("logprobs"):
            if self.chat_top_logprobs is not None:
                top = self.chat_top_logprobs(messages)
                out, dist = top[0][0], dict(top)
            else:
                dist = log_softmax(prev or "\x01", bias)
                top = sorted(dist.items(), key=lambda item: -item[1])[: body.get("top_logprobs", 0)]
            first = out[:1] if self.chat_top_logprobs is None else out
            first = first or " "
            logprobs = {
                "content": [
                    {
                        "token": first,
                        "logprob": dist[first],
                        "bytes": None,
                        "top_logprobs": [{"token": t, "logprob": v, "bytes": None} for t, v in top],
                    }
                ]
            }
        prompt_tokens = sum(len(m["content"] or "") for m in messages)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(out),
            "total_tokens": prompt_tokens + len(out),
        }
        head = {"id": f"chatcmpl-{len(self.requests)}", "created": int(time.time()), "model": body["model"]}
        if body.get("stream"):
            return self._stream({**head, "object": "chat.completion.chunk"}, out, usage, chat=True)
        choice = {
            "index": 0,
            "message": {"role": "assistant", "content": out},
            "logprobs": logprobs,
            "finish_reason": finish,
        }
        return JSONResponse({**head, "object": "chat.completion", "choices": [choice], "usage": usage})

    def _stream(self, head: dict, text: str, usage: dict, chat: bool) -> StreamingResponse:
        def piece(delta: str, finish: str | None) -> dict:
            if chat:
                return {"index": 0, "delta": {"content": delta}, "logprobs": None, "finish_reason": finish}
            return {"index": 0, "text": delta, "logprobs": None, "finish_reason": finish}

        async def events():
            for char in text:
                yield f"data: {json.dumps({**head, 'choices': [piece(char, None)]})}\n\n"
            yield f"data: {json.dumps({**head, 'choices': [piece('', 'stop')]})}\n\n"
            yield f"data: {json.dumps({**head, 'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")
