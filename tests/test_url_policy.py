"""The URL policy on IPv6 forms that carry an IPv4 address: each is judged by the IPv4 address
it carries, wherever the policy applies (a per-turn model host, an MCP server, egress)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import cast

import pytest

from storage.unit import Tx
from uhp_server.errors import ApiError
from uhp_server.gateway import url_policy
from uhp_server.gateway.connection import ModelConnection, connection_provider
from uhp_server.gateway.url_policy import UrlRefused, address_refusal, check_config_url, pin_url
from uhp_server.harnesses.mcp import parse_mcp_servers
from uhp_server.harnesses.writes import PendingWrites

LOOPBACK, PRIVATE, LINK_LOCAL, PUBLIC = "127.0.0.1", "10.1.2.3", "169.254.169.254", "8.8.8.8"
PRIVATE_RANGES = ("10.1.2.3", "172.16.0.1", "172.31.255.254", "192.168.1.1")


def _v4(text: str) -> int:
    return int(ipaddress.IPv4Address(text))


def mapped(ipv4: str) -> str:  # ::ffff:0:0/96
    return str(ipaddress.IPv6Address((0xFFFF << 32) | _v4(ipv4)))


def compatible(ipv4: str) -> str:  # ::/96, deprecated
    return str(ipaddress.IPv6Address(_v4(ipv4)))


def translated(ipv4: str) -> str:  # ::ffff:0:0:0/96
    return str(ipaddress.IPv6Address((0xFFFF << 48) | _v4(ipv4)))


def sixtofour(ipv4: str) -> str:  # 2002::/16, the IPv4 in bits 16-47
    return str(ipaddress.IPv6Address((0x2002 << 112) | (_v4(ipv4) << 80)))


def nat64(ipv4: str) -> str:  # 64:ff9b::/96
    return str(ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b::")) | _v4(ipv4)))


def nat64_local_use(ipv4: str) -> str:  # 64:ff9b:1::/48, in its /96 form
    return str(ipaddress.IPv6Address(int(ipaddress.IPv6Address("64:ff9b:1::")) | _v4(ipv4)))


def teredo_client(ipv4: str) -> str:  # 2001::/32: a public server, the client XORed
    server = _v4("65.54.227.120")
    return str(
        ipaddress.IPv6Address((0x20010000 << 96) | (server << 64) | (_v4(ipv4) ^ 0xFFFFFFFF))
    )


def teredo_server(ipv4: str) -> str:  # 2001::/32: the server in bits 32-63, a public client
    client = _v4(PUBLIC) ^ 0xFFFFFFFF
    return str(ipaddress.IPv6Address((0x20010000 << 96) | (_v4(ipv4) << 64) | client))


Form = Callable[[str], str]  # an IPv4 address as one IPv6 form carrying it
FORMS: tuple[Form, ...] = (mapped, compatible, translated, sixtofour, nat64, nat64_local_use)
FORMS += (teredo_client, teredo_server)
WITH_PUBLIC = tuple(form for form in FORMS if form is not nat64_local_use)


def test_the_forms_carry_the_address_they_are_built_from() -> None:
    assert sixtofour(LOOPBACK) == "2002:7f00:1::"
    assert mapped(LOOPBACK) == "::ffff:7f00:1"
    assert ipaddress.IPv6Address(teredo_client(LOOPBACK)).teredo == (
        ipaddress.IPv4Address("65.54.227.120"),
        ipaddress.IPv4Address(LOOPBACK),
    )


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("ipv4", (LOOPBACK, *PRIVATE_RANGES, LINK_LOCAL, "0.0.0.0"))
async def test_an_ipv6_form_carrying_a_loopback_private_or_link_local_ipv4_is_refused(
    form: Form, ipv4: str
) -> None:
    host = form(ipv4)
    url = f"http://[{host}]:8080/v1"
    with pytest.raises(UrlRefused):
        check_config_url(url, allow_private=False)
    with pytest.raises(UrlRefused):
        await pin_url(url, allow_private=False)


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__)
def test_link_local_stays_refused_in_every_form_even_where_private_hosts_are_allowed(
    form: Form,
) -> None:
    address = ipaddress.IPv6Address(form(LINK_LOCAL))
    assert address_refusal(address, allow_private=True) is not None
    assert address_refusal(ipaddress.IPv4Address(LINK_LOCAL), allow_private=True) is not None


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("ipv4", (LOOPBACK, PRIVATE))
def test_private_hosts_allowed_allow_them_in_every_form_as_they_do_plain(
    form: Form, ipv4: str
) -> None:
    address = ipaddress.IPv6Address(form(ipv4))
    assert address_refusal(address, allow_private=True) is None
    assert address_refusal(ipaddress.IPv4Address(ipv4), allow_private=True) is None


@pytest.mark.parametrize("form", WITH_PUBLIC, ids=lambda f: f.__name__)
async def test_a_form_carrying_a_public_ipv4_is_allowed_as_the_plain_address_is(
    form: Form,
) -> None:
    assert address_refusal(ipaddress.IPv4Address(PUBLIC), allow_private=False) is None
    url = f"https://[{form(PUBLIC)}]/v1"
    assert check_config_url(url, allow_private=False) == url
    pinned = await pin_url(url, allow_private=False)
    assert pinned.address == form(PUBLIC)


def test_nat64s_local_use_prefix_is_the_local_networks_own_whatever_it_carries() -> None:
    """64:ff9b:1::/48 is a translator the operator runs (RFC 8215): a private destination."""
    address = ipaddress.IPv6Address(nat64_local_use(PUBLIC))
    assert address_refusal(address, allow_private=False) is not None
    assert address_refusal(address, allow_private=True) is None


def test_plain_ipv6_addresses_keep_their_own_verdict() -> None:
    assert address_refusal(ipaddress.IPv6Address("::1"), allow_private=False) is not None
    assert address_refusal(ipaddress.IPv6Address("::"), allow_private=True) is not None
    assert address_refusal(ipaddress.IPv6Address("fe80::1"), allow_private=True) is not None
    assert address_refusal(ipaddress.IPv6Address("fd00::1"), allow_private=False) is not None
    assert address_refusal(ipaddress.IPv6Address("2606:4700::1111"), allow_private=False) is None


@pytest.mark.parametrize("site_local", ["fec0::1", "feff:ffff::1"])
def test_the_deprecated_site_local_range_is_private(site_local: str) -> None:
    """fec0::/10 (RFC 3879): Python's `is_private` and `is_global` call it global."""
    address = ipaddress.IPv6Address(site_local)
    assert "private" in (address_refusal(address, allow_private=False) or "")
    assert address_refusal(address, allow_private=True) is None
    with pytest.raises(UrlRefused):
        check_config_url(f"https://[{site_local}]/mcp", allow_private=False)


def test_a_per_turn_model_host_in_6to4_form_of_loopback_is_refused() -> None:
    """The red team's reproduction: `[2002:7f00:1::]` as a per-turn connection's host."""
    connection = ModelConnection(base_url="http://[2002:7f00:1::]:8080/v1", model="m", api_key="k")
    with pytest.raises(ApiError) as refused:
        connection_provider(connection, allow_private=False)
    assert refused.value.status == 400 and "private or loopback" in str(refused.value.message)
    assert "UHP_MODEL_CONNECTION_ALLOW_PRIVATE_HOSTS=true" in str(refused.value.message)


def test_an_mcp_server_url_in_a_v4_carrying_form_is_refused_in_harness_config() -> None:
    server = {"name": "docs", "url": f"http://[{teredo_client(PRIVATE)}]/mcp"}
    with pytest.raises(ApiError):
        parse_mcp_servers(
            PendingWrites(cast(Tx, None), "p"), [server], "mcp_servers", None, allow_private=False
        )


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.__name__)
async def test_a_name_resolving_to_a_form_of_loopback_is_refused_at_connect_time(
    form: Form, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What an MCP server's, a model connection's and egress's connections go through."""

    async def resolve(host: str, port: int) -> list[ipaddress.IPv6Address]:
        return [ipaddress.IPv6Address(form(LOOPBACK))]

    monkeypatch.setattr(url_policy, "_resolve", resolve)
    with pytest.raises(UrlRefused):
        await pin_url("https://rebound.example/", allow_private=False)
