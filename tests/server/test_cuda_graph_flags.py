"""`--cuda-graph-max-bs`, `--disable-cuda-graph` and `--cuda-graph-extend-max-tokens` reach the
engine options (and an `EngineConfig`), and bad values stop the parser with a message."""

from __future__ import annotations

import pytest

from sglr.engine.config import EngineConfig
from sglr.server.launch import build_parser, engine_options


def test_flags_reach_the_engine_options_and_config() -> None:
    parser = build_parser()
    defaults = engine_options(parser.parse_args([]))
    assert "cuda_graph_max_bs" not in defaults  # the engine's default stays
    assert defaults["cuda_graph_extend_max_tokens"] == 0
    options = engine_options(
        parser.parse_args(["--cuda-graph-max-bs", "32", "--cuda-graph-extend-max-tokens", "64"])
    )
    assert (options["cuda_graph_max_bs"], options["cuda_graph_extend_max_tokens"]) == (32, 64)
    config = EngineConfig(cuda_graph_max_bs=32, cuda_graph_extend_max_tokens=64)
    assert (config.cuda_graph_max_bs, config.cuda_graph_extend_max_tokens) == (32, 64)
    off = engine_options(parser.parse_args(["--disable-cuda-graph", "--cuda-graph-extend-max-tokens", "64"]))
    assert (off["cuda_graph_max_bs"], off["cuda_graph_extend_max_tokens"]) == (0, 0)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--cuda-graph-max-bs", "-1"], "must be >= 0, got -1"),
        (["--cuda-graph-extend-max-tokens", "lots"], "expected a whole number, got 'lots'"),
    ],
)
def test_bad_values_stop_the_parser_with_a_message(argv: list[str], message: str, capsys) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(argv)
    assert message in capsys.readouterr().err
