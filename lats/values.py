"""Values of the LAT registry, each defined once: the 1e18 scale, the
exchange rate (and the contracts' own integer rounding of it) and token amounts in ETH."""

from __future__ import annotations

import functools
from decimal import Decimal
from typing import Protocol, overload

from core.addresses import is_beacon_chain_eth

WAD = 10**18
WAD_DECIMAL = Decimal(WAD)


# Read-only members (properties), so that frozen dataclasses and models both qualify.
class Supply(Protocol):
    @property
    def total_assets(self) -> Decimal | int: ...
    @property
    def total_supply(self) -> Decimal | int: ...


class Priced(Protocol):
    @property
    def price_per_unit(self) -> Decimal | int: ...
    @property
    def decimals(self) -> int: ...


class Valued(Supply, Protocol):
    @property
    def base_asset(self) -> str: ...
    @property
    def unit_eth_price(self) -> Decimal | int | None: ...


def exchange_rate(total_assets: Decimal | int, total_supply: Decimal | int) -> Decimal:
    """Unit of account per whole LAT, 1e18-scaled (1:1 while the supply is zero)."""
    if not total_supply:
        return WAD_DECIMAL
    return Decimal(total_assets) * WAD_DECIMAL / Decimal(total_supply)


def amount_for_one_lat(lat: Supply, token: Priced) -> Decimal:
    """calculateAmount(token, 1e18) in whole tokens, with the contract's integer rounding."""
    supply, assets = int(lat.total_supply), int(lat.total_assets)
    value = WAD if supply == 0 else WAD * assets // supply
    raw = value * 10**token.decimals // int(token.price_per_unit)
    return Decimal(raw) / Decimal(10) ** token.decimals


def shares_for_one_token(lat: Supply, token: Priced) -> Decimal:
    """calculateShares(token, one whole token) in whole LATs, with the contract's rounding."""
    supply, assets = int(lat.total_supply), int(lat.total_assets)
    value = 10**token.decimals * int(token.price_per_unit) // 10**token.decimals
    raw = value if supply == 0 or assets == 0 else value * supply // assets
    return Decimal(raw) / WAD_DECIMAL


def unit_eth_price(lat: Valued) -> Decimal | None:
    """ETH value of one unit of account, 1e18-scaled; None while unknown (a unit of account
    without a price feed)."""
    if is_beacon_chain_eth(lat.base_asset):
        return WAD_DECIMAL
    return None if lat.unit_eth_price is None else Decimal(lat.unit_eth_price)


@functools.cache
def whole_token(decimals: int) -> Decimal:
    """10 ** decimals: one whole token in its smallest units (exact; made once per decimals)."""
    return Decimal(10) ** decimals


def to_unit(token: Priced, amount: Decimal) -> Decimal:
    """Token units -> the unit of account (whole), through pricePerUnit."""
    return amount * Decimal(token.price_per_unit) / whole_token(token.decimals) / WAD_DECIMAL


def to_eth(lat: Valued, token: Priced, amount: Decimal) -> Decimal | None:
    """Token units -> ETH (whole), through pricePerUnit and the unit's ETH price; None while
    the unit's ETH price is unknown."""
    return eth_at(unit_eth_price(lat), token, amount)


@overload
def eth_at(price: Decimal, token: Priced, amount: Decimal) -> Decimal: ...
@overload
def eth_at(price: Decimal | None, token: Priced, amount: Decimal) -> Decimal | None: ...
def eth_at(price: Decimal | None, token: Priced, amount: Decimal) -> Decimal | None:
    """`to_eth` at the unit's ETH price read already (`unit_eth_price`), for many amounts of
    one LAT."""
    return None if price is None else to_unit(token, amount) * price / WAD_DECIMAL


def lat_balance_eth(lat: Valued, balance: int) -> Decimal | None:
    """A LAT balance (smallest unit) in ETH (whole): to the unit of account at the stored
    totalAssets / totalSupply, then through the unit's ETH price, as the TVL is; None while
    that price is unknown."""
    price = unit_eth_price(lat)
    if price is None:
        return None
    in_unit = Decimal(balance) * exchange_rate(lat.total_assets, lat.total_supply) / WAD_DECIMAL
    return in_unit * price / WAD_DECIMAL / WAD_DECIMAL
