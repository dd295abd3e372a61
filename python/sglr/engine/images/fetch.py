"""Fetching an image (or video) by http(s) URL, never to an address the policy refuses.

A server must not become a way into the network behind it: by default (`UrlPolicy()`) a fetch
reaches public addresses only. Loopback, link-local, private, shared, unspecified, multicast and
reserved addresses are refused, IPv4 and IPv6 alike, an IPv4 address inside an IPv6 one
(mapped, 6to4, NAT64, compatible) judged as the IPv4 one, a host in any numeric spelling
(`2130706433`, `0x7f.1`, `0177.0.0.1`) as the address it spells, a name by every address it
resolves to, and each redirect hop like the first. The connection goes to the address that was
checked (no second lookup a rebinding DNS could answer differently), with no proxy. Networks
can be allowed explicitly (`allowed_networks`); the engine as a library trusts its caller
(`allow_any_address`). A refusal is an `UrlNotAllowedError` naming the field.
"""

from __future__ import annotations

import http.client
import ipaddress
import re
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

from sglr.errors import InvalidRequestError, LimitExceededError, UrlNotAllowedError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
_REDIRECTS = (301, 302, 303, 307, 308)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
_HOSTNAME = re.compile(r"[a-z0-9_.-]+")
_NUMERIC_SPELLING = re.compile(r"[0-9a-fx.]+")


def resolve_host(host: str, port: int) -> list[str]:
    return sorted({str(info[4][0]) for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)})


@dataclass(frozen=True)
class UrlPolicy:
    allowed_networks: tuple[IPNetwork, ...] = ()
    allow_any_address: bool = False
    resolve: Callable[[str, int], Sequence[str]] = resolve_host
    max_redirects: int = 5
    timeout_s: float = 10.0  # each connect and read
    deadline_s: float = 30.0  # the whole fetch, redirects included


@dataclass(frozen=True)
class Target:
    """A URL checked against a policy: where to connect and what to ask."""

    scheme: str
    host: str
    port: int
    address: str
    path: str


def address_refusal(address: IPAddress, policy: UrlPolicy) -> str | None:
    """Why `policy` refuses `address` ("a loopback address", ...), or None."""
    if policy.allow_any_address or any(address in network for network in policy.allowed_networks):
        return None
    if isinstance(address, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(address)
        if embedded is not None:
            return address_refusal(embedded, policy)
        if address.is_site_local:
            return "a site-local address"
    for kind in ("loopback", "link_local", "unspecified", "multicast", "reserved", "private"):
        if getattr(address, f"is_{kind}"):
            return f"a {kind.replace('_', '-')} address"
    return None if address.is_global else "a non-public address"


def check_url(url: str, field: str, policy: UrlPolicy, resolve: bool = True) -> Target | None:
    """The checked target of `url`; `resolve=False` checks all but a name's addresses (no
    network: for a refusal before anything is read) and returns None."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise UrlNotAllowedError(f"{field}: not a valid URL: {exc}", param=field) from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise UrlNotAllowedError(
            f"{field}: only http and https URLs are fetched, not {scheme or 'this'}", field
        )
    host = _ascii_host((parts.hostname or "").rstrip("."))
    port = port if port is not None else (443 if scheme == "https" else 80)
    literal = None if "%" in host else _literal_address(host)  # no IPv6 zone ids
    if literal is None and not _HOSTNAME.fullmatch(host):
        raise UrlNotAllowedError(f"{field}: the URL's host is not a host name or an IP address", field)
    if literal is not None:
        addresses: list[IPAddress] = [literal]
    elif not resolve:
        return None
    else:
        try:
            addresses = [ipaddress.ip_address(a.split("%")[0]) for a in policy.resolve(host, port)]
        except (OSError, ValueError, UnicodeError) as exc:
            raise InvalidRequestError(f"{field}: cannot resolve the URL's host: {exc}", param=field) from None
        if not addresses:
            raise InvalidRequestError(f"{field}: the URL's host has no address", param=field)
    for address in addresses:
        refusal = address_refusal(address, policy)
        if refusal is not None:
            spelled = "is" if literal is not None else "resolves to"
            raise UrlNotAllowedError(
                f"{field}: the URL's host {spelled} {refusal}; image URLs reach public addresses only "
                "(allow networks with --allowed-image-url-networks)",
                param=field,
            )
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Target(scheme, host, port, str(addresses[0]), path)


def fetch_url(
    url: str, field: str, policy: UrlPolicy, max_bytes: int, deadline: float | None = None
) -> bytes:
    """The body of `url` (following redirects, each hop checked), at most `max_bytes`, done by
    `deadline` (`time.monotonic()`; default: `policy.deadline_s` from now)."""
    deadline = deadline if deadline is not None else time.monotonic() + policy.deadline_s
    for _ in range(policy.max_redirects + 1):
        if time.monotonic() > deadline:
            raise InvalidRequestError(f"{field}: fetching the URL took too long", field)
        target = check_url(url, field, policy)
        assert target is not None
        try:
            status, location, body = _get(target, policy, max_bytes, field, deadline)
        except InvalidRequestError:
            raise
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise InvalidRequestError(f"{field}: cannot fetch the URL: {exc}", param=field) from None
        if status not in _REDIRECTS:
            if status != 200:
                raise InvalidRequestError(f"{field}: fetching the URL got HTTP {status}", param=field)
            return body
        if location is None:
            raise InvalidRequestError(f"{field}: the URL redirects (HTTP {status}) without a Location", field)
        url = urljoin(url, location)
    raise UrlNotAllowedError(
        f"{field}: the URL redirects more than {policy.max_redirects} times", param=field
    )


def _get(target: Target, policy: UrlPolicy, max_bytes: int, field: str, deadline: float) -> tuple[int, str | None, bytes]:  # fmt: skip
    connection_class: Any = (
        http.client.HTTPSConnection if target.scheme == "https" else http.client.HTTPConnection
    )
    timeout = max(0.01, min(policy.timeout_s, deadline - time.monotonic()))
    connection = connection_class(target.host, target.port, timeout=timeout)
    # To the address checked, under the name asked for (Host header, TLS server name).
    connection._create_connection = lambda _address, timeout, source=None: socket.create_connection(
        (target.address, target.port), timeout
    )
    try:
        connection.request(
            "GET", target.path, headers={"User-Agent": "sglr", "Accept": "image/*, video/*, */*"}
        )
        response = connection.getresponse()
        if response.status in _REDIRECTS:
            return response.status, response.getheader("location"), b""
        declared = response.getheader("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            raise _too_large(field, max_bytes)
        chunks, size = [], 0
        # read1: one socket read at a time, so a server dripping bytes meets the deadline.
        while chunk := response.read1(min(1 << 16, max_bytes + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > max_bytes:
                raise _too_large(field, max_bytes)
            if time.monotonic() > deadline:
                raise InvalidRequestError(f"{field}: fetching the URL took too long", field)
        return response.status, None, b"".join(chunks)
    finally:
        connection.close()


def _too_large(field: str, max_bytes: int) -> LimitExceededError:
    return LimitExceededError(f"{field}: the URL's content is over the limit of {max_bytes} bytes", field, "max_image_bytes")  # fmt: skip


def _ascii_host(host: str) -> str:
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return host  # refused as no host name


def _literal_address(host: str) -> IPAddress | None:
    """The address `host` spells: an IP address, or an IPv4 one in a spelling `inet_aton` (and so
    the resolver) reads as one (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`)."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _NUMERIC_SPELLING.fullmatch(host) and host[:1].isdigit():
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in _NAT64 or (address in _IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None
