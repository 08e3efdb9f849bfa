// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Owned} from "./Base.sol";

/// @notice A Chainlink-style AggregatorV3Interface feed whose answer the owner sets.
contract PriceFeed is Owned {
    uint8 public immutable decimals;
    string public description;
    uint256 public constant version = 4;

    uint80 private _roundId;
    int256 private _answer;
    uint256 private _updatedAt;

    event AnswerUpdated(int256 indexed current, uint256 indexed roundId, uint256 updatedAt);

    constructor(uint8 decimals_, string memory description_, int256 answer) {
        decimals = decimals_;
        description = description_;
        _transferOwnership(msg.sender);
        _setAnswer(answer);
    }

    function setAnswer(int256 answer) external onlyOwner {
        _setAnswer(answer);
    }

    function latestAnswer() external view returns (int256) {
        return _answer;
    }

    function latestRoundData()
        external
        view
        returns (uint80 roundId, int256 answer, uint256 startedAt, uint256 updatedAt, uint80 answeredInRound)
    {
        return (_roundId, _answer, _updatedAt, _updatedAt, _roundId);
    }

    function _setAnswer(int256 answer) private {
        _roundId += 1;
        _answer = answer;
        _updatedAt = block.timestamp;
        emit AnswerUpdated(answer, _roundId, block.timestamp);
    }
}
