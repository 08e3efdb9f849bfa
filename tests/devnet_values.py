"""Values of the demo devnet (devchain.devnet.DEMO_LATS) worked out by hand from its scripted
history, for the tests that deposit into it: amounts, prices, strategy rates and slashing."""

from __future__ import annotations

WAD = 10**18
STETH_RATE = 105 * 10**16  # stETH strategy: 1 share = 1.05 stETH
CBETH_RATE = 102 * 10**16  # cbETH strategy: 1 share = 1.02 cbETH
STETH_PRICE = 999 * 10**15  # latETH's stETH after the oracle's update
CBETH_PRICE = 109 * 10**16  # latETH's cbETH after the manager's update

# latETH, per token: unstaked + queued + staked net of slashing, in token units. stETH: 15
# deposited, 8 staked to node 0 and 4 to node 1 (operator 5, slashed by 10 %), 1 queued; cbETH:
# 23 + 2 deposited, 10 staked to node 0. Strategy shares round down, and so does their value.
ETH_STETH_TOTAL = (
    3 * WAD
    + 7_619_047_619_047_619_047 * STETH_RATE // WAD  # node 0: 8e18 / 1.05 shares
    + 3_428_571_428_571_428_570 * STETH_RATE // WAD  # node 1: 90 % of 4e18 / 1.05 shares
)
ETH_CBETH_TOTAL = 15 * 10**6 + 9_803_921 * CBETH_RATE // WAD  # node 0: 10e6 / 1.02 shares
ETH_TOTAL_ASSETS = ETH_STETH_TOTAL * STETH_PRICE // WAD + ETH_CBETH_TOTAL * CBETH_PRICE // 10**6
# Shares were minted 1:1 with the value until staking (10 + 21.6 + 5 + 3.24), then 2 cbETH at
# the diluted rate.
_SUPPLY_BEFORE_LATE = 39_840_000_000_000_000_000
ETH_SUPPLY = _SUPPLY_BEFORE_LATE + 2 * CBETH_PRICE * _SUPPLY_BEFORE_LATE // (
    ETH_TOTAL_ASSETS - 2 * CBETH_PRICE
)


def eth_total_assets(*, steth_price: int = STETH_PRICE, cbeth_price: int = CBETH_PRICE) -> int:
    """latETH's totalAssets with these prices (1e18-scaled, in ETH)."""
    return ETH_STETH_TOTAL * steth_price // WAD + ETH_CBETH_TOTAL * cbeth_price // 10**6


# EigenLayer operators' delegated shares (DelegationManager.operatorShares), by hand: the LATs'
# nodes and the stakers outside the LATs (devchain.devnet.OUTSIDE_STAKERS), each deposit's
# shares rounded down on its own. ORB, WBTC and tBTC are the LATs' only.
STETH_SHARES_8 = 8 * WAD * WAD // STETH_RATE  # latETH node 0 (operator 4)
STETH_SHARES_4 = 4 * WAD * WAD // STETH_RATE  # latETH node 1 (operator 5, slashed by 10 %)
CBETH_SHARES_10 = 10 * 10**6 * WAD // CBETH_RATE  # latETH node 0 (operator 4)
OUTSIDE_STETH = {22: 40, 23: 25, 24: 50, 25: 100}  # staker -> whole stETH deposited
OUTSIDE_CBETH = {22: 20, 24: 30}  # staker -> whole cbETH deposited
OPERATOR_STETH_SHARES = {
    4: STETH_SHARES_8 + 40 * WAD * WAD // STETH_RATE,  # node 0 + staker 22
    5: STETH_SHARES_4 * 9 // 10,  # node 1, net of the slashing
    6: 25 * WAD * WAD // STETH_RATE,  # staker 23
    20: 50 * WAD * WAD // STETH_RATE,  # staker 24
    21: 100 * WAD * WAD // STETH_RATE,  # staker 25
}
OPERATOR_CBETH_SHARES = {
    4: CBETH_SHARES_10 + 20 * 10**6 * WAD // CBETH_RATE,  # node 0 + staker 22
    5: 0,
    6: 0,
    20: 30 * 10**6 * WAD // CBETH_RATE,  # staker 24
    21: 0,
}
