// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

interface IToken { // the LAT's functions, and the asset's approve
    function deposit(address[] calldata, uint256[] calldata, address)
        external
        returns (uint256[] memory);
    function transfer(address to, uint256 value) external returns (bool);
    function burn(uint256 value) external;
    function approve(address spender, uint256 value) external returns (bool);
}

/// @notice Emits a LAT's events in bulk for bench/sections/activity.py: holds the deposited asset
/// (minted to it beforehand) and its own LAT.
contract ActivityBatch {
    IToken public immutable lat;
    address public immutable asset;

    constructor(IToken lat_, address asset_) {
        lat = lat_;
        asset = asset_;
        IToken(asset_).approve(address(lat_), type(uint256).max);
    }

    /// @notice `deposits` deposits to holders of a pool of `pool` addresses, one to itself, then
    /// `transfers` transfers of its LAT to holders of the pool and `burns` burns of it.
    function run(uint256 seed, uint256 pool, uint256 amount, uint256 deposits, uint256 transfers, uint256 burns)
        external
    {
        address[] memory assets = new address[](1);
        uint256[] memory amounts = new uint256[](1);
        (assets[0], amounts[0]) = (asset, amount);
        for (uint256 i = 0; i < deposits; i++) {
            lat.deposit(assets, amounts, holder(seed, i, pool));
        }
        amounts[0] = amount * (transfers + burns + 1);
        uint256 each = lat.deposit(assets, amounts, address(this))[0] / (transfers + burns + 1);
        for (uint256 i = 0; i < transfers; i++) {
            lat.transfer(holder(seed, deposits + i, pool), each - (i % 7));
        }
        for (uint256 i = 0; i < burns; i++) {
            lat.burn(each);
        }
    }

    function holder(uint256 seed, uint256 i, uint256 pool) public pure returns (address) {
        uint256 k = uint256(keccak256(abi.encode(seed, i))) % pool;
        return address(uint160(uint256(keccak256(abi.encode("bench-holder", k)))));
    }
}
