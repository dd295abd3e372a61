"""Images through the engine on tiny LLaVA-1.5 and LLaVA-NeXT checkpoints, against
`transformers` (its own processor expanding and preprocessing, its model generating): greedy tokens identical with one
and two images, alone, batched and with the prefill chunked inside an image; the prefix cache
keyed by image content (a repeated image hits and gives the same tokens, a different image with
the same text shares only the text before it); every input form gives the same tokens; bad
images are refused with `InvalidRequestError` and the engine keeps serving."""

from __future__ import annotations

import base64
import io
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import torch

from sglr.engine.engine import Engine
from sglr.errors import InvalidRequestError
from sglr.testing.tiny_llava import write_llava_checkpoint

NUM_NEW = 6
GREEDY = {"max_new_tokens": NUM_NEW, "temperature": 0.0, "ignore_eos": True}


def picture(seed: int, width: int = 40, height: int = 31):  # a PIL image
    from PIL import Image

    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


def png_bytes(image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture(scope="module", params=["llava", "llava_next"])
def llava_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_llava_checkpoint(tmp_path_factory.mktemp(request.param), seed=4, family=request.param)


@pytest.fixture(scope="module")
def engine(llava_dir: Path, make_engine) -> Engine:
    return make_engine(llava_dir, max_total_tokens=4096)


@lru_cache(maxsize=2)
def _hf(path: Path):
    from transformers import AutoModelForImageTextToText, AutoProcessor

    model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return AutoProcessor.from_pretrained(str(path)), model


def hf_inputs(path: Path, text: str, images: list) -> dict:
    return _hf(path)[0](text=text, images=images or None, return_tensors="pt")


def hf_greedy(path: Path, text: str, images: list) -> list[int]:
    inputs = hf_inputs(path, text, images)
    with torch.no_grad():
        out = _hf(path)[1].generate(**inputs, max_new_tokens=NUM_NEW, min_new_tokens=NUM_NEW, do_sample=False)
    return out[0, inputs["input_ids"].shape[1] :].tolist()


def test_one_image_matches_transformers(engine: Engine, llava_dir: Path) -> None:
    text = "Describe <image> in a word:"
    result = engine.generate(text, GREEDY, image_data=picture(1))
    assert result["output_ids"] == hf_greedy(llava_dir, text, [picture(1)])
    assert (
        result["meta_info"]["prompt_tokens"] == hf_inputs(llava_dir, text, [picture(1)])["input_ids"].shape[1]
    )


def test_two_images_alone_and_batched_match_transformers(engine: Engine, llava_dir: Path) -> None:
    cases = [
        ("<image> and <image>: which is brighter?", [picture(2), picture(3, 60, 20)]),
        ("no image here, just text", []),
        ("one <image> only", [picture(4, 28, 28)]),
    ]
    expected = [hf_greedy(llava_dir, text, images) for text, images in cases]
    alone = [engine.generate(text, GREEDY, image_data=images)["output_ids"] for text, images in cases]
    engine.flush_cache()
    batched = engine.generate([t for t, _ in cases], GREEDY, image_data=[i for _, i in cases])
    assert alone == expected
    assert [r["output_ids"] for r in batched] == expected


def test_a_prefill_chunked_inside_images_matches_transformers(llava_dir: Path, make_engine) -> None:
    chunked = make_engine(llava_dir, chunked_prefill_size=5, max_total_tokens=4096)
    text = "a <image> b <image> c"
    images = [picture(5), picture(6)]
    assert chunked.generate(text, GREEDY, image_data=images)["output_ids"] == hf_greedy(
        llava_dir, text, images
    )


def test_a_repeated_image_hits_the_cache_and_gives_the_same_tokens(engine: Engine, llava_dir: Path) -> None:
    engine.flush_cache()
    text = "Question one about <image>?"
    first = engine.generate(text, GREEDY, image_data=picture(7))
    again = engine.generate(text, GREEDY, image_data=picture(7))
    prompt_len = first["meta_info"]["prompt_tokens"]
    assert first["meta_info"]["cached_tokens"] == 0
    assert again["meta_info"]["cached_tokens"] == prompt_len - 1  # image tokens included
    assert again["output_ids"] == first["output_ids"] == hf_greedy(llava_dir, text, [picture(7)])


def test_a_different_image_with_the_same_text_never_shares_its_kv(engine: Engine, llava_dir: Path) -> None:
    engine.flush_cache()
    text = "Tell me about <image> now"
    num_before_image = len(engine.tokenizer.encode("Tell me about "))
    engine.generate(text, GREEDY, image_data=picture(8))
    other = engine.generate(text, GREEDY, image_data=picture(9))
    assert other["meta_info"]["cached_tokens"] == num_before_image
    assert other["output_ids"] == hf_greedy(llava_dir, text, [picture(9)])


def test_every_input_form_gives_the_same_tokens(engine: Engine, tmp_path: Path) -> None:
    image = picture(10)
    data = png_bytes(image)
    path = tmp_path / "picture.png"
    path.write_bytes(data)
    encoded = base64.b64encode(data).decode()
    forms = [image, data, str(path), f"file://{path}", encoded, f"data:image/png;base64,{encoded}"]
    outputs = [engine.generate("see <image>", GREEDY, image_data=form)["output_ids"] for form in forms]
    assert all(output == outputs[0] for output in outputs)


def test_bad_images_are_refused_and_the_engine_keeps_serving(llava_dir: Path, make_engine) -> None:
    data = png_bytes(picture(11))
    bad = {
        "truncated": data[: len(data) // 2],
        "not an image": b"GIF89a? certainly not",
        "bad base64": "data:image/png;base64,@@@@",
        "missing file": "/nonexistent/picture.png",
        "too large": picture(12, 2100, 2100),
        "wrong type": 3.5,
    }
    engine = make_engine(llava_dir, max_image_pixels=2000 * 2000, max_images_per_request=4)
    for name, item in bad.items():
        with pytest.raises(InvalidRequestError, match=r"image_data\[0\]") as info:
            engine.generate("x <image>", GREEDY, image_data=item)
        assert info.value.param == "image_data[0]", name
    with pytest.raises(InvalidRequestError, match="2 image tokens for 1 images"):
        engine.generate("<image> <image>", GREEDY, image_data=picture(1))
    with pytest.raises(InvalidRequestError, match="limit is 4"):
        engine.generate("many", GREEDY, image_data=[picture(1)] * 5)
    text = "still <image> serving"
    assert engine.generate(text, GREEDY, image_data=picture(13))["output_ids"] == hf_greedy(
        llava_dir, text, [picture(13)]
    )


def test_a_text_only_model_refuses_images(tiny_dir: Path, make_engine) -> None:
    text_engine = make_engine(tiny_dir)
    with pytest.raises(InvalidRequestError, match="does not take images"):
        text_engine.generate("hello", GREEDY, image_data=picture(1))


def test_images_reach_worker_processes(llava_dir: Path, make_engine) -> None:
    """The server's layout: the front reads and places images, rank 0 runs them."""
    workers = make_engine(llava_dir, multiprocess=True, max_total_tokens=4096)
    text = "workers see <image>?"
    first = workers.generate(text, GREEDY, image_data=picture(14))
    again = workers.generate(text, GREEDY, image_data=picture(14))
    assert first["output_ids"] == again["output_ids"] == hf_greedy(llava_dir, text, [picture(14)])
    assert again["meta_info"]["cached_tokens"] == again["meta_info"]["prompt_tokens"] - 1


@pytest.fixture(scope="module")
def video_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_llava_checkpoint(tmp_path_factory.mktemp("video"), seed=6, family="llava_next_video")


def hf_video_greedy(path: Path, engine: Engine, text: str, frames: list, images: list) -> list[int]:
    """`transformers` with the engine's own frame pixels (its video processor needs torchvision;
    frames are preprocessed as single image tiles, which the model tests check against it)."""
    from sglr.model.image_processor import load_image_processor

    processor, model = _hf(path)
    vision = engine.runner.config.vision
    tile = load_image_processor(path, vision.image_size, vision.image_grid_pinpoints).tile
    num_tokens = len(frames) * vision.num_tokens_per_frame
    inputs = processor(
        text=text.replace("<video>", "<video>" * num_tokens), images=images or None, return_tensors="pt"
    )
    inputs["pixel_values_videos"] = torch.stack([tile(frame) for frame in frames])[None]
    with torch.no_grad():
        out = model.generate(**inputs, max_new_tokens=NUM_NEW, min_new_tokens=NUM_NEW, do_sample=False)
    return out[0, inputs["input_ids"].shape[1] :].tolist()


def test_a_video_as_frames_matches_transformers_and_hits_the_cache(video_dir: Path, make_engine) -> None:
    engine = make_engine(video_dir, max_total_tokens=4096)
    frames = [picture(20 + f, 36, 30) for f in range(5)]
    text = "Watch <video> then <image>: what changed?"
    expected = hf_video_greedy(video_dir, engine, text, frames, [picture(30)])
    first = engine.generate(text, GREEDY, image_data=picture(30), video_data=[frames])
    again = engine.generate(text, GREEDY, image_data=picture(30), video_data=[frames])
    assert first["output_ids"] == again["output_ids"] == expected
    assert again["meta_info"]["cached_tokens"] == again["meta_info"]["prompt_tokens"] - 1
    other = engine.generate(text, GREEDY, image_data=picture(30), video_data=[frames[::-1]])
    assert other["meta_info"]["cached_tokens"] == len(engine.tokenizer.encode("Watch "))
    batched = engine.generate(
        [text, "no video"], GREEDY, image_data=[picture(30), None], video_data=[[frames], None]
    )
    assert batched[0]["output_ids"] == expected


def test_bad_videos_are_refused(video_dir: Path, llava_dir: Path, make_engine, tmp_path: Path) -> None:
    engine = make_engine(video_dir, max_video_frames=4)
    with pytest.raises(InvalidRequestError, match="limit is 4") as info:
        engine.generate("<video>", GREEDY, video_data=[[picture(1)] * 5])
    assert info.value.param == "video_data[0]"
    with pytest.raises(InvalidRequestError, match=r"video_data\[0\]\[1\] is not a readable image"):
        engine.generate("<video>", GREEDY, video_data=[[picture(1), b"junk"]])
    with pytest.raises(InvalidRequestError, match=r"video file .* or a list of frames"):
        engine.generate("<video>", GREEDY, video_data=picture(1))
    not_a_video = tmp_path / "clip.mp4"
    not_a_video.write_bytes(b"not a video at all")
    with pytest.raises(InvalidRequestError, match=r"video_data\[0\] is not a readable video"):
        engine.generate("<video>", GREEDY, video_data=str(not_a_video))
    image_only = make_engine(llava_dir)
    with pytest.raises(InvalidRequestError, match="does not take videos"):
        image_only.generate("<video>", GREEDY, video_data=[[picture(1)]])


def test_tensor_parallel_ranks_run_images(llava_dir: Path, make_engine) -> None:
    """Two ranks (gloo): the tower and projector replicated, the decoder split; same tokens."""
    engine = make_engine(llava_dir, tp_size=2, max_total_tokens=4096)
    text = "split <image> across ranks"
    assert engine.generate(text, GREEDY, image_data=picture(15))["output_ids"] == hf_greedy(
        llava_dir, text, [picture(15)]
    )


def write_lossless_video(path: Path, frames: list) -> None:
    """An FFV1 (lossless) Matroska file: its decoded frames equal `frames` pixel for pixel."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=4)
        stream.width, stream.height = frames[0].size
        stream.pix_fmt = "bgr0"
        for image in frames:
            container.mux(stream.encode(av.VideoFrame.from_image(image)))
        container.mux(stream.encode())


def test_a_video_file_is_decoded_with_pyav_and_sampled_evenly(
    video_dir: Path, make_engine, tmp_path: Path
) -> None:
    engine = make_engine(video_dir, max_total_tokens=4096, video_num_frames=4)
    frames = [picture(40 + f, 36, 30) for f in range(10)]
    path = tmp_path / "clip.mkv"
    write_lossless_video(path, frames)
    sampled = [frames[i] for i in (0, 3, 6, 9)]  # 4 of 10, evenly over the length
    text = "Watch <video>: what happens?"
    expected = engine.generate(text, GREEDY, video_data=[sampled])["output_ids"]
    data = path.read_bytes()
    for source in (
        str(path),
        f"file://{path}",
        data,
        "data:video/x-matroska;base64," + base64.b64encode(data).decode(),
    ):
        result = engine.generate(text, GREEDY, video_data=source)
        assert result["output_ids"] == expected
        assert result["meta_info"]["cached_tokens"] == result["meta_info"]["prompt_tokens"] - 1
    with pytest.raises(InvalidRequestError, match=r"video_data\[0\] is not a readable video"):
        engine.generate(text, GREEDY, video_data=data[:20])  # a cut-off header
    assert engine.generate(text, GREEDY, video_data=str(path))["output_ids"] == expected
