"""Every limit on what one request may ask of `sglr-server` and `sglr-router`, in one table.

Each bounds work a client could otherwise make as large as it likes (memory, tokenizing,
per-token checks, fetches). A request over one is refused before that work: the body with
`BodyTooLargeError` (413), anything else with `LimitExceededError` naming the field (400).
`TABLE` is what docs/server.md lists (the tests check the two agree); a limit with a flag is
changed with it, a fixed one bounds work inside the engine that no server setting should lift.
"""

from __future__ import annotations

from dataclasses import dataclass

# -- changed with a flag -------------------------------------------------------------------
MAX_BODY_BYTES = 32 << 20
MAX_SEQUENCES_PER_REQUEST = 1024
MAX_MESSAGES = 2048
MAX_TOOLS = 128
MAX_TOOL_SCHEMA_BYTES = 256 << 10
MAX_IMAGES_PER_REQUEST = 16
MAX_IMAGE_BYTES = 20 << 20
MAX_IMAGE_PIXELS = 4096 * 4096

# -- fixed ---------------------------------------------------------------------------------
MAX_HEADER_BYTES = 64 << 10
MAX_N = 128
MAX_LOGPROBS = 20
MAX_STOP_STRINGS = 32
MAX_STOP_STRING_CHARS = 256
MAX_STOP_REGEX_BYTES = 256
MAX_EBNF_BYTES = 256 << 10
MAX_LOGIT_BIAS_ENTRIES = 1024
MAX_VIDEO_FRAMES = 32
MAX_SESSIONS = 1024
MAX_SESSION_REQUESTS = 1024
# A text prompt longer than context length x the longest token x this is refused before it is
# tokenized: no token covers more characters than the longest, and normalizers that fold
# characters together (NFKC) fold at most a few into one.
PROMPT_CHARS_MARGIN = 4


@dataclass(frozen=True)
class Limit:
    name: str
    default: int | str
    flag: str | None  # None: fixed
    what: str


TABLE = (
    Limit("max_body_bytes", MAX_BODY_BYTES, "--max-body-bytes", "bytes of a request body, counted as it arrives, on every route of sglr-server and sglr-router (413)"),
    Limit("max_header_bytes", MAX_HEADER_BYTES, None, "bytes of a request's line and headers, at sglr-server and sglr-router (431)"),
    Limit("max_sequences_per_request", MAX_SEQUENCES_PER_REQUEST, "--max-sequences-per-request", "prompts in a batch times `n`, checked before anything is tokenized"),
    Limit("prompt text", f"context length x longest token x {PROMPT_CHARS_MARGIN}", "--context-length", "characters of a text prompt or of rendered chat messages, checked before tokenizing"),
    Limit("max_messages", MAX_MESSAGES, "--max-messages", "chat `messages`"),
    Limit("max_tools", MAX_TOOLS, "--max-tools", "chat `tools`"),
    Limit("max_tool_schema_bytes", MAX_TOOL_SCHEMA_BYTES, "--max-tool-schema-bytes", "bytes of one tool's `function.parameters` schema, as JSON"),
    Limit("max_images_per_request", MAX_IMAGES_PER_REQUEST, "--max-images-per-request", "images and videos of one prompt; paths and URLs of one request"),
    Limit("max_image_bytes", MAX_IMAGE_BYTES, "--max-image-bytes", "encoded bytes of one image or video: inline, a file or a download"),
    Limit("max_image_pixels", MAX_IMAGE_PIXELS, "--max-image-pixels", "width x height of one image, checked before its pixels are decoded"),
    Limit("max_video_frames", MAX_VIDEO_FRAMES, None, "frames of a video given as a list of frames"),
    Limit("max_n", MAX_N, None, "OpenAI `n`"),
    Limit("max_logprobs", MAX_LOGPROBS, None, "OpenAI `top_logprobs` / `logprobs`, native `top_logprobs_num`"),
    Limit("max_stop_strings", MAX_STOP_STRINGS, None, "`stop` strings, and `stop_regex` patterns"),
    Limit("max_stop_string_chars", MAX_STOP_STRING_CHARS, None, "characters of one stop string (each new token is checked against every one)"),
    Limit("max_stop_regex_bytes", MAX_STOP_REGEX_BYTES, None, "bytes of one `stop_regex` pattern"),
    Limit("max_ebnf_bytes", MAX_EBNF_BYTES, None, "bytes of an `ebnf` grammar or a `structural_tag`"),
    Limit("max_logit_bias_entries", MAX_LOGIT_BIAS_ENTRIES, None, "`logit_bias` entries (applied at every step)"),
    Limit("max_sessions", MAX_SESSIONS, None, "sessions open at once (`/open_session`)"),
    Limit("max_session_requests", MAX_SESSION_REQUESTS, None, "requests one session remembers (each may be continued)"),
)  # fmt: skip


def describe(limit: Limit) -> str:
    """A limit's value as docs/server.md shows it: 32 MiB, 256 KiB, 1024, ..."""
    value = limit.default
    if isinstance(value, str) or not limit.name.endswith("_bytes"):
        return str(value)
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if value >= 1 << shift and value % (1 << shift) == 0:
            return f"{value >> shift} {unit}"
    return str(value)
