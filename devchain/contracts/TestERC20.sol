// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Owned} from "./Base.sol";
import {ERC20} from "./ERC20.sol";

/// @notice Devnet ERC-20 with any number of decimals and OpenZeppelin 5's custom errors. `mint` is
/// an open faucet. The owner can turn on a fee burned on every transfer (a LAT then credits what
/// arrived), and burn any holder's tokens (a negative rebase: a LAT whose holding shrank under its
/// accounting refuses deposits with `AssetBalanceOutOfSync`).
contract TestERC20 is Owned, ERC20 {
    uint256 public transferFeeBps;

    event TransferFeeSet(uint256 feeBps);

    error FeeTooHigh(uint256 feeBps);

    constructor(string memory name_, string memory symbol_, uint8 decimals_) {
        _initERC20(name_, symbol_, decimals_);
        _transferOwnership(msg.sender);
    }

    function mint(address to, uint256 amount) external {
        _mint(to, amount);
    }

    /// @notice Takes `amount` away from `account`, as a negative rebase would.
    function burnFrom(address account, uint256 amount) external onlyOwner {
        _burn(account, amount);
    }

    function setTransferFee(uint256 feeBps) external onlyOwner {
        if (feeBps > 10_000) revert FeeTooHigh(feeBps);
        transferFeeBps = feeBps;
        emit TransferFeeSet(feeBps);
    }

    function _transfer(address from, address to, uint256 value) internal override {
        uint256 fee = (value * transferFeeBps) / 10_000;
        if (fee > 0) _burn(from, fee);
        super._transfer(from, to, value - fee);
    }
}
