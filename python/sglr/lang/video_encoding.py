"""Videos in prompts travel as their sampled frames, each base64 (PNG) like an image.

A video is a list of frames (paths, bytes or PIL images) or a video file, decoded with PyAV
(imported only then) and sampled evenly to `num_frames` frames.
"""

from __future__ import annotations

import io
import os
from typing import Any

from sglr.lang.image_encoding import encode_image_base64


def encode_video_frames_base64(source: Any, num_frames: int) -> list[str]:
    """Base64 frames of `source`: a list of frames as given, or `num_frames` from a file."""
    if num_frames < 1:
        raise ValueError(f"num_frames must be >= 1, got {num_frames}")
    if isinstance(source, (list, tuple)):
        if not source:
            raise ValueError("a video needs at least one frame")
        return [encode_image_base64(frame) for frame in source]
    if not isinstance(source, (str, os.PathLike, bytes, bytearray)):
        raise TypeError(f"cannot read a video from a {type(source).__name__}; pass a path, bytes or frames")
    try:
        import av
    except ImportError:
        raise ImportError(
            "decoding a video file needs PyAV (pip install av); or pass a list of frames"
        ) from None
    opened = io.BytesIO(bytes(source)) if isinstance(source, (bytes, bytearray)) else os.fspath(source)
    with av.open(opened) as container:
        frames = [frame.to_image() for frame in container.decode(video=0)]
    if not frames:
        raise ValueError("the video has no frames")
    count = min(num_frames, len(frames))
    picks = [round(i * (len(frames) - 1) / max(count - 1, 1)) for i in range(count)]
    return [encode_image_base64(frames[i]) for i in picks]
