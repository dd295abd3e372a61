"""`sgl.image` on the in-process engine with a tiny LLaVA checkpoint: a program's answer is the
engine's own for the same text and image, a second question about the same image reuses its
KV (reported cached), and `select` scores choices after an image."""

from __future__ import annotations

import numpy as np
import pytest

import sglr as sgl
from sglr.engine.engine import Engine
from sglr.lang.backend.engine_backend import EngineBackend
from sglr.testing.tiny_llava import write_llava_checkpoint


def picture(seed: int):  # a PIL image
    from PIL import Image

    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (30, 44, 3), dtype=np.uint8))


@pytest.fixture(scope="module", params=["llava", "llava_next"])
def llava_path(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    return write_llava_checkpoint(tmp_path_factory.mktemp(request.param), seed=4, family=request.param)


@pytest.fixture(scope="module")
def llava_engine(llava_path):
    path = llava_path
    engine = Engine(model_path=str(path), device="cpu", max_total_tokens=4096, debug_invariants=True)
    yield engine
    engine.shutdown()


@sgl.function
def ask(s, image, question):
    s += "Look: " + sgl.image(image) + " " + question
    s += sgl.gen("answer", max_tokens=5, temperature=0, ignore_eos=True)


@sgl.function
def pick(s, image):
    s += "Look: " + sgl.image(image) + " Is it bright?"
    s += sgl.select("verdict", choices=["yes", "no", "maybe not"])


def test_a_program_with_an_image_answers_as_the_engine_does(llava_engine: Engine) -> None:
    backend = EngineBackend(llava_engine)
    state = ask.run(image=picture(1), question="What is it?", backend=backend)
    answer = state["answer"]
    prompt = state.text()[: len(state.text()) - len(answer)]
    assert prompt.count("<image>") == 1
    expected = llava_engine.generate(
        prompt, {"max_new_tokens": 5, "temperature": 0, "ignore_eos": True}, image_data=picture(1)
    )
    assert answer == expected["text"]
    again = ask.run(image=picture(1), question="And its colour?", backend=backend)
    assert again.get_meta_info("answer")["cached_tokens"] >= 16  # the image's tokens at least


def hf_choice(path, prompt: str, image, choices: list[str]) -> str:
    """The choice with the highest mean token logprob after `prompt`, through `transformers`."""
    import torch
    from transformers import AutoModelForImageTextToText, AutoProcessor

    processor = AutoProcessor.from_pretrained(str(path))
    model = AutoModelForImageTextToText.from_pretrained(path, dtype=torch.float32).eval()
    prompt_ids = processor(text=prompt, images=[image], return_tensors="pt")["input_ids"][0].tolist()
    scores = []
    for choice in choices:
        inputs = processor(text=prompt + choice, images=[image], return_tensors="pt")
        ids = inputs["input_ids"][0]
        # The choice's tokens start where the two tokenizations part.
        start = next(
            (i for i, (a, b) in enumerate(zip(prompt_ids, ids.tolist(), strict=False)) if a != b),
            len(prompt_ids),
        )
        with torch.no_grad():
            logprobs = model(**inputs).logits[0].float().log_softmax(-1)
        picked = [logprobs[i - 1, ids[i]].item() for i in range(start, len(ids))]
        scores.append(sum(picked) / len(picked))
    return choices[int(np.argmax(scores))]


def test_select_after_an_image_matches_transformers(llava_engine: Engine, llava_path) -> None:
    choices = ["yes", "no", "maybe not"]
    for seed in (2, 3):
        state = pick.run(image=picture(seed), backend=EngineBackend(llava_engine))
        prompt = state.text()[: len(state.text()) - len(state["verdict"])]
        assert state["verdict"] == hf_choice(llava_path, prompt, picture(seed), choices)


@pytest.fixture(scope="module")
def video_engine(tmp_path_factory: pytest.TempPathFactory):
    path = write_llava_checkpoint(tmp_path_factory.mktemp("video"), seed=6, family="llava_next_video")
    engine = Engine(model_path=str(path), device="cpu", max_total_tokens=4096, debug_invariants=True)
    yield engine
    engine.shutdown()


@sgl.function
def watch(s, frames, question):
    s += "Clip: " + sgl.video(frames) + " " + question
    s += sgl.gen("answer", max_tokens=5, temperature=0, ignore_eos=True)
    s += sgl.select("verdict", choices=["moving", "still"])


def test_a_program_with_a_video_answers_as_the_engine_does(video_engine: Engine) -> None:
    frames = [picture(40 + f) for f in range(3)]
    state = watch.run(frames=frames, question="What happens?", backend=EngineBackend(video_engine))
    text = state.text()
    prompt = text[: text.index(state["answer"], text.index("What happens?"))]
    assert prompt.count("<video>") == 1
    expected = video_engine.generate(
        prompt, {"max_new_tokens": 5, "temperature": 0, "ignore_eos": True}, video_data=[frames]
    )
    assert state["answer"] == expected["text"]
    assert state["verdict"] in ("moving", "still")
    again = watch.run(frames=frames, question="Who is there?", backend=EngineBackend(video_engine))
    assert again.get_meta_info("answer")["cached_tokens"] >= 3 * 4  # the video's tokens at least


def test_video_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="num_frames"):
        sgl.video("clip.mp4", num_frames=0)


@sgl.function
def branches(s, image):
    s += "Look: " + sgl.image(image) + " Answer two ways."
    forks = s.fork(2)
    for i, f in enumerate(forks):
        f += f" Way {i}:" + sgl.gen("way", max_tokens=3, temperature=0, ignore_eos=True)
    forks.join()


def test_forked_branches_reuse_the_image_kv(llava_engine: Engine) -> None:
    llava_engine.flush_cache()
    before = llava_engine.get_stats()["num_cached_prompt_tokens"]
    state = branches.run(image=picture(5), backend=EngineBackend(llava_engine))
    assert len(state["way"]) == 2
    # The fork hint prefilled the image prompt once; both branches matched it from the cache.
    assert llava_engine.get_stats()["num_cached_prompt_tokens"] - before >= 2 * 16
