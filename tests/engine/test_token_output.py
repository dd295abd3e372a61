"""`TokenOutput` crosses from the worker to the front pickled: every field survives the trip."""

from __future__ import annotations

import dataclasses
import pickle

from sglr.engine.finish import FinishStop
from sglr.engine.token_output import TokenOutput


def test_every_field_survives_pickling() -> None:
    out = TokenOutput(
        uid=7,
        new_token_ids=[3, 4],
        completion_tokens=9,
        cached_tokens=2,
        num_retractions=1,
        finish_reason=FinishStop(matched="end"),
        last_is_stop_token=True,
        text_end=5,
        output_logprobs=[(-0.5, 3), (-1.5, 4)],
        output_top_logprobs=[[(-0.5, 3)], [(-1.5, 4)]],
        input_logprobs=([(None, 1), (-2.0, 2)], [None, [(-2.0, 2)]]),
        spec_verify_ct=5,
        spec_accepted_tokens=3,
        embedding_parts=([1.0, 2.0], [0.5, 0.25]),  # numpy arrays in the engine
    )
    back = pickle.loads(pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL))
    # Every field differs from its default, so a field the pickle dropped would show.
    defaults = TokenOutput(0, [], 0, 0, 0)
    for field in dataclasses.fields(TokenOutput):
        assert getattr(out, field.name) != getattr(defaults, field.name), field.name
    assert back == out
