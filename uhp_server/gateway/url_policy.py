"""Which MCP server URLs this server will connect to, at configuration time and at run time.

An MCP server URL comes from a client, and the server connects to it with credentials the
client cannot see: unchecked, that is an SSRF proxy into the server's own network. The rule:

- only `http` and `https`, with a host, no user:password part, at most MAX_URL_LENGTH;
- never an address on a link-local network (169.254.0.0/16, fe80::/10: cloud metadata lives
  there), nor an unspecified, multicast or reserved one;
- never a private or loopback address (10/8, 172.16/12, 192.168/16, 127/8, ::1, fc00::/7,
  the deprecated site-local fec0::/10 — which Python's `ipaddress` calls global —,
  `localhost`…) unless UHP_MCP_ALLOW_PRIVATE_HOSTS=true, for a server on the same network;
- an IPv6 address that carries an IPv4 one (IPv4-mapped, -compatible and -translated, 6to4,
  NAT64, Teredo: a relay or translator on the path delivers it to that IPv4 address) is
  judged by the IPv4 addresses it carries, every one of them: `[2002:7f00:1::]` is 127.0.0.1.

At configuration time a literal IP or `localhost` is checked; a DNS name is only checked at
run time, because what it resolves to can change. At run time every address the name
resolves to must pass, and the connection is pinned to the address that was checked, so a
second lookup (DNS rebinding) cannot swap in another.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

MAX_URL_LENGTH = 2048
_SCHEMES = ("http", "https")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class UrlRefused(ValueError):
    """The URL breaks the policy. The message is safe for a client: no address in it."""


class PrivateAddress(UrlRefused):
    """Refused only because the address is private or loopback, which a setting of the
    server's allows (each kind of URL has its own): `naming` says which."""

    def naming(self, setting: str) -> str:
        return f"{self} The server allows such addresses only with {setting}=true."


# The settings that let each kind of URL reach private and loopback addresses.
MCP_SETTING = "UHP_MCP_ALLOW_PRIVATE_HOSTS"
MODEL_CONNECTION_SETTING = "UHP_MODEL_CONNECTION_ALLOW_PRIVATE_HOSTS"
EGRESS_SETTING = "UHP_EGRESS_ALLOW_PRIVATE_HOSTS"
PRIVATE = "The URL points at a private or loopback address."


def refusal(exc: UrlRefused, setting: str) -> str:
    """The refusal's sentence, naming `setting` when that setting would allow the URL."""
    return exc.naming(setting) if isinstance(exc, PrivateAddress) else str(exc)


def _refused(reason: str) -> UrlRefused:
    return PrivateAddress(reason) if reason == PRIVATE else UrlRefused(reason)


class CredentialsInUrl(UrlRefused):
    """A user:password part in the URL. Where the credential goes instead depends on what
    the URL is for (an MCP server's `auth`, a providers file's `api_key_env`): the caller
    that knows says so (`where_instead`)."""

    def where_instead(self, fields: str) -> str:
        return f"Credentials in the URL are not allowed; use {fields}."


class HostNotResolved(UrlRefused):
    """The URL's host name has no address: nothing to check, and nothing to connect to. A
    caller that tells a person why a server was not reached says this, not "refused"."""


@dataclass(frozen=True)
class PinnedUrl:
    """A checked URL and the address to connect to instead of resolving its host again."""

    url: str  # the URL as configured
    host: str  # its host name, for the Host header and TLS (SNI and certificate checks)
    address: str  # the checked IP address to connect to
    connect_url: str  # url with the host replaced by address

    @property
    def host_header(self) -> str:
        """The Host header the URL asks for: its host (an IPv6 one in brackets) and port."""
        port = urlsplit(self.url).port
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{port}" if port else host


def parse_url(url: str) -> SplitResult:
    """The URL's parts, when its shape is acceptable (scheme, host, no credentials)."""
    if not isinstance(url, str) or not url.strip():
        raise UrlRefused("The URL is empty.")
    if len(url) > MAX_URL_LENGTH:
        raise UrlRefused(f"The URL is longer than {MAX_URL_LENGTH} characters.")
    if any(ch.isspace() or ord(ch) < 0x20 for ch in url):
        raise UrlRefused("The URL contains whitespace or control characters.")
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a malformed port
    except ValueError:
        raise UrlRefused("The URL is malformed.") from None
    if parts.scheme.lower() not in _SCHEMES:
        raise UrlRefused("Only http and https URLs are allowed.")
    if not parts.hostname:
        raise UrlRefused("The URL has no host.")
    if parts.username is not None or parts.password is not None:
        raise CredentialsInUrl("Credentials in the URL are not allowed.")
    if _literal_ip(parts.hostname) is None and not _is_host_name(parts.hostname):
        raise UrlRefused("The URL's host is not a valid host name.")
    return parts


def _is_host_name(host: str) -> bool:
    """Whether DNS could be asked for `host`: labels of 1 to 63 characters once encoded (an
    empty or longer one is what the resolver's IDNA encoding refuses), 253 in all."""
    try:
        encoded = host.rstrip(".").encode("idna")
    except UnicodeError:
        return False
    return 0 < len(encoded) <= 253


def _literal_ip(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


# IPv6 prefixes whose last 32 bits are an IPv4 address (the others have properties of their
# own in `ipaddress`): NAT64's well-known prefix (RFC 6052) and local-use one (RFC 8215, in its
# /96 form), IPv4-translated (RFC 2765) and the deprecated IPv4-compatible (RFC 4291).
_NAT64_WELL_KNOWN = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL_USE = ipaddress.IPv6Network("64:ff9b:1::/48")
_IPV4_TRANSLATED = ipaddress.IPv6Network("::ffff:0:0:0/96")
_IPV4_COMPATIBLE = ipaddress.IPv6Network("::/96")
# Deprecated (RFC 3879) but still routed inside some sites; `is_private` says no.
_SITE_LOCAL = ipaddress.IPv6Network("fec0::/10")


def embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """Every IPv4 address an IPv6 transition form carries, which is where a packet to it may
    be delivered; () for any other IPv6 address. Teredo carries two: its server's, and its
    client's (stored XORed with 0xffffffff; `teredo` undoes that)."""
    if address.ipv4_mapped is not None:
        return (address.ipv4_mapped,)
    if address.sixtofour is not None:
        return (address.sixtofour,)
    if address.teredo is not None:
        return address.teredo
    last_32_bits = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if any(address in prefix for prefix in (_NAT64_WELL_KNOWN, _NAT64_LOCAL_USE)):
        return (last_32_bits,)
    if address in _IPV4_TRANSLATED:
        return (last_32_bits,)
    if address in _IPV4_COMPATIBLE and not (address.is_unspecified or address.is_loopback):
        return (last_32_bits,)
    return ()


def address_refusal(address: IPAddress, allow_private: bool) -> str | None:
    """Why connecting to `address` is refused, or None when it is allowed."""
    if isinstance(address, ipaddress.IPv6Address) and (carried := embedded_ipv4(address)):
        if address in _NAT64_LOCAL_USE and not allow_private:
            # A translator of the local network's own, whatever it is given to reach.
            return PRIVATE
        reasons = (address_refusal(ipv4, allow_private) for ipv4 in carried)
        return next((reason for reason in reasons if reason), None)
    if address.is_link_local or address.is_unspecified or address.is_multicast:
        return "The URL points at a link-local, unspecified or multicast address."
    site_local = isinstance(address, ipaddress.IPv6Address) and address in _SITE_LOCAL
    if address.is_loopback or address.is_private or site_local:
        if allow_private:
            return None
        return PRIVATE
    if address.is_reserved or not address.is_global:
        return "The URL points at a reserved address."
    return None


def _is_localhost(host: str) -> bool:
    host = host.lower().rstrip(".")
    return host == "localhost" or host.endswith(".localhost")


def check_config_url(url: str, allow_private: bool) -> str:
    """The URL as stored, when it passes the configuration-time checks; else UrlRefused."""
    parts = parse_url(url)
    host = parts.hostname or ""
    literal = _literal_ip(host)
    if literal is not None:
        reason = address_refusal(literal, allow_private)
        if reason:
            raise _refused(reason)
    elif _is_localhost(host) and not allow_private:
        raise PrivateAddress(PRIVATE)
    return url


async def _resolve(host: str, port: int) -> list[IPAddress]:
    loop = asyncio.get_running_loop()
    try:
        infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):  # UnicodeError: a name IDNA cannot encode
        raise HostNotResolved("The host name could not be resolved.") from None
    found: list[IPAddress] = []
    for info in infos:
        address = _literal_ip(str(info[4][0]))
        if address is not None and address not in found:
            found.append(address)
    if not found:
        raise HostNotResolved("The host name could not be resolved.")
    return found


def _with_host(parts: SplitResult, address: IPAddress) -> str:
    host = f"[{address}]" if address.version == 6 else str(address)
    netloc = f"{host}:{parts.port}" if parts.port is not None else host
    return parts._replace(netloc=netloc).geturl()


async def pin_url(url: str, allow_private: bool) -> PinnedUrl:
    """Resolve the URL's host and check every address it has; UrlRefused when any fails."""
    parts = parse_url(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    literal = _literal_ip(host)
    addresses = [literal] if literal is not None else await _resolve(host, port)
    for address in addresses:
        reason = address_refusal(address, allow_private)
        if reason:
            raise _refused(reason)
    chosen = addresses[0]
    return PinnedUrl(url=url, host=host, address=str(chosen), connect_url=_with_host(parts, chosen))
