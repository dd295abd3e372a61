"""The README stays short and the docs stay connected: README.md is at most 8 KB, every docs
page can be reached from it by links, and every relative link in README.md and docs/ names a file that exists
(and, into a markdown page, a heading that exists)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
MAX_README_BYTES = 8 * 1024

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def _prose(text: str) -> str:
    """The text outside code blocks and inline code, where links are links."""
    return _INLINE_CODE.sub("", _FENCE.sub("", text))


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    anchors: set[str] = set()
    for heading in _HEADING.findall(_FENCE.sub("", page.read_text(encoding="utf-8"))):
        slug = base = _slug(heading)
        count = 0
        while slug in anchors:  # repeated headings get -1, -2, ...
            count += 1
            slug = f"{base}-{count}"
        anchors.add(slug)
    return anchors


def _relative_links(page: Path) -> list[str]:
    links = _LINK.findall(_prose(page.read_text(encoding="utf-8")))
    return [link for link in links if not re.match(r"[a-z][a-z0-9+.-]*:", link)]


def test_readme_is_at_most_8_kb():
    size = len(README.read_bytes())
    assert size <= MAX_README_BYTES, f"README.md is {size} bytes; move reference text to docs/"


def _linked_pages(page: Path) -> set[Path]:
    targets = {(page.parent / link.partition("#")[0]).resolve() for link in _relative_links(page)}
    return {target for target in targets if target.suffix == ".md" and target.is_file()}


def test_every_docs_page_is_reachable_from_the_readme():
    reached, frontier = {README.resolve()}, [README.resolve()]
    while frontier:
        for target in _linked_pages(frontier.pop()) - reached:
            reached.add(target)
            frontier.append(target)
    unreached = [page.name for page in PAGES if page.resolve() not in reached]
    assert not unreached, f"docs pages no link from the README leads to: {unreached}"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_relative_links_resolve(page):
    broken = []
    for link in _relative_links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{link} (no such file)")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
            broken.append(f"{link} (no heading #{anchor} in {target.name})")
    assert not broken, f"{page.relative_to(ROOT)}: broken links: {broken}"
