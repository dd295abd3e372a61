"""Images over HTTP on a tiny LLaVA checkpoint: native `/generate` `image_data` and OpenAI chat
`image_url` parts give the engine's tokens; a repeated image is reported cached; paths and URLs
are refused (400 naming the part) unless the server allows them; truncated, non-image and
oversized images are 400s and the server keeps serving."""

from __future__ import annotations

import base64
import contextlib
import http.server
import io
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from server_harness import Served, serve, served_engine

from sglr.server import ServerSettings, build_app
from sglr.testing.tiny_llava import write_llava_checkpoint

GREEDY = {"max_new_tokens": 5, "temperature": 0.0, "ignore_eos": True}


def picture(seed: int, width: int = 40, height: int = 31):  # a PIL image
    from PIL import Image

    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


def png(image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def data_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


@pytest.fixture(scope="module")
def llava_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_llava_checkpoint(tmp_path_factory.mktemp("llava"), seed=4)


@pytest.fixture(scope="module")
def served(llava_dir: Path) -> Iterator[Served]:
    with served_engine(llava_dir, ServerSettings(), debug_invariants=True, max_image_pixels=1000 * 1000) as s:
        yield s


def chat_body(image_url: str, question: str = "What is in it?") -> dict:
    content = [{"type": "text", "text": "Look: "}, {"type": "image_url", "image_url": {"url": image_url}},
               {"type": "text", "text": question}]  # fmt: skip
    return {"model": "default", "messages": [{"role": "user", "content": content}], "max_tokens": 5,
            "temperature": 0, "ignore_eos": True}  # fmt: skip


def test_model_info_says_it_understands_images(served: Served) -> None:
    assert httpx.get(f"{served.url}/get_model_info").json()["has_image_understanding"] is True


@pytest.mark.tp2
def test_native_generate_with_image_data_gives_the_engine_tokens(served: Served) -> None:
    image = picture(1)
    expected = served.engine.generate("About <image>:", GREEDY, image_data=image)["output_ids"]
    body = {"text": "About <image>:", "sampling_params": GREEDY, "image_data": data_url(png(image))}
    response = httpx.post(f"{served.url}/generate", json=body, timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["output_ids"] == expected
    batch = {"text": ["About <image>:", "plain text"], "sampling_params": GREEDY,
             "image_data": [[data_url(png(image))], None]}  # fmt: skip
    results = httpx.post(f"{served.url}/generate", json=batch, timeout=30).json()
    assert results[0]["output_ids"] == expected
    assert results[0]["meta_info"]["cached_tokens"] == results[0]["meta_info"]["prompt_tokens"] - 1


@pytest.mark.tp2
def test_chat_image_url_parts_and_cached_image_tokens(served: Served) -> None:
    url = data_url(png(picture(2)))
    first = httpx.post(f"{served.url}/v1/chat/completions", json=chat_body(url), timeout=30)
    assert first.status_code == 200, first.text
    again = httpx.post(
        f"{served.url}/v1/chat/completions", json=chat_body(url, "Colours?"), timeout=30
    ).json()
    usage = again["usage"]
    # The image's 16 tokens and the text before them come from the cache.
    assert usage["prompt_tokens_details"]["cached_tokens"] >= 16 + 2
    other = httpx.post(
        f"{served.url}/v1/chat/completions", json=chat_body(data_url(png(picture(3)))), timeout=30
    )
    assert other.json()["usage"]["prompt_tokens_details"]["cached_tokens"] < 16


@pytest.mark.parametrize(
    ("source", "flag"),
    [("/etc/hostname", "--allowed-local-media-path"), ("file:///etc/hostname", "--allowed-local-media-path"),
     ("http://127.0.0.1:9/x.png", "--allow-image-urls")],
)  # fmt: skip
def test_paths_and_urls_are_refused_without_the_flag(served: Served, source: str, flag: str) -> None:
    response = httpx.post(f"{served.url}/v1/chat/completions", json=chat_body(source), timeout=30)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "messages[0].content[1].image_url.url"
    assert flag in error["message"]
    native = httpx.post(f"{served.url}/generate", json={"text": "<image>", "image_data": source}, timeout=30)
    assert native.status_code == 400 and native.json()["error"]["param"] == "image_data"


def test_bad_images_are_400s_and_the_server_keeps_serving(served: Served) -> None:
    data = png(picture(4))
    bad = [data_url(data[: len(data) // 2]), data_url(b"not an image at all"), "data:image/png;base64,%%%",
           data_url(png(picture(5, 1200, 1000)))]  # fmt: skip
    for url in bad:
        response = httpx.post(f"{served.url}/v1/chat/completions", json=chat_body(url), timeout=30)
        assert response.status_code == 400, url[:40]
        error = response.json()["error"]
        assert error["param"] == "messages[0].content[1].image_url.url"
        assert "image_data" not in error["message"]
    native = httpx.post(
        f"{served.url}/generate", json={"text": "x <image>", "image_data": data_url(data[:100])}, timeout=30
    )
    assert native.status_code == 400 and native.json()["error"]["param"] == "image_data[0]"
    fine = httpx.post(f"{served.url}/v1/chat/completions", json=chat_body(data_url(data)), timeout=30)
    assert fine.status_code == 200
    served.assert_no_leaks()


@contextlib.contextmanager
def also_served(served: Served, settings: ServerSettings) -> Iterator[Served]:
    """The module's engine behind a second app with other settings (no second engine)."""
    with serve(build_app(served.engine, settings)) as url:
        yield Served(served.engine, url)


def test_paths_inside_the_allowed_directory_and_only_those(served: Served, tmp_path: Path) -> None:
    allowed, elsewhere = tmp_path / "media", tmp_path / "private"
    allowed.mkdir()
    elsewhere.mkdir()
    path = allowed / "picture.png"
    path.write_bytes(png(picture(6)))
    (elsewhere / "secret.png").write_bytes(png(picture(7)))
    (allowed / "escape.png").symlink_to(elsewhere / "secret.png")
    settings = ServerSettings(allowed_local_media_paths=(str(allowed),))
    with also_served(served, settings) as s:
        by_path = httpx.post(f"{s.url}/v1/chat/completions", json=chat_body(str(path)), timeout=30)
        inline = httpx.post(
            f"{s.url}/v1/chat/completions", json=chat_body(data_url(path.read_bytes())), timeout=30
        )
        assert by_path.status_code == 200, by_path.text
        assert by_path.json()["choices"][0]["message"] == inline.json()["choices"][0]["message"]
        native = {"text": "About <image>:", "sampling_params": GREEDY, "image_data": f"file://{path}"}
        by_url = httpx.post(f"{s.url}/generate", json=native, timeout=30)
        assert by_url.status_code == 200, by_url.text
        for source, words in [
            (f"{allowed}/../private/secret.png", "'..'"),
            (str(elsewhere / "secret.png"), "outside"),
            (str(allowed / "escape.png"), "symlink"),
            (f"{allowed}/picture.png\x00.txt", "NUL"),
            (f"file://{allowed}/%2e%2e/private/secret.png", "'..'"),
            (f"{allowed}/%2e%2e/private/secret.png", "percent-encoded"),
            ("media/picture.png", "absolute"),
            (str(allowed / "missing.png"), "cannot read"),
        ]:
            refused = httpx.post(f"{s.url}/v1/chat/completions", json=chat_body(source), timeout=30)
            error = refused.json()["error"]
            assert refused.status_code == 400 and words in error["message"], (source, error)
            assert error["param"] == "messages[0].content[1].image_url.url"
            batch = {"text": ["<image>", "<image>"], "image_data": [data_url(png(picture(1))), [source]]}
            native_refused = httpx.post(f"{s.url}/generate", json=batch, timeout=30)
            assert (
                native_refused.status_code == 400
                and native_refused.json()["error"]["param"] == "image_data[1][0]"
            )
        s.assert_no_leaks()


def test_image_urls_reach_allowed_networks_only(served: Served) -> None:
    """With --allow-image-urls the server fetches the URL itself (here from a server on the
    loopback, which only the allowed network 127.0.0.1/32 lets it reach); a redirect elsewhere
    and any other non-public address are 400s naming the part."""
    image = png(picture(9))

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.startswith("/to?"):
                self.send_response(302)
                self.send_header("location", self.path.removeprefix("/to?"))
                self.send_header("content-length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("content-length", str(len(image)))
            self.end_headers()
            self.wfile.write(image)

        def log_message(self, *args: object) -> None:
            pass

    host = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=host.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{host.server_address[1]}"
    settings = ServerSettings(allow_image_urls=True, allowed_image_url_networks=("127.0.0.1/32",))
    try:
        with also_served(served, settings) as s:
            by_url = httpx.post(f"{s.url}/v1/chat/completions", json=chat_body(f"{base}/p.png"), timeout=30)
            inline = httpx.post(f"{s.url}/v1/chat/completions", json=chat_body(data_url(image)), timeout=30)
            assert by_url.status_code == 200, by_url.text
            assert by_url.json()["choices"][0]["message"] == inline.json()["choices"][0]["message"]
            port = host.server_address[1]
            for source in (f"{base}/to?http://127.0.0.2:{port}/p.png", f"http://[::1]:{port}/p.png",
                           "http://169.254.169.254/latest/meta-data/", f"http://2130706434:{port}/p.png"):  # fmt: skip
                refused = httpx.post(f"{s.url}/v1/chat/completions", json=chat_body(source), timeout=30)
                error = refused.json()["error"]
                assert refused.status_code == 400 and "public addresses only" in error["message"], source
                assert error["param"] == "messages[0].content[1].image_url.url"
            native = {"text": "<image>", "image_data": [f"{base}/to?http://10.0.0.1/p.png"]}
            refused = httpx.post(f"{s.url}/generate", json=native, timeout=30)
            assert refused.status_code == 400 and refused.json()["error"]["param"] == "image_data[0]"
            s.assert_no_leaks()
    finally:
        host.shutdown()
        host.server_close()
        thread.join(30)


def test_a_program_with_images_over_runtime_endpoint(served: Served) -> None:
    import sglr as sgl

    @sgl.function
    def compare(s, first, second):
        s += "A: " + sgl.image(first) + " B: " + sgl.image(second) + " Same?"
        s += sgl.gen("answer", max_tokens=4, temperature=0, ignore_eos=True)
        s += sgl.select("verdict", choices=["yes", "no"])

    state = compare.run(
        first=png(picture(7)), second=png(picture(8)), backend=sgl.RuntimeEndpoint(served.url)
    )
    text = state.text()
    prompt = text[: text.index(state["answer"], text.index("Same?"))]
    expected = served.engine.generate(
        prompt,
        {"max_new_tokens": 4, "temperature": 0, "ignore_eos": True},
        image_data=[picture(7), picture(8)],
    )
    assert state["answer"] == expected["text"]
    assert state["verdict"] in ("yes", "no")


@pytest.mark.tp2
def test_videos_over_generate_and_runtime_endpoint(tmp_path_factory: pytest.TempPathFactory) -> None:
    import sglr as sgl

    path = write_llava_checkpoint(tmp_path_factory.mktemp("video"), seed=6, family="llava_next_video")
    frames = [picture(50 + f) for f in range(3)]
    with served_engine(path, ServerSettings(), debug_invariants=True) as s:
        expected = s.engine.generate("Clip <video>:", GREEDY, video_data=[frames])["output_ids"]
        body = {
            "text": "Clip <video>:",
            "sampling_params": GREEDY,
            "video_data": [[data_url(png(f)) for f in frames]],
        }
        response = httpx.post(f"{s.url}/generate", json=body, timeout=30)
        assert response.status_code == 200, response.text
        assert response.json()["output_ids"] == expected
        refused = dict(body, video_data=[["/etc/hostname"]])
        answer = httpx.post(f"{s.url}/generate", json=refused, timeout=30)
        assert answer.status_code == 400 and answer.json()["error"]["param"] == "video_data[0][0]"

        @sgl.function
        def watch(s, clip):
            s += "Clip " + sgl.video(clip) + ":"
            s += sgl.gen("answer", max_tokens=5, temperature=0, ignore_eos=True)

        state = watch.run(clip=[png(f) for f in frames], backend=sgl.RuntimeEndpoint(s.url))
        assert state["answer"] == s.engine.generate("Clip <video>:", GREEDY, video_data=[frames])["text"]


def test_a_program_with_an_image_over_the_openai_backend(served: Served) -> None:
    import sglr as sgl

    @sgl.function
    def describe(s, image):
        s += sgl.user(sgl.image(image) + "What is it?")
        s += sgl.assistant(sgl.gen("answer", max_tokens=4, temperature=0))

    backend = sgl.OpenAI("default", is_chat_model=True, base_url=f"{served.url}/v1", api_key="none")
    try:
        state = describe.run(image=png(picture(9)), backend=backend)
        answer = state["answer"]
    finally:
        backend.shutdown()
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What is it?"}]}]
    prompt = served.engine.tokenizer.apply_chat_template(messages)
    expected = served.engine.generate(prompt, {"max_new_tokens": 4, "temperature": 0}, image_data=picture(9))[
        "text"
    ]
    assert answer == expected
