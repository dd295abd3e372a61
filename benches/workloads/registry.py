"""Every workload by name, in the order the runner reports them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from workloads import (
    few_shot_mmlu,
    generative_agents,
    hellaswag,
    json_regex,
    json_schema,
    llm_judge,
    long_doc_qa,
    multi_chain,
    multi_turn_chat,
    react_agent,
    serving,
    tip_suggestion,
    tree_of_thought,
)

#: name -> build(profile, seed, vocab_size) -> ProgramWorkload | ServingWorkload
BUILDERS: dict[str, Callable[[str, int, int], Any]] = {
    "few-shot": few_shot_mmlu.build,
    "hellaswag": hellaswag.build,
    "react": react_agent.build,
    "generative-agents": generative_agents.build,
    "tree-of-thought": tree_of_thought.build,
    "multi-chain": multi_chain.build,
    "tip-suggestion": tip_suggestion.build,
    "llm-judge": llm_judge.build,
    "json-regex": json_regex.build,
    "json-schema": json_schema.build,
    "multi-turn-short": multi_turn_chat.build_short,
    "multi-turn-long": multi_turn_chat.build_long,
    "long-doc-qa": long_doc_qa.build,
    "serving-random": serving.build_random,
    "serving-shared-prefix": serving.build_shared_prefix,
}
