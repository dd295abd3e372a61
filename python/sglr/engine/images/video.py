"""Reading a video's frames: a list of frames (each anything `load_image` reads), or a video
file (a path, `file://` URL, encoded bytes, a base64 data URL or bare base64) decoded with PyAV, `limits.video_num_frames`
frames sampled evenly over its length. Errors are `InvalidRequestError`s naming `video_data[i]`.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from sglr.engine.images.loading import ImageLimits, load_image, read_bytes, source_kind
from sglr.errors import InvalidRequestError


def load_video_frames(item: Any, param: str, limits: ImageLimits) -> list[Any]:
    """PIL images, one per sampled frame."""
    if isinstance(item, (list, tuple)):
        if not item:
            raise InvalidRequestError(f"{param} has no frames", param=param)
        if len(item) > limits.max_video_frames:
            raise InvalidRequestError(
                f"{param} has {len(item)} frames; the limit is {limits.max_video_frames}", param=param
            )
        return [load_image(frame, f"{param}[{j}]", limits) for j, frame in enumerate(item)]
    kind = source_kind(item)
    if kind not in ("bytes", "file", "data_url", "base64"):
        raise InvalidRequestError(
            f"{param} must be a video file (a path, file:// URL, bytes or base64) or a list of frames",
            param=param,
        )
    if kind in ("data_url", "base64"):
        item, kind = read_bytes(item, kind, param, limits), "bytes"
    return _decode(item, kind, param, limits)


def _decode(item: Any, kind: str, param: str, limits: ImageLimits) -> list[Any]:
    try:
        import av
    except ImportError:
        raise InvalidRequestError(
            f"{param}: decoding video files needs PyAV (pip install av); send a list of frames instead",
            param=param,
        ) from None
    source: Any = io.BytesIO(bytes(item)) if kind == "bytes" else item.removeprefix("file://")
    try:
        with av.open(source) as container:
            frames = [frame.to_image() for frame in container.decode(video=0)]
    except (OSError, ValueError, av.error.FFmpegError) as exc:  # type: ignore[attr-defined]
        raise InvalidRequestError(f"{param} is not a readable video: {exc}", param=param) from None
    if not frames:
        raise InvalidRequestError(f"{param} has no frames", param=param)
    picks = np.linspace(0, len(frames) - 1, min(limits.video_num_frames, len(frames))).round().astype(int)
    return [frames[i] for i in picks]
