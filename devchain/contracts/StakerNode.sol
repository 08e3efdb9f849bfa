// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20, Initializable} from "./Base.sol";
import {Strategy} from "./Strategy.sol";
import {DelegationManager} from "./DelegationManager.sol";
import {StakerNodeCoordinator} from "./StakerNodeCoordinator.sol";

/// @notice One EigenLayer staker of a LAT: holds strategy shares and delegates them to an
/// operator. Driven by the LAT's LiquidTokenManager only.
contract StakerNode is Initializable {
    StakerNodeCoordinator public coordinator;
    uint256 private _id;
    address private _operator;

    event DelegatedToOperator(address operator);
    event UndelegatedFromOperator(address operator);

    error NotLiquidTokenManager(address caller);
    error NodeIsDelegated(address operator);
    error NodeIsNotDelegated();
    error ArrayLengthMismatch();
    error ApproveFailed();

    modifier onlyLiquidTokenManager() {
        if (msg.sender != address(coordinator.liquidTokenManager())) revert NotLiquidTokenManager(msg.sender);
        _;
    }

    function initialize(address coordinator_, uint256 id) external initializer {
        coordinator = StakerNodeCoordinator(coordinator_);
        _id = id;
    }

    function getId() external view returns (uint256) {
        return _id;
    }

    /// @notice The operator this node is delegated to; the zero address when undelegated.
    function getOperatorDelegation() external view returns (address) {
        return _operator;
    }

    function delegate(address operator) external onlyLiquidTokenManager {
        if (_operator != address(0)) revert NodeIsDelegated(_operator);
        coordinator.delegationManager().delegateTo(operator, DelegationManager.SignatureWithExpiry("", 0), bytes32(0));
        _operator = operator;
        emit DelegatedToOperator(operator);
    }

    function undelegate() external onlyLiquidTokenManager returns (address operator) {
        operator = _operator;
        if (operator == address(0)) revert NodeIsNotDelegated();
        coordinator.delegationManager().undelegate(address(this));
        _operator = address(0);
        emit UndelegatedFromOperator(operator);
    }

    function depositAssets(address[] calldata assets, uint256[] calldata amounts, address[] calldata strategies)
        external
        onlyLiquidTokenManager
        returns (uint256[] memory shares)
    {
        if (assets.length != amounts.length || assets.length != strategies.length) revert ArrayLengthMismatch();
        address strategyManager = address(coordinator.strategyManager());
        shares = new uint256[](assets.length);
        for (uint256 i = 0; i < assets.length; i++) {
            if (!IERC20(assets[i]).approve(strategyManager, amounts[i])) revert ApproveFailed();
            shares[i] = coordinator.strategyManager().depositIntoStrategy(
                Strategy(strategies[i]), IERC20(assets[i]), amounts[i]
            );
        }
    }
}
