"""`GET /v1/models` and `GET /v1/models/{model}`, and what a request's `model` names.

The base model answers to its served name, its path and "default"; each loaded LoRA adapter to
its own name and to `<base name>:<adapter>` (SGLang's syntax). `/v1/models` lists the base and
then one card per adapter (`parent`: the base's served name, `root`: the adapter's directory).
Anything else is a 404 with OpenAI's code `model_not_found`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import Response

from sglr.errors import UnknownModelError
from sglr.http.jsonout import JSONOut
from sglr.server.state import ServerState

if TYPE_CHECKING:
    from sglr.engine.lora_registry import LoraRef


def resolve_model(state: ServerState, model: str) -> LoraRef | None:
    """The LoRA adapter `model` picks (None: the base model); `UnknownModelError` when it
    names neither."""
    if model in state.model_names:
        return None
    adapters = {ref.name: ref for ref in state.lora_adapters()}
    if model in adapters:
        return adapters[model]
    # `base:adapter`, at whichever colon the base's name ends (a served name may hold colons).
    for at, char in enumerate(model):
        if char == ":" and model[:at] in state.model_names:
            adapter = model[at + 1 :]
            if adapter in adapters:
                return adapters[adapter]
            loaded = ", ".join(sorted(adapters)) or "none"
            raise UnknownModelError(
                f"The model `{model}` does not exist: no LoRA adapter `{adapter}` is loaded (loaded: {loaded})",
                "model",
            )
    served = f"`{state.engine.served_model_name}`"
    if adapters:
        served += " and the LoRA adapters " + ", ".join(f"`{name}`" for name in sorted(adapters))
    raise UnknownModelError(f"The model `{model}` does not exist (this server serves {served})", "model")


def _base_card(state: ServerState) -> dict[str, Any]:
    engine = state.engine
    return {
        "id": engine.served_model_name,
        "object": "model",
        "created": int(state.started_at),
        "owned_by": "sglr",
        "root": engine.model_path,
        "parent": None,
        "max_model_len": engine.context_len,
    }


def _adapter_card(state: ServerState, name: str, path: str) -> dict[str, Any]:
    return {**_base_card(state), "id": name, "root": path, "parent": state.engine.served_model_name}


async def list_models(state: ServerState, request: Request) -> Response:
    adapters = [_adapter_card(state, ref.name, ref.path) for ref in state.lora_adapters()]
    return JSONOut({"object": "list", "data": [_base_card(state), *adapters]})


async def get_model(state: ServerState, request: Request) -> Response:
    ref = resolve_model(state, request.path_params["model"])
    return JSONOut(_base_card(state) if ref is None else _adapter_card(state, ref.name, ref.path))
