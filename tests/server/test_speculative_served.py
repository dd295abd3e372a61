"""Speculative decoding through sglr-server: native and OpenAI responses equal those of a server
without it, `meta_info` carries the verify counts, `/metrics` the acceptance gauges, and the
flags reach the engine."""

from __future__ import annotations

from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families
from server_harness import served_engine

from sglr.server import ServerSettings
from sglr.server.launch import build_parser, engine_options

PROMPT = "a b c d e f a b c d e f a b c"
GREEDY = {"temperature": 0, "max_new_tokens": 20, "ignore_eos": True}


def _gauges(text: str) -> dict[str, float]:
    return {
        s.name: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("sglr:spec_")
    }


def test_served_speculation_equals_plain_serving_and_reports_itself(tiny_dir: Path) -> None:
    settings = ServerSettings(enable_metrics=True)
    outputs = {}
    for name, options in (("plain", {}), ("spec", {"speculative_algorithm": "NGRAM"})):
        with served_engine(tiny_dir, settings, debug_invariants=True, **options) as served:
            native = httpx.post(
                f"{served.url}/generate", json={"text": PROMPT, "sampling_params": GREEDY}
            ).json()
            chat = httpx.post(
                f"{served.url}/v1/completions",
                json={"model": "default", "prompt": PROMPT, "max_tokens": 12, "temperature": 0},
            ).json()
            metrics = _gauges(httpx.get(f"{served.url}/metrics").text)
            outputs[name] = (native, chat, metrics)
    (plain, plain_chat, plain_metrics), (spec, spec_chat, spec_metrics) = outputs["plain"], outputs["spec"]
    assert spec["output_ids"] == plain["output_ids"] and spec["text"] == plain["text"]
    assert spec_chat["choices"][0]["text"] == plain_chat["choices"][0]["text"]
    meta = spec["meta_info"]
    assert 1 + meta["spec_verify_ct"] + meta["spec_accepted_tokens"] == GREEDY["max_new_tokens"]
    assert "spec_verify_ct" not in plain["meta_info"]
    assert spec_metrics["sglr:spec_verify_passes"] > 0 and plain_metrics["sglr:spec_verify_passes"] == 0
    assert set(spec_metrics) == {
        "sglr:spec_accept_rate",
        "sglr:spec_accept_length",
        "sglr:spec_verify_passes",
    }


def test_speculative_flags_become_engine_options() -> None:
    args = build_parser().parse_args(
        ["--speculative-algorithm", "STANDALONE", "--speculative-draft-model-path", "/d",
         "--speculative-num-draft-tokens", "5", "--speculative-eagle-topk", "2",
         "--speculative-ngram-max-bfs-breadth", "3"]
    )  # fmt: skip
    options = engine_options(args)
    assert options["speculative_algorithm"] == "STANDALONE"
    assert options["speculative_draft_model_path"] == "/d"
    assert (options["speculative_num_draft_tokens"], options["speculative_eagle_topk"]) == (5, 2)
    assert options["speculative_ngram_max_bfs_breadth"] == 3
    assert "speculative_num_steps" not in options  # the engine's default stands
    assert "speculative_algorithm" not in engine_options(build_parser().parse_args([]))
