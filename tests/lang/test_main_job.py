"""The README's main job on the real SmolLM2-135M-Instruct (converted once per test session):
its programs give the correct answers and it reports the cache hit rate and tokens/s."""

from __future__ import annotations

import importlib
import os
import re

EXAMPLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")


def test_main_job_answers_correctly_on_smollm2(smollm2_dir, monkeypatch, capsys):
    monkeypatch.syspath_prepend(EXAMPLES_DIR)
    main_job = importlib.import_module("main_job")
    summary = main_job.main(["--model-path", str(smollm2_dir), "--device", "cpu"])
    out = capsys.readouterr().out
    assert summary["num_failed_programs"] == 0, out
    results = summary["results"]

    replies = [m["content"] for m in results["multi_turn_chat"] if m["role"] == "assistant"]
    assert ["Paris" in replies[0], "Berlin" in replies[1], "5" in replies[2]] == [True] * 3, replies
    capitals = ["Paris", "Tokyo", "Rome", "Madrid"]
    answers = results["parallel_questions"]
    assert [c in a for c, a in zip(capitals, answers, strict=True)] == [True] * 4, answers
    assert results["multiple_choice"] == ["Tokyo", "a cat", "honey", "cold", "yes"]
    city = results["json_extraction"]  # parsed from schema-constrained output
    assert (city["name"], city["country"], city["population_millions"]) == ("Paris", "France", 2.1), city
    arithmetic = results["arithmetic_grammar"]  # the grammar's language: evaluates, spaced operators
    assert re.fullmatch(r"[(]*[1-9][0-9]?[)]*( [-+*] [(]*[1-9][0-9]?[)]*)*", arithmetic["expression"])
    assert arithmetic["value"] == importlib.import_module("arithmetic_grammar").evaluate(
        arithmetic["expression"]
    )

    quote = results["speculative_quote"]  # greedy tokens equal with and without speculation
    assert quote["identical"] and quote["accepted_drafts"] > 0, quote

    lora = results["lora_adapters"]  # one batch: the base and two adapters, answers of their own
    assert lora["distinct_answers"] >= 2 and lora["same_when_asked_again"], lora
    assert all(n > 0 for n in lora["cached_again"].values()) and lora["unloaded_refused"], lora

    tier = results["kv_tier_restart"]  # a new engine reads the document's KV from the disk tier
    assert tier["identical"] and tier["tier_tokens_after_restart"] == tier["cached_after_restart"] > 1000, (
        tier
    )

    call = results["tool_calling"]  # through sglr-server's OpenAI API, arguments per the schema
    assert call["name"] == "get_weather" and call["arguments"]["unit"] in ("celsius", "fahrenheit")
    assert "Paris" in call["arguments"]["city"]

    assert 0.2 < summary["cache_hit_rate"] < 1 and summary["generation_tokens_per_s"] > 0
    assert "cache hit rate" in out and "tokens/s" in out
