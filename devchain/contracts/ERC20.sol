// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ERC20Hooks} from "./Hooks.sol";

/// @notice A plain ERC-20 with OpenZeppelin 5 custom errors. Name, symbol and decimals are
/// storage (not immutables) so that the same code works behind a proxy. `totalSupply`, `_mint`
/// and `_burn` are also the hooks the LAT's shared base calls (Hooks.sol).
abstract contract ERC20 is ERC20Hooks {
    string public name;
    string public symbol;
    uint8 public decimals;
    uint256 private _totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    error ERC20InsufficientBalance(address sender, uint256 balance, uint256 needed);
    error ERC20InsufficientAllowance(address spender, uint256 allowance, uint256 needed);
    error ERC20InvalidSender(address sender);
    error ERC20InvalidReceiver(address receiver);
    error ERC20InvalidSpender(address spender);

    function _initERC20(string memory name_, string memory symbol_, uint8 decimals_) internal {
        name = name_;
        symbol = symbol_;
        decimals = decimals_;
    }

    function totalSupply() public view override returns (uint256) {
        return _totalSupply;
    }

    function transfer(address to, uint256 value) external returns (bool) {
        _transfer(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        if (spender == address(0)) revert ERC20InvalidSpender(address(0));
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        if (allowed != type(uint256).max) {
            if (allowed < value) revert ERC20InsufficientAllowance(msg.sender, allowed, value);
            allowance[from][msg.sender] = allowed - value;
        }
        _transfer(from, to, value);
        return true;
    }

    function _transfer(address from, address to, uint256 value) internal virtual {
        if (from == address(0)) revert ERC20InvalidSender(address(0));
        if (to == address(0)) revert ERC20InvalidReceiver(address(0));
        _update(from, to, value);
    }

    function _mint(address to, uint256 value) internal override {
        if (to == address(0)) revert ERC20InvalidReceiver(address(0));
        _update(address(0), to, value);
    }

    function _burn(address from, uint256 value) internal override {
        _update(from, address(0), value);
    }

    /// @dev Mint when `from` is zero, burn when `to` is zero.
    function _update(address from, address to, uint256 value) internal {
        if (from == address(0)) {
            _totalSupply += value;
        } else {
            uint256 balance = balanceOf[from];
            if (balance < value) revert ERC20InsufficientBalance(from, balance, value);
            balanceOf[from] = balance - value;
        }
        if (to == address(0)) {
            _totalSupply -= value;
        } else {
            balanceOf[to] += value;
        }
        emit Transfer(from, to, value);
    }
}
