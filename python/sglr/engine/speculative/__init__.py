"""Speculative decoding: drafts proposed per request, verified as a token tree in one pass.

- `config.py`: `SpeculativeConfig`, the engine's `speculative_*` options validated;
- `tree.py`: `DraftTree`, one request's draft tokens and their parents;
- `drafter.py`: the `Drafter` interface; `ngram.py` its n-gram implementation (no model);
- `budget.py`: `DraftBudget`, how many drafts each request gets this pass (adaptive);
- `verify_batch.py`: a verify pass's decode batch (every draft token a row of its own, its
  prefix and tree path the slots it attends to: the tree attention mask);
- `acceptance.py`: the longest accepted path, exact for greedy decoding and
  distribution-preserving for sampling;
- `speculator.py`: `Speculator`, what the scheduler loop calls.
"""
