"""`sglr.confined_paths`: the one check of every file path a request names. Inside the allowed
roots only, whatever the spelling (`..`, absolute elsewhere, symlinks out, NUL bytes, encoded
separators, file URLs), each refusal a `PathNotAllowedError` naming the field; reads take
regular files only, bounded, and check the opened file again."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import sglr.confined_paths
from sglr.confined_paths import allowed_roots, confine_path, read_confined_file
from sglr.errors import EngineConfigError, InvalidRequestError, LimitExceededError, PathNotAllowedError

FIELD = "image_data[0]"


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """root/ (allowed) with a file, a subdirectory, links in and out; outside/ with a secret."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "sub").mkdir(parents=True)
    outside.mkdir()
    (root / "a.png").write_bytes(b"inside")
    (root / "sub" / "b c.png").write_bytes(b"spaced")
    (outside / "secret.png").write_bytes(b"secret")
    (root / "link_in.png").symlink_to(root / "a.png")
    (root / "link_out.png").symlink_to(outside / "secret.png")
    (root / "dir_out").symlink_to(outside)
    return {"root": root, "outside": outside, "tmp": tmp_path}


def refusal(value: object, roots: tuple[Path, ...]) -> str:
    with pytest.raises(PathNotAllowedError) as caught:
        confine_path(value, FIELD, roots)
    assert caught.value.param == FIELD
    return caught.value.message


def test_paths_inside_the_roots_resolve_to_their_real_path(tree: dict[str, Path]) -> None:
    roots = allowed_roots([tree["root"]])
    real_root = roots[0]
    assert confine_path(str(tree["root"] / "a.png"), FIELD, roots) == real_root / "a.png"
    assert confine_path(f"{tree['root']}/./sub//b c.png", FIELD, roots) == real_root / "sub" / "b c.png"
    assert confine_path(f"file://{tree['root']}/sub/b%20c.png", FIELD, roots) == real_root / "sub" / "b c.png"
    assert confine_path(f"file://localhost{tree['root']}/a.png", FIELD, roots) == real_root / "a.png"
    assert confine_path(str(tree["root"] / "link_in.png"), FIELD, roots) == real_root / "a.png"
    assert confine_path(str(tree["root"] / "missing.png"), FIELD, roots) == real_root / "missing.png"


def test_every_way_out_is_refused(tree: dict[str, Path]) -> None:
    roots = allowed_roots([tree["root"]])
    root, outside = tree["root"], tree["outside"]
    cases = {
        f"{root}/../outside/secret.png": "'..'",
        f"{root}/sub/../../outside/secret.png": "'..'",
        str(outside / "secret.png"): "lies outside",
        "/etc/passwd": "lies outside",
        str(tree["tmp"]): "lies outside",
        str(root / "link_out.png"): "symlink",
        str(root / "dir_out" / "secret.png"): "symlink",
        f"{root}/a.png\x00.txt": "NUL",
        f"file://{root}/a.png%00": "NUL",
        f"{root}/%2e%2e/outside/secret.png": "percent-encoded",
        f"{root}/%2E%2E%2Foutside%2Fsecret.png": "percent-encoded",
        f"{root}/..%5coutside": "percent-encoded",
        f"file://{root}/%2e%2e/outside/secret.png": "'..'",
        f"file://{root}/%252e%252e/outside/secret.png": "percent-encoded",
        f"file://evil.example{root}/a.png": "local absolute path",
        "file://": "local absolute path",
        "a.png": "absolute",
        "../outside/secret.png": "absolute",
        "~/a.png": "absolute",
        "": "absolute",
    }
    for value, words in cases.items():
        assert words in refusal(value, roots), value
    assert "must be a path string" in refusal(42, roots)
    assert "reads no local files" in refusal(str(root / "a.png"), ())


def test_roots_must_be_existing_directories(tree: dict[str, Path]) -> None:
    assert allowed_roots([str(tree["root"] / "dir_out")]) == (Path(os.path.realpath(tree["outside"])),)
    for bad in (tree["root"] / "missing", tree["root"] / "a.png"):
        with pytest.raises(EngineConfigError):
            allowed_roots([bad])


def test_reads_take_regular_files_within_the_size_limit(tree: dict[str, Path]) -> None:
    roots = allowed_roots([tree["root"]])
    root = tree["root"]
    assert read_confined_file(str(root / "link_in.png"), FIELD, roots, 100, "max_image_bytes") == b"inside"
    with pytest.raises(LimitExceededError) as caught:
        read_confined_file(str(root / "a.png"), FIELD, roots, 5, "max_image_bytes")
    assert (caught.value.param, caught.value.limit) == (FIELD, "max_image_bytes")
    os.mkfifo(root / "fifo.png")  # opening it for reading would block without O_NONBLOCK
    for not_regular in (root / "fifo.png", root / "sub"):
        with pytest.raises(PathNotAllowedError, match="not a regular file"):
            read_confined_file(str(not_regular), FIELD, roots, 100, "max_image_bytes")
    with pytest.raises(InvalidRequestError, match="cannot read the file") as missing:
        read_confined_file(str(root / "missing.png"), FIELD, roots, 100, "max_image_bytes")
    assert missing.value.param == FIELD
    with pytest.raises(PathNotAllowedError, match="symlink"):
        read_confined_file(str(root / "link_out.png"), FIELD, roots, 100, "max_image_bytes")


def test_the_opened_file_is_checked_again(tree: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A path that passed the check but leads out by the time it is opened (a directory swapped
    for a symlink in between) is refused from where the kernel says the open file is."""
    roots = allowed_roots([tree["root"]])
    swapped = Path(os.path.realpath(tree["outside"] / "secret.png"))
    monkeypatch.setattr(sglr.confined_paths, "confine_path", lambda value, field, roots: swapped)
    with pytest.raises(PathNotAllowedError, match="outside"):
        read_confined_file(str(tree["root"] / "a.png"), FIELD, roots, 100, "max_image_bytes")
