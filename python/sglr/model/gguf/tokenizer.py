"""`tokenizer.json` and `tokenizer_config.json` from GGUF metadata (byte-level BPE vocabularies).

GGUF stores a byte-level BPE tokenizer as its vocabulary (already spelled in the byte-to-unicode
alphabet), its merges, a type per token and the name of the pre-tokenizer (`tokenizer.ggml.pre`)
whose split rules the merges were learned with. We rebuild the `tokenizers` pipeline that name
stands for, mark control tokens special, and carry the chat template and BOS/EOS settings over.
"""

from __future__ import annotations

from typing import Any

from sglr.errors import GGUFFormatError, GGUFUnsupportedError
from sglr.model.gguf.reader import GGUFCheckpoint

# llama.cpp token types (tokenizer.ggml.token_type).
_TOKEN_NORMAL = 1
_TOKEN_UNKNOWN = 2
_TOKEN_CONTROL = 3
_TOKEN_USER_DEFINED = 4

# Split rules, as regexes for `tokenizers`. GPT-2's is what `ByteLevel(use_regex=True)` applies.
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# tokenizer.ggml.pre -> pipeline family.
_PRE_TOKENIZER_FAMILIES = {
    "default": "gpt2",
    "gpt2": "gpt2",
    "mpt": "gpt2",
    "olmo": "gpt2",
    # GPT-2 split rules after isolating every digit.
    "smollm": "digits",
    "starcoder": "digits",
    "refact": "digits",
    "codeshell": "digits",
    "exaone": "digits",
    "minerva-7b": "digits",
    "llama-bpe": "llama3",
    "llama3": "llama3",
    "llama-v3": "llama3",
    "smaug-bpe": "llama3",
    "falcon3": "llama3",
    "dbrx": "llama3",
    "qwen2": "qwen2",
    "deepseek-r1-qwen": "qwen2",
    "megrez": "qwen2",
}


def build_tokenizer_files(checkpoint: GGUFCheckpoint) -> tuple[str, dict[str, Any]]:
    """(`tokenizer.json` text, `tokenizer_config.json` contents). Raises `GGUFUnsupportedError`
    for a tokenizer model or pre-tokenizer sglr does not rebuild."""
    model_name = checkpoint.get("tokenizer.ggml.model")
    if model_name is None:
        raise GGUFFormatError(f"{checkpoint.path}: GGUF metadata has no tokenizer (tokenizer.ggml.model)")
    if model_name != "gpt2":
        raise GGUFUnsupportedError(
            f"{checkpoint.path}: GGUF tokenizer model {model_name!r} is not supported "
            "(supported: 'gpt2', byte-level BPE)"
        )
    pre_name = checkpoint.get("tokenizer.ggml.pre", "default")
    family = _PRE_TOKENIZER_FAMILIES.get(pre_name)
    if family is None:
        raise GGUFUnsupportedError(
            f"{checkpoint.path}: GGUF pre-tokenizer {pre_name!r} is not supported "
            f"(supported: {', '.join(sorted(_PRE_TOKENIZER_FAMILIES))})"
        )
    tokens = [str(token) for token in checkpoint.require("tokenizer.ggml.tokens")]
    token_types = [int(t) for t in checkpoint.get("tokenizer.ggml.token_type", [_TOKEN_NORMAL] * len(tokens))]
    merges = checkpoint.get("tokenizer.ggml.merges")
    if merges is None:
        raise GGUFFormatError(f"{checkpoint.path}: byte-level BPE tokenizer without tokenizer.ggml.merges")
    if len(token_types) != len(tokens):
        raise GGUFFormatError(f"{checkpoint.path}: {len(tokens)} tokens but {len(token_types)} token types")

    special_ids = _special_token_ids(checkpoint, len(tokens))
    add_bos = bool(checkpoint.get("tokenizer.ggml.add_bos_token", False))
    add_eos = bool(checkpoint.get("tokenizer.ggml.add_eos_token", False))
    if add_bos and "bos" not in special_ids:
        raise GGUFFormatError(f"{checkpoint.path}: add_bos_token is set but there is no bos_token_id")
    if add_eos and "eos" not in special_ids:
        raise GGUFFormatError(f"{checkpoint.path}: add_eos_token is set but there is no eos_token_id")

    tokenizer = _byte_level_bpe(tokens, [str(merge) for merge in merges], family)
    _add_special_tokens(tokenizer, tokens, token_types, special_ids)
    bos = tokens[special_ids["bos"]] if add_bos else None
    eos = tokens[special_ids["eos"]] if add_eos else None
    tokenizer.post_processor = _post_processor(bos, eos, tokenizer)

    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "add_bos_token": add_bos,
        "add_eos_token": add_eos,
        "clean_up_tokenization_spaces": False,
        "model_max_length": int(checkpoint.arch_get("context_length", 4096)),
    }
    for name, token_id in special_ids.items():
        config[f"{name}_token"] = tokens[token_id]
    chat_template = _chat_template(checkpoint)
    if chat_template is not None:
        config["chat_template"] = chat_template
    return tokenizer.to_str(), config


def _byte_level_bpe(tokens: list[str], merges: list[str], family: str) -> Any:
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    # Later duplicates of a token string keep their id out of the vocabulary; the first wins.
    vocab: dict[str, int] = {}
    for token_id, token in enumerate(tokens):
        vocab.setdefault(token, token_id)
    merge_pairs = []
    for merge in merges:
        left, sep, right = merge.partition(" ")
        if not sep or not left or not right:
            raise GGUFFormatError(f"malformed BPE merge {merge!r} (expected two tokens separated by a space)")
        merge_pairs.append((left, right))
    try:
        bpe = models.BPE(
            vocab=vocab,
            merges=merge_pairs,
            fuse_unk=False,
            byte_fallback=False,
            # Llama 3 keeps a whole pre-token that is in the vocabulary (llama.cpp does the same).
            ignore_merges=family == "llama3",
        )
    # NOTE: `tokenizers` raises a bare Exception, e.g. for a merge of a token not in the vocabulary.
    except Exception as error:
        raise GGUFFormatError(f"inconsistent BPE vocabulary and merges: {error}") from error
    tokenizer = Tokenizer(bpe)
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=family in ("gpt2", "digits"))
    if family == "gpt2":
        tokenizer.pre_tokenizer = byte_level
    elif family == "digits":
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), byte_level]
        )
    else:
        split = _LLAMA3_SPLIT if family == "llama3" else _QWEN2_SPLIT
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(split), behavior="isolated", invert=False), byte_level]
        )
    if family == "qwen2":
        tokenizer.normalizer = normalizers.NFC()
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def _add_special_tokens(
    tokenizer: Any, tokens: list[str], token_types: list[int], special_ids: dict[str, int]
) -> None:
    """Control tokens (and BOS/EOS/UNK/PAD) become special added tokens, user-defined ones plain
    added tokens, so both are matched whole in text instead of being split into bytes."""
    from tokenizers import AddedToken

    special_set = set(special_ids.values())
    added = []
    for token_id, (token, token_type) in enumerate(zip(tokens, token_types, strict=True)):
        special = token_type in (_TOKEN_CONTROL, _TOKEN_UNKNOWN) or token_id in special_set
        if special or token_type == _TOKEN_USER_DEFINED:
            added.append((token_id, AddedToken(token, special=special, normalized=False)))
    tokenizer.add_special_tokens([t for _, t in added if t.special])
    tokenizer.add_tokens([t for _, t in added if not t.special])
    for token_id, token in added:
        if tokenizer.token_to_id(token.content) != token_id:
            raise GGUFFormatError(f"added token {token.content!r} would not keep its id {token_id}")


def _post_processor(bos: str | None, eos: str | None, tokenizer: Any) -> Any:
    from tokenizers import processors

    if bos is None and eos is None:
        return processors.ByteLevel(trim_offsets=False)
    prefix = [f"{bos}:0"] if bos else []
    suffix = [f"{eos}:0"] if eos else []
    pair_suffix = [f"{eos}:1"] if eos else []
    prefix_b = [f"{bos}:1"] if bos else []
    special = [(token, tokenizer.token_to_id(token)) for token in dict.fromkeys(t for t in (bos, eos) if t)]
    return processors.TemplateProcessing(
        single=" ".join([*prefix, "$A:0", *suffix]),
        pair=" ".join([*prefix, "$A:0", *suffix, *prefix_b, "$B:1", *pair_suffix]),
        special_tokens=special,
    )


def _special_token_ids(checkpoint: GGUFCheckpoint, vocab_size: int) -> dict[str, int]:
    ids = {}
    for name, key in (
        ("bos", "bos_token_id"),
        ("eos", "eos_token_id"),
        ("unk", "unknown_token_id"),
        ("pad", "padding_token_id"),
    ):
        token_id = checkpoint.get(f"tokenizer.ggml.{key}")
        if token_id is None:
            continue
        if not 0 <= int(token_id) < vocab_size:
            raise GGUFFormatError(
                f"{checkpoint.path}: {key} {token_id} lies outside the vocabulary of {vocab_size}"
            )
        ids[name] = int(token_id)
    return ids


def _chat_template(checkpoint: GGUFCheckpoint) -> str | list[dict[str, str]] | None:
    """The default template, or Hugging Face's list form when the file also has named ones."""
    default = checkpoint.get("tokenizer.chat_template")
    prefix = "tokenizer.chat_template."
    named = {
        key[len(prefix) :]: str(value) for key, value in checkpoint.metadata.items() if key.startswith(prefix)
    }
    if not named:
        return None if default is None else str(default)
    templates = [{"name": "default", "template": str(default)}] if default is not None else []
    templates += [{"name": name, "template": template} for name, template in sorted(named.items())]
    return templates
