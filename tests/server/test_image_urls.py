"""Image URLs (`sglr.engine.images.fetch`): public addresses only unless a network is allowed,
whatever the spelling of the address, the names it hides behind or the redirects it takes.

The refusals need no network: literal addresses are judged from the URL, names through a
resolver the test gives (and `localhost` through the hosts file). The fetches go to a small
HTTP server on 127.0.0.1, which the allowed network 127.0.0.1/32 lets them reach."""

from __future__ import annotations

import dataclasses
import http.server
import ipaddress
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from sglr.engine.images.fetch import UrlPolicy, address_refusal, check_url, fetch_url
from sglr.errors import EngineConfigError, InvalidRequestError, LimitExceededError, UrlNotAllowedError
from sglr.server import ServerSettings
from sglr.server.image_sources import ImageSources, RequestImages

FIELD = "messages[0].content[1].image_url.url"
LOOPBACK_ONLY = UrlPolicy(allowed_networks=(ipaddress.ip_network("127.0.0.1/32"),))
NAMES = {"public.example": ["93.184.216.34"], "internal.example": ["10.0.0.7"],
         "mixed.example": ["93.184.216.34", "10.0.0.7"], "metadata.example": ["fd00:ec2::254"],
         "mapped.example": ["::ffff:169.254.169.254"], "pinned.example": ["127.0.0.1"]}  # fmt: skip


def fake_resolve(host: str, port: int) -> list[str]:
    if host not in NAMES:
        raise OSError(f"no such host {host}")
    return NAMES[host]


FAKE_DNS = UrlPolicy(resolve=fake_resolve)


def refusal(url: str, policy: UrlPolicy = FAKE_DNS, resolve: bool = True) -> str:
    with pytest.raises(UrlNotAllowedError) as caught:
        check_url(url, FIELD, policy, resolve=resolve)
    assert caught.value.param == FIELD
    return caught.value.message


@pytest.mark.parametrize(
    ("address", "kind"),
    [("127.0.0.1", "loopback"), ("127.255.0.9", "loopback"), ("::1", "loopback"), ("10.1.2.3", "private"),
     ("172.16.0.1", "private"), ("192.168.1.1", "private"), ("fc00::1", "private"), ("fd12::1", "private"),
     ("169.254.169.254", "link-local"), ("fe80::1", "link-local"), ("0.0.0.0", "unspecified"),
     ("::", "unspecified"), ("100.64.0.1", "non-public"), ("224.0.0.1", "multicast"), ("ff02::1", "multicast"),
     ("255.255.255.255", "reserved"), ("240.0.0.1", "reserved"), ("fec0::1", "site-local"),
     ("::ffff:127.0.0.1", "loopback"), ("::ffff:10.0.0.1", "private"), ("2002:7f00:1::", "loopback"),
     ("64:ff9b::a9fe:a9fe", "link-local"), ("::7f00:1", "loopback"), ("2001::1", "private")],
)  # fmt: skip
def test_non_public_addresses_are_refused(address: str, kind: str) -> None:
    assert address_refusal(ipaddress.ip_address(address), UrlPolicy()) == f"a {kind} address"
    # An explicitly allowed network lets exactly its addresses through.
    network = ipaddress.ip_network(f"{address}/{'32' if ':' not in address else '128'}")
    assert address_refusal(ipaddress.ip_address(address), UrlPolicy(allowed_networks=(network,))) is None
    assert address_refusal(ipaddress.ip_address(address), UrlPolicy(allow_any_address=True)) is None


def test_public_addresses_pass() -> None:
    for address in ("93.184.216.34", "8.8.8.8", "2606:4700::1111", "::ffff:8.8.8.8", "2002:808:808::"):
        assert address_refusal(ipaddress.ip_address(address), UrlPolicy()) is None, address
    target = check_url("https://public.example/a/b.png?x=1", FIELD, UrlPolicy(resolve=fake_resolve))
    assert target is not None
    assert (target.host, target.port, target.address, target.path) == ("public.example", 443, "93.184.216.34", "/a/b.png?x=1")  # fmt: skip


@pytest.mark.parametrize(
    "url",
    ["http://127.0.0.1/x.png", "http://2130706433/x.png", "http://0x7f000001/x.png", "http://0177.0.0.1/x.png",
     "http://127.1/x.png", "http://0x7f.1/x.png", "http://017700000001/", "http://[::ffff:127.0.0.1]/",
     "http://[::ffff:7f00:1]:8080/", "http://[2002:7f00:1::]/", "http://[64:ff9b::a9fe:a9fe]/latest/meta-data",
     "http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/", "http://[fc00::1]/", "http://0.0.0.0/",
     "http://0/", "http://[::]/", "http://user:secret@127.0.0.1/x.png", "HTTP://LOCALHOST.localdomain.invalid@10.0.0.1/"],
)  # fmt: skip
def test_literal_addresses_in_any_spelling_are_refused_from_the_url_alone(url: str) -> None:
    assert "image URLs reach public addresses only" in refusal(url, resolve=False)


def test_names_are_judged_by_every_address_they_resolve_to() -> None:
    for name in ("internal.example", "mixed.example", "metadata.example", "mapped.example"):
        assert "resolves to a" in refusal(f"http://{name}/x.png"), name
    assert (
        check_url("http://internal.example/", FIELD, UrlPolicy(resolve=fake_resolve), resolve=False) is None
    )
    assert "resolves to a loopback address" in refusal(
        "http://localhost/x.png", UrlPolicy()
    )  # the hosts file
    with pytest.raises(InvalidRequestError, match="cannot resolve"):
        check_url("http://nowhere.example/", FIELD, UrlPolicy(resolve=fake_resolve))


def test_other_schemes_and_odd_hosts_are_refused() -> None:
    for url, words in [("ftp://public.example/x.png", "only http and https"), ("gopher://x/", "only http"),
                       ("http://[fe80::1%25eth0]/", "not a host name"), ("http://a b/", "not a host name"),
                       ("http://public.example:99999/", "not a valid URL"), ("http:///x.png", "not a host name")]:  # fmt: skip
        assert words in refusal(url), url


@dataclass
class ImageHost:
    """An HTTP server on 127.0.0.1: /img.png, /to?<url> (a redirect), /loop, /big, /drip, /missing."""

    body: bytes
    paths: list[str] = field(default_factory=list)
    hosts: list[str] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def image_host() -> Iterator[ImageHost]:
    host = ImageHost(b"\x89PNG fake image bytes" * 10)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            host.paths.append(self.path)
            host.hosts.append(self.headers["host"])
            path, _, query = self.path.partition("?")
            if path in ("/to", "/loop"):
                self.send_response(302)
                self.send_header("location", query if path == "/to" else "/loop")
                self.send_header("content-length", "0")
                self.end_headers()
            elif path == "/drip":  # a byte at a time, for longer than any test's deadline
                self.send_response(200)
                self.send_header("content-length", "40")
                self.end_headers()
                try:
                    for _ in range(40):
                        self.wfile.write(b"x")
                        self.wfile.flush()
                        time.sleep(0.05)
                except ConnectionError:  # the fetch gave up, as it should
                    pass
            elif path in ("/img.png", "/big"):
                body = host.body if path == "/img.png" else b"x" * 5000
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self.send_error(404)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    host.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield host
    finally:
        server.shutdown()
        server.server_close()
        thread.join(30)


def test_an_allowed_network_is_fetched_and_its_redirects_checked(image_host: ImageHost) -> None:
    base = image_host.url
    assert fetch_url(f"{base}/img.png", FIELD, LOOPBACK_ONLY, 1000) == image_host.body
    assert fetch_url(f"{base}/to?/img.png", FIELD, LOOPBACK_ONLY, 1000) == image_host.body
    assert image_host.paths == ["/img.png", "/to?/img.png", "/img.png"]
    port = base.rsplit(":", 1)[1]
    for target in (f"http://127.0.0.2:{port}/img.png", f"http://[::1]:{port}/img.png",
                   "http://169.254.169.254/latest/meta-data/", "file:///etc/passwd"):  # fmt: skip
        del image_host.paths[:]
        with pytest.raises(UrlNotAllowedError) as caught:
            fetch_url(f"{base}/to?{target}", FIELD, LOOPBACK_ONLY, 1000)
        assert caught.value.param == FIELD
        assert image_host.paths == [f"/to?{target}"], target  # the hop was refused, not fetched
    with pytest.raises(UrlNotAllowedError, match="redirects more than 5 times"):
        fetch_url(f"{base}/loop", FIELD, LOOPBACK_ONLY, 1000)


def test_without_an_allowed_network_loopback_is_never_contacted(image_host: ImageHost) -> None:
    with pytest.raises(UrlNotAllowedError, match="a loopback address"):
        fetch_url(f"{image_host.url}/img.png", FIELD, UrlPolicy(), 1000)
    assert image_host.paths == []


def test_the_connection_goes_to_the_checked_address_under_the_name(image_host: ImageHost) -> None:
    port = image_host.url.rsplit(":", 1)[1]
    policy = UrlPolicy(allowed_networks=LOOPBACK_ONLY.allowed_networks, resolve=fake_resolve)
    assert fetch_url(f"http://pinned.example:{port}/img.png", FIELD, policy, 1000) == image_host.body
    assert image_host.hosts == [f"pinned.example:{port}"]


def test_sizes_and_statuses(image_host: ImageHost) -> None:
    with pytest.raises(LimitExceededError) as caught:
        fetch_url(f"{image_host.url}/big", FIELD, LOOPBACK_ONLY, 4096)
    assert (caught.value.param, caught.value.limit) == (FIELD, "max_image_bytes")
    assert len(fetch_url(f"{image_host.url}/big", FIELD, LOOPBACK_ONLY, 5000)) == 5000
    with pytest.raises(InvalidRequestError, match="HTTP 404"):
        fetch_url(f"{image_host.url}/missing", FIELD, LOOPBACK_ONLY, 1000)
    hurried = dataclasses.replace(LOOPBACK_ONLY, deadline_s=0.2)  # the drip lasts 2 s
    with pytest.raises(InvalidRequestError, match="took too long"):
        fetch_url(f"{image_host.url}/drip", FIELD, hurried, 1000)


def test_a_request_names_a_bounded_number_of_sources() -> None:
    sources = ImageSources(url_policy=UrlPolicy(), max_images=3)
    images = RequestImages(sources)
    images.check_data(["https://public.example/a.png"] * 3, False)
    with pytest.raises(LimitExceededError, match="at most 3 paths and URLs") as caught:
        RequestImages(sources).check_data([["https://public.example/a.png"] * 2] * 2, True)
    assert caught.value.param == "image_data[1][1]"
    inline = RequestImages(sources)
    inline.check_data([["data:image/png;base64,AAAA"] * 3] * 4, True)  # inline ones cost no read
    assert inline.named == []


def test_server_settings_for_image_urls() -> None:
    assert ServerSettings().image_url_policy is None
    policy = ServerSettings(
        allow_image_urls=True, allowed_image_url_networks=("10.0.0.0/8",)
    ).image_url_policy
    assert policy is not None and policy.allowed_networks == (ipaddress.ip_network("10.0.0.0/8"),)
    assert ServerSettings(allow_image_urls=True).image_url_policy == UrlPolicy()
    with pytest.raises(EngineConfigError, match="needs allow_image_urls"):
        ServerSettings(allowed_image_url_networks=("10.0.0.0/8",))
    with pytest.raises(EngineConfigError, match="allowed_image_url_networks"):
        ServerSettings(allow_image_urls=True, allowed_image_url_networks=("not a network",))
