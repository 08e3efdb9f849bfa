// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Owned} from "./Base.sol";
import {StrategyManager} from "./StrategyManager.sol";

/// @notice EigenLayer-style DelegationManager. Operators register, stakers delegate to them, and
/// operators' shares follow their stakers' deposits. Slashing is a per-operator fraction
/// (`operatorSlashedWad`, 1e18 = 100 %) that the owner sets; withdrawable shares and operator
/// shares net it out: withdrawable = deposited * (1e18 - slashedWad) / 1e18.
contract DelegationManager is Owned {
    struct SignatureWithExpiry {
        bytes signature;
        uint256 expiry;
    }

    StrategyManager public immutable strategyManager;
    mapping(address => address) public delegatedTo;
    mapping(address => bool) public isOperator;
    mapping(address operator => uint256) public operatorSlashedWad;
    mapping(address operator => mapping(address strategy => uint256)) private _operatorDepositShares;

    event OperatorRegistered(address indexed operator, address delegationApprover);
    event OperatorMetadataURIUpdated(address indexed operator, string metadataURI);
    event StakerDelegated(address indexed staker, address indexed operator);
    event StakerUndelegated(address indexed staker, address indexed operator);
    event OperatorSharesIncreased(address indexed operator, address staker, address strategy, uint256 shares);
    event OperatorSharesDecreased(address indexed operator, address staker, address strategy, uint256 shares);
    event OperatorSlashed(address indexed operator, uint256 slashedWad);

    error ActivelyDelegated();
    error NotActivelyDelegated();
    error OperatorNotRegistered(address operator);
    error OperatorsCannotUndelegate();
    error OnlyStrategyManager(address caller);
    error CallerCannotUndelegate(address caller);
    error InvalidSlashing(uint256 slashedWad);

    constructor(StrategyManager manager) {
        strategyManager = manager;
        _transferOwnership(msg.sender);
    }

    /// @notice Same signature as EigenLayer's; the operator is delegated to itself.
    function registerAsOperator(address initDelegationApprover, uint32, string calldata metadataURI) external {
        if (delegatedTo[msg.sender] != address(0)) revert ActivelyDelegated();
        isOperator[msg.sender] = true;
        emit OperatorRegistered(msg.sender, initDelegationApprover);
        _delegate(msg.sender, msg.sender);
        emit OperatorMetadataURIUpdated(msg.sender, metadataURI);
    }

    /// @notice Same signature as EigenLayer's; approver signatures are not checked here.
    function delegateTo(address operator, SignatureWithExpiry memory, bytes32) external {
        if (delegatedTo[msg.sender] != address(0)) revert ActivelyDelegated();
        if (!isOperator[operator]) revert OperatorNotRegistered(operator);
        _delegate(msg.sender, operator);
    }

    /// @notice Callable by the staker or its operator. Unlike EigenLayer, which queues the
    /// staker's shares for withdrawal, the staker keeps its deposit shares here (an undelegated
    /// node that still holds stake); no withdrawal roots are returned.
    function undelegate(address staker) external returns (bytes32[] memory withdrawalRoots) {
        address operator = delegatedTo[staker];
        if (operator == address(0)) revert NotActivelyDelegated();
        if (isOperator[staker]) revert OperatorsCannotUndelegate();
        if (msg.sender != staker && msg.sender != operator) revert CallerCannotUndelegate(msg.sender);
        address[] memory strategies = strategyManager.getStakerStrategyList(staker);
        for (uint256 i = 0; i < strategies.length; i++) {
            uint256 shares = strategyManager.stakerDepositShares(staker, strategies[i]);
            _operatorDepositShares[operator][strategies[i]] -= shares;
            emit OperatorSharesDecreased(operator, staker, strategies[i], shares);
        }
        delete delegatedTo[staker];
        emit StakerUndelegated(staker, operator);
        return withdrawalRoots;
    }

    function increaseDelegatedShares(address staker, address strategy, uint256 shares) external {
        if (msg.sender != address(strategyManager)) revert OnlyStrategyManager(msg.sender);
        address operator = delegatedTo[staker];
        if (operator != address(0)) {
            _operatorDepositShares[operator][strategy] += shares;
            emit OperatorSharesIncreased(operator, staker, strategy, shares);
        }
    }

    /// @notice Owner knob standing in for EigenLayer's slashing: the fraction of the operator's
    /// stake (1e18-scaled) that has been slashed.
    function setOperatorSlashing(address operator, uint256 slashedWad) external onlyOwner {
        if (!isOperator[operator]) revert OperatorNotRegistered(operator);
        if (slashedWad > 1e18) revert InvalidSlashing(slashedWad);
        operatorSlashedWad[operator] = slashedWad;
        emit OperatorSlashed(operator, slashedWad);
    }

    function isDelegated(address staker) external view returns (bool) {
        return delegatedTo[staker] != address(0);
    }

    function getWithdrawableShares(address staker, address[] calldata strategies)
        external
        view
        returns (uint256[] memory withdrawableShares, uint256[] memory depositShares)
    {
        withdrawableShares = new uint256[](strategies.length);
        depositShares = new uint256[](strategies.length);
        uint256 slashed = operatorSlashedWad[delegatedTo[staker]];
        for (uint256 i = 0; i < strategies.length; i++) {
            depositShares[i] = strategyManager.stakerDepositShares(staker, strategies[i]);
            withdrawableShares[i] = _netOfSlashing(depositShares[i], slashed);
        }
    }

    function operatorShares(address operator, address strategy) public view returns (uint256) {
        return _netOfSlashing(_operatorDepositShares[operator][strategy], operatorSlashedWad[operator]);
    }

    function getOperatorShares(address operator, address[] calldata strategies) external view returns (uint256[] memory shares) {
        shares = new uint256[](strategies.length);
        for (uint256 i = 0; i < strategies.length; i++) {
            shares[i] = operatorShares(operator, strategies[i]);
        }
    }

    /// @notice One row per operator: its shares in each strategy, net of slashing (`operatorShares`).
    function getOperatorsShares(address[] calldata operators, address[] calldata strategies)
        external
        view
        returns (uint256[][] memory shares)
    {
        shares = new uint256[][](operators.length);
        for (uint256 i = 0; i < operators.length; i++) {
            shares[i] = new uint256[](strategies.length);
            for (uint256 j = 0; j < strategies.length; j++) {
                shares[i][j] = operatorShares(operators[i], strategies[j]);
            }
        }
    }

    function _delegate(address staker, address operator) private {
        delegatedTo[staker] = operator;
        emit StakerDelegated(staker, operator);
        address[] memory strategies = strategyManager.getStakerStrategyList(staker);
        for (uint256 i = 0; i < strategies.length; i++) {
            uint256 shares = strategyManager.stakerDepositShares(staker, strategies[i]);
            _operatorDepositShares[operator][strategies[i]] += shares;
            emit OperatorSharesIncreased(operator, staker, strategies[i], shares);
        }
    }

    function _netOfSlashing(uint256 shares, uint256 slashedWad) private pure returns (uint256) {
        return (shares * (1e18 - slashedWad)) / 1e18;
    }
}
