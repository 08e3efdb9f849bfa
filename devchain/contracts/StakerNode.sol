// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {IBeacon} from "@openzeppelin/contracts/proxy/beacon/IBeacon.sol";
import {Initializable} from "@openzeppelin/contracts-upgradeable/proxy/utils/Initializable.sol";
import {ReentrancyGuardUpgradeable} from "@openzeppelin/contracts-upgradeable/security/ReentrancyGuardUpgradeable.sol";

import {IERC20 as IBaseERC20} from "./Base.sol";
import {DelegationManager} from "./DelegationManager.sol";
import {StakerNodeCoordinator} from "./StakerNodeCoordinator.sol";
import {Strategy} from "./Strategy.sol";

/// @notice One EigenLayer staker of a LAT, a BeaconProxy of the coordinator's beacon (as on
/// Mainnet v1): holds strategy shares and delegates them to an operator. The LAT's manager
/// deposits through it; the manager (the coordinator's delegator) delegates it.
///
/// Devnet differences: `undelegate` (out of scope on Mainnet v1; the node keeps its shares) and
/// deposits into strategies while undelegated (Mainnet v1 refuses them with
/// `NodeIsNotDelegated()`), so that the demo has undelegated nodes that hold shares.
contract StakerNode is Initializable, ReentrancyGuardUpgradeable {
    using SafeERC20 for IERC20;

    struct Init {
        StakerNodeCoordinator coordinator;
        uint256 id;
    }

    bytes32 public constant LIQUID_TOKEN_MANAGER_ROLE = keccak256("LIQUID_TOKEN_MANAGER_ROLE");
    bytes32 public constant STAKER_NODES_DELEGATOR_ROLE = keccak256("STAKER_NODES_DELEGATOR_ROLE");
    /// bytes32(uint256(keccak256("eip1967.proxy.beacon")) - 1)
    bytes32 private constant BEACON_SLOT = 0xa3f0ad74e5423aebfd80d3ef4346578335a9a72aeaee59ff6cb3582b35133d50;

    StakerNodeCoordinator public coordinator;
    uint256 public id;
    address public operatorDelegation;

    event DelegatedToOperator(address operator);
    event UndelegatedFromOperator(address operator);
    event AssetDepositedToStrategy(IERC20 indexed asset, Strategy indexed strategy, uint256 amount, uint256 shares);

    error ZeroAddress();
    error NotStakerNodeOperator();
    error NotStakerNodeDelegator();
    error NotLiquidTokenManager();
    error UnauthorizedAccess(address caller, bytes32 requiredRole);
    error NodeIsDelegated(address operatorDelegation);
    error NodeIsNotDelegated();

    modifier onlyManager() {
        if (!coordinator.hasLiquidTokenManagerRole(msg.sender)) {
            revert UnauthorizedAccess(msg.sender, LIQUID_TOKEN_MANAGER_ROLE);
        }
        _;
    }

    modifier onlyDelegator() {
        if (!coordinator.hasStakerNodeDelegatorRole(msg.sender)) {
            revert UnauthorizedAccess(msg.sender, STAKER_NODES_DELEGATOR_ROLE);
        }
        _;
    }

    constructor() {
        _disableInitializers();
    }

    function initialize(Init memory init) public initializer {
        if (address(init.coordinator) == address(0)) revert ZeroAddress();
        __ReentrancyGuard_init();
        coordinator = init.coordinator;
        id = init.id;
    }

    function delegate(address operator, DelegationManager.SignatureWithExpiry memory signature, bytes32 approverSalt)
        public
        onlyDelegator
    {
        if (operatorDelegation != address(0)) revert NodeIsDelegated(operatorDelegation);
        coordinator.delegationManager().delegateTo(operator, signature, approverSalt);
        operatorDelegation = operator;
        emit DelegatedToOperator(operator);
    }

    /// @notice Devnet: undelegates the node from its operator; returns that operator.
    function undelegate() external onlyDelegator returns (address operator) {
        operator = operatorDelegation;
        if (operator == address(0)) revert NodeIsNotDelegated();
        coordinator.delegationManager().undelegate(address(this));
        operatorDelegation = address(0);
        emit UndelegatedFromOperator(operator);
    }

    function depositAssets(IERC20[] calldata assets, uint256[] calldata amounts, Strategy[] calldata strategies)
        external
        nonReentrant
        onlyManager
    {
        address strategyManager = address(coordinator.strategyManager());
        for (uint256 i = 0; i < assets.length; i++) {
            assets[i].forceApprove(strategyManager, amounts[i]);
            uint256 shares = coordinator.strategyManager().depositIntoStrategy(
                strategies[i], IBaseERC20(address(assets[i])), amounts[i]
            );
            emit AssetDepositedToStrategy(assets[i], strategies[i], amounts[i], shares);
        }
    }

    /// @notice The StakerNode implementation this node runs (its beacon's).
    function implementation() public view returns (address) {
        address beacon;
        bytes32 slot = BEACON_SLOT;
        assembly {
            beacon := sload(slot)
        }
        return IBeacon(beacon).implementation();
    }

    function getInitializedVersion() external view returns (uint64) {
        return _getInitializedVersion();
    }

    function getId() external view returns (uint256) {
        return id;
    }

    /// @notice The operator this node is delegated to; the zero address when undelegated.
    function getOperatorDelegation() external view returns (address) {
        return operatorDelegation;
    }
}
