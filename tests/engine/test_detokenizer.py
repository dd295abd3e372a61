"""Incremental detokenization and stop strings, on a byte-level BPE trained in the test."""

from __future__ import annotations

import random

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from sglr.engine.detokenizer import IncrementalDetokenizer
from sglr.engine.stop_strings import StopStringMatcher

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "naïve café — déjà vu, 東京タワー and 🤖🎉 emoji!",
    "def f(x):\n    return x ** 2  # squares\n",
    "Ünïcödé ✓ Ελληνικά русский 한국어",
]


@pytest.fixture(scope="module")
def tokenizer() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=["<eos>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(TEXTS * 20, trainer=trainer)
    return tok


def stream(tokenizer: Tokenizer, prompt: str, output: str, step: int) -> list[str]:
    prompt_ids = tokenizer.encode(prompt).ids
    output_ids = tokenizer.encode(output).ids
    detok = IncrementalDetokenizer(tokenizer, prompt_ids)
    pieces = [detok.append(output_ids[i : i + step]) for i in range(0, len(output_ids), step)]
    pieces.append(detok.flush())
    assert detok.text == "".join(pieces)
    return pieces


@pytest.mark.parametrize("step", [1, 2, 3])
@pytest.mark.parametrize("text", TEXTS)
def test_streamed_pieces_concatenate_to_the_full_decode(tokenizer: Tokenizer, text: str, step: int) -> None:
    pieces = stream(tokenizer, "Prompt: ", text, step)
    assert "".join(pieces) == tokenizer.decode(tokenizer.encode(text).ids)
    assert all("\ufffd" not in piece for piece in pieces), "a broken character was emitted"


def test_multibyte_characters_split_over_tokens_are_held_back(tokenizer: Tokenizer) -> None:
    # Byte-level ids of one 4-byte emoji, fed one byte token at a time.
    emoji_ids = [tokenizer.token_to_id(ch) for ch in pre_tokenize_bytes("🤖")]
    detok = IncrementalDetokenizer(tokenizer, [])
    outputs = [detok.append([i]) for i in emoji_ids]
    assert outputs[:-1] == ["", "", ""]
    assert outputs[-1] == "🤖"


def test_flush_emits_an_unfinished_character_as_replacement(tokenizer: Tokenizer) -> None:
    first_byte = tokenizer.token_to_id(pre_tokenize_bytes("🤖")[0])
    detok = IncrementalDetokenizer(tokenizer, [])
    assert detok.append([first_byte]) == ""
    assert detok.flush() == "\ufffd"


def test_long_streams_stay_correct_after_window_trimming(tokenizer: Tokenizer) -> None:
    rng = random.Random(0)
    text = " ".join(rng.choice(TEXTS) for _ in range(30))
    assert "".join(stream(tokenizer, "", text, 1)) == tokenizer.decode(tokenizer.encode(text).ids)


def pre_tokenize_bytes(text: str) -> list[str]:
    """The byte-level alphabet symbols of `text`'s UTF-8 bytes."""
    alphabet = byte_alphabet()
    return [alphabet[b] for b in text.encode()]


def byte_alphabet() -> dict[int, str]:
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    mapping, extra = {}, 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


class TestStopStrings:
    def test_finds_a_stop_spanning_pieces_and_earliest_wins(self) -> None:
        matcher = StopStringMatcher(["\nUser:", "END"])
        text = ""
        found = None
        for piece in ["Hello", " there\nUs", "er: and END"]:
            text += piece
            found = matcher.find(text, len(piece)) or found
            if found:
                break
        assert found is not None and found.stop == "\nUser:" and text[: found.start] == "Hello there"

    def test_safe_len_holds_back_a_possible_stop_prefix(self) -> None:
        matcher = StopStringMatcher(["Observation:"])
        assert matcher.safe_len("Thought: go. Obser") == len("Thought: go. ")
        assert matcher.safe_len("Thought: done") == len("Thought: done")
        assert StopStringMatcher([]).safe_len("abc") == 3

    def test_only_new_text_is_searched(self) -> None:
        matcher = StopStringMatcher(["ab"])
        assert matcher.find("xxab", 1) is not None
        assert matcher.find("abxxxx", 2) is None


@pytest.mark.parametrize("clean_up_spaces", [False, True])
def test_engine_tokenizer_decode_equals_transformers_decode(tmp_path, clean_up_spaces: bool) -> None:
    """`EngineTokenizer.decode` calls the Rust tokenizer directly when that gives what the
    `transformers` wrapper gives (no space clean-up), and the wrapper otherwise."""
    import json
    import shutil

    from sglr.engine.tokenizer import EngineTokenizer
    from sglr.testing.tiny import tiny_model_path

    model_dir = tmp_path / "m"
    shutil.copytree(tiny_model_path("qwen2"), model_dir)
    config_path = model_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["clean_up_tokenization_spaces"] = clean_up_spaces
    config_path.write_text(json.dumps(config))
    tok = EngineTokenizer(model_dir)
    assert (tok._rust_decode is None) == clean_up_spaces
    special = sorted(tok.hf.all_special_ids)
    punctuation = tok.encode("well , then . is it ? yes !", add_special_tokens=False)
    rng = random.Random(3)
    for _ in range(200):
        ids = [rng.choice(special) if rng.random() < 0.1 else rng.randrange(tok.vocab_size) for _ in range(8)]
        ids += punctuation  # spaces before punctuation: what the clean-up would remove
        for skip in (True, False):
            assert tok.decode(ids, skip) == tok.hf.decode(ids, skip_special_tokens=skip)


def test_a_one_line_template_longer_than_a_file_name_is_template_text(tmp_path) -> None:
    """`chat_template` is a path or Jinja text; text over the 255-byte file-name limit is not
    a path (stat would raise), and a file path still reads the file."""
    from sglr.engine.tokenizer import EngineTokenizer
    from sglr.testing.tiny import tiny_model_path

    long_template = "{% for m in messages %}" + "{{ m.content }}" * 40 + "{% endfor %}"
    assert len(long_template) > 255
    assert EngineTokenizer(tiny_model_path("llama"), long_template).chat_template == long_template
    path = tmp_path / "t.jinja"
    path.write_text("{{ messages[0].content }}")
    assert EngineTokenizer(tiny_model_path("llama"), str(path)).chat_template == "{{ messages[0].content }}"


def test_special_token_texts_are_recognised() -> None:
    from sglr.engine.tokenizer import EngineTokenizer
    from sglr.testing.tiny import tiny_model_path

    tok = EngineTokenizer(tiny_model_path("llama"))
    assert tok.is_special_token_text("<|im_end|>")
    assert not tok.is_special_token_text("<|im_end")
    assert not tok.is_special_token_text("hello")
