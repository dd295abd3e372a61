"""`RuntimeEndpoint`: the backend for a server that speaks the SGLang-native HTTP API.

It works with sglr-server and with SGLang servers. Every generation is a `POST /generate`; the
fork hint and the run_batch prefix hint are `/generate` calls with `max_new_tokens: 0` (prefill
only, so the prefix lands in the server's radix cache); `select` scores each choice with input
logprobs (see `select`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

from sglr.errors import BackendError
from sglr.lang.backend.base import BaseBackend
from sglr.lang.backend.native_stream import StreamDecoder
from sglr.lang.backend.request_params import (
    adapter_fields,
    native_request_fields,
    native_sampling_params,
    run_adapter,
)
from sglr.lang.chat_template import choose_chat_template
from sglr.lang.choices import ChoicesDecision, ChoicesSamplingMethod, decide
from sglr.lang.gen_params import GenParams

_FLUSH_WAIT_S = 10  # how long /flush_cache may wait for the server to become idle


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()
    if isinstance(body, dict) and "error" in body:
        error = body["error"]
        return error.get("message", json.dumps(error)) if isinstance(error, dict) else str(error)
    return json.dumps(body)


class RuntimeEndpoint(BaseBackend):
    support_concate_and_append = False  # the native API has no KV-join route; joins re-send text

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        verify: Any = None,
        chat_template_name: str | None = None,
        *,
        timeout: float | None = 600.0,
    ) -> None:
        super().__init__()
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        headers = {"Content-Type": "application/json; charset=utf-8"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self._client = httpx.Client(
            headers=headers, verify=True if verify is None else verify, timeout=timeout
        )
        self.model_info = self._get("/get_model_info", fallback="/model_info")
        self.chat_template = choose_chat_template(
            model_path=self.model_info.get("model_path"), name=chat_template_name
        )

    # --- HTTP ------------------------------------------------------------------------------------
    def _request(self, method: str, path: str, body: Any = None) -> httpx.Response:
        try:
            response = self._client.request(method, self.base_url + path, json=body)
        except httpx.HTTPError as exc:
            raise BackendError(f"{method} {self.base_url}{path} failed: {exc}") from exc
        return response

    def _get(self, path: str, fallback: str | None = None) -> Any:
        response = self._request("GET", path)
        if response.status_code == 404 and fallback is not None:
            response = self._request("GET", fallback)
        return self._json(response, path)

    def _post(self, body: dict[str, Any], path: str = "/generate") -> Any:
        return self._json(self._request("POST", path, body), path)

    def _json(self, response: httpx.Response, path: str) -> Any:
        if response.status_code != 200:
            raise BackendError(f"{path} returned HTTP {response.status_code}: {_error_text(response)}")
        try:
            return response.json()
        except ValueError as exc:
            raise BackendError(f"{path} returned a body that is not JSON: {response.text[:200]!r}") from exc

    # --- protocol --------------------------------------------------------------------------------
    def get_model_name(self) -> str:
        return self.model_info.get("model_path", "")

    def flush_cache(self) -> bool:
        # The server refuses to flush while requests run; the ones this client just stopped
        # reading (closed streams) are aborted only when the server notices, a moment later.
        response = self._request("POST", f"/flush_cache?timeout={_FLUSH_WAIT_S}")
        if response.status_code != 200:
            raise BackendError(f"/flush_cache returned HTTP {response.status_code}: {_error_text(response)}")
        return True

    def get_server_info(self) -> dict:
        return self._get("/server_info", fallback="/get_server_info")

    def _image_data(self, s: Any, num_prompts: int | None = None) -> dict[str, Any]:
        """SGLang's `image_data` for the prompt's images: one prompt, or `num_prompts` that all
        start with this prompt (a batch takes one list per prompt)."""
        if not s.images_:
            return self._video_data(s, num_prompts)
        images: str | list[str] = [b64 for _, b64 in s.images_]
        if len(images) == 1:
            images = images[0]  # one image as a bare string, as SGLang's client sends it
        image_data = images if num_prompts is None else [images] * num_prompts
        return {"image_data": image_data, **self._video_data(s, num_prompts)}

    def _video_data(self, s: Any, num_prompts: int | None = None) -> dict[str, Any]:
        """`video_data`: the prompt's videos, each its list of base64 frames."""
        if not s.videos_:
            return {}
        videos = [frames for _, frames in s.videos_]
        return {"video_data": videos if num_prompts is None else [videos] * num_prompts}

    def _prefill(self, text: str, s: Any = None, lora_path: str | None = None) -> dict:
        body = {"text": text, "sampling_params": {"max_new_tokens": 0}, **adapter_fields(lora_path)}
        if s is not None:
            body.update(self._image_data(s), **adapter_fields(run_adapter(s)))
        return self._post(body)

    def cache_prefix(self, prefix_str: str, lora_path: str | None = None) -> None:
        self._prefill(prefix_str, lora_path=lora_path)

    def commit_lazy_operations(self, s: Any) -> None:
        self._prefill(s.text_, s)

    def _generate_body(self, s: Any, sampling_params: GenParams) -> dict[str, Any]:
        return {
            "text": s.text_,
            "sampling_params": native_sampling_params(sampling_params),
            **native_request_fields(sampling_params),
            **self._image_data(s),
        }

    def generate(self, s: Any, sampling_params: GenParams) -> tuple[str | list[str], dict | list]:
        result = self._post(self._generate_body(s, sampling_params))
        if isinstance(result, list):  # n > 1 fans out into a batch
            return [item["text"] for item in result], [item.get("meta_info", {}) for item in result]
        return result["text"], result.get("meta_info", {})

    def generate_stream(self, s: Any, sampling_params: GenParams) -> Iterator[tuple[str, dict]]:
        body = {**self._generate_body(s, sampling_params), "stream": True}
        decoder = StreamDecoder()
        try:
            with self._client.stream("POST", self.base_url + "/generate", json=body) as response:
                if response.status_code != 200:
                    response.read()
                    raise BackendError(
                        f"/generate returned HTTP {response.status_code}: {_error_text(response)}"
                    )
                for line in response.iter_lines():
                    piece = decoder.feed_line(line)
                    if decoder.done:
                        break
                    if piece is not None:
                        yield piece
        except httpx.HTTPError as exc:
            raise BackendError(f"streaming /generate failed: {exc}") from exc

    def select(
        self, s: Any, choices: Sequence[str], temperature: float, choices_method: ChoicesSamplingMethod
    ) -> ChoicesDecision:
        """Scores each choice with the server's input logprobs.

        1. Prefill the prompt (`max_new_tokens: 0`) to cache it and learn its length P.
        2. One batch request over `prompt + choice` with `logprob_start_len = P - 1`: entry 0
           is the last prompt token (logprob null on current servers, absent on old ones); the
           non-null entries are exactly the choice's tokens.
        3. For the unconditional method, the choice tokens alone (`input_ids`), without prompt.
        """
        if temperature > 1e-5:
            raise ValueError("select over RuntimeEndpoint is greedy: temperature must be 0")
        prompt_len = self._prefill(s.text_, s)["meta_info"]["prompt_tokens"]
        scored = self._post(
            {
                "text": [s.text_ + choice for choice in choices],
                "sampling_params": {"max_new_tokens": 0, "temperature": 0},
                "return_logprob": True,
                "return_text_in_logprobs": True,
                "logprob_start_len": max(prompt_len - 1, 0),
                **self._image_data(s, len(choices)),
                **adapter_fields(run_adapter(s)),
            }
        )
        if not isinstance(scored, list) or len(scored) != len(choices):
            raise BackendError(f"select expected {len(choices)} results from /generate, got {scored!r:.200}")
        input_logprobs = [item["meta_info"]["input_token_logprobs"] for item in scored]
        output_logprobs = [item["meta_info"].get("output_token_logprobs", []) for item in scored]
        unconditional = None
        if choices_method.requires_unconditional_logprobs:
            choice_ids = [
                [entry[1] for entry in entries if entry[0] is not None] for entries in input_logprobs
            ]
            result = self._post(
                {
                    "input_ids": choice_ids,
                    "sampling_params": {"max_new_tokens": 0},
                    "return_logprob": True,
                    "logprob_start_len": 0,
                    **adapter_fields(run_adapter(s)),
                }
            )
            unconditional = [item["meta_info"]["input_token_logprobs"] for item in result]
        return decide(choices, input_logprobs, choices_method, output_logprobs, unconditional)

    def shutdown(self) -> None:
        self._client.close()
