// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {BeaconProxy} from "@openzeppelin/contracts/proxy/beacon/BeaconProxy.sol";
import {UpgradeableBeacon} from "@openzeppelin/contracts/proxy/beacon/UpgradeableBeacon.sol";
import {AccessControlUpgradeable} from "@openzeppelin/contracts-upgradeable/access/AccessControlUpgradeable.sol";

import {DelegationManager} from "./DelegationManager.sol";
import {StakerNode} from "./StakerNode.sol";
import {StrategyManager} from "./StrategyManager.sol";

/// @notice Creates and lists a LAT's staker nodes, as Mainnet v1 does (OpenZeppelin 4.9, behind a
/// TransparentUpgradeableProxy): each node is a BeaconProxy of one UpgradeableBeacon, created at
/// initialisation, whose implementation `upgradeStakerNodeImplementation` changes for every node.
/// The manager address is typed loosely (`address`-compatible) so that either manager shape of
/// the devnet can drive the nodes.
contract StakerNodeCoordinator is AccessControlUpgradeable {
    struct Init {
        address liquidTokenManager;
        DelegationManager delegationManager;
        StrategyManager strategyManager;
        uint256 maxNodes;
        address initialOwner;
        address pauser;
        address stakerNodeCreator;
        address stakerNodesDelegator;
        address stakerNodeImplementation;
    }

    bytes32 public constant STAKER_NODE_CREATOR_ROLE = keccak256("STAKER_NODE_CREATOR_ROLE");
    bytes32 public constant STAKER_NODES_DELEGATOR_ROLE = keccak256("STAKER_NODES_DELEGATOR_ROLE");

    address public liquidTokenManager;
    StrategyManager public strategyManager;
    DelegationManager public delegationManager;
    UpgradeableBeacon public upgradeableBeacon;
    StakerNode[] private _nodes;
    uint256 public maxNodes;

    event NodeCreated(uint256 indexed nodeId, StakerNode indexed node, address indexed creator);
    event NodeImplementationChanged(
        address indexed upgradeableBeaconAddress, address indexed implementationContract, bool isInitialRegistration
    );
    event MaxNodesUpdated(uint256 oldMaxNodes, uint256 newMaxNodes, address indexed updater);
    event NodeInitialized(address indexed nodeAddress, uint64 initializedVersion, uint256 indexed nodeId);

    error MaxNodesLowerThanCurrent(uint256 currentNodeCount, uint256 newMaxNodes);
    error ZeroAddress();
    error ZeroAmount();
    error UnsupportedAsset(address asset);
    error Unauthorized();
    error InsufficientFunds();
    error Paused();
    error NotAContract();
    error BeaconImplementationAlreadyExists();
    error NoBeaconImplementationExists();
    error TooManyStakerNodes(uint256 maxNodes);
    error NodeIdOutOfRange(uint256 nodeId);
    error NodeAlreadyRegistered(address nodeAddress);
    error NotOwner();

    constructor() {
        _disableInitializers();
    }

    function initialize(Init calldata init) external initializer {
        __AccessControl_init();
        if (
            init.initialOwner == address(0) || init.pauser == address(0) || init.stakerNodeCreator == address(0)
                || init.stakerNodesDelegator == address(0) || init.liquidTokenManager == address(0)
                || address(init.strategyManager) == address(0) || address(init.delegationManager) == address(0)
                || init.stakerNodeImplementation == address(0)
        ) revert ZeroAddress();
        if (init.maxNodes == 0) revert ZeroAmount();
        _grantRole(DEFAULT_ADMIN_ROLE, init.initialOwner);
        _grantRole(STAKER_NODE_CREATOR_ROLE, init.stakerNodeCreator);
        _grantRole(STAKER_NODES_DELEGATOR_ROLE, init.stakerNodesDelegator);
        liquidTokenManager = init.liquidTokenManager;
        strategyManager = init.strategyManager;
        delegationManager = init.delegationManager;
        maxNodes = init.maxNodes;
        upgradeableBeacon = new UpgradeableBeacon(init.stakerNodeImplementation);
        emit NodeImplementationChanged(address(upgradeableBeacon), init.stakerNodeImplementation, true);
    }

    function createStakerNode() public onlyRole(STAKER_NODE_CREATOR_ROLE) returns (StakerNode node) {
        uint256 nodeId = _nodes.length;
        if (nodeId >= maxNodes) revert TooManyStakerNodes(maxNodes);
        node = StakerNode(address(new BeaconProxy(address(upgradeableBeacon), "")));
        _initializeNode(node, nodeId);
        _nodes.push(node);
        emit NodeCreated(nodeId, node, msg.sender);
    }

    function upgradeStakerNodeImplementation(address implementationContract) public onlyRole(DEFAULT_ADMIN_ROLE) {
        if (implementationContract == address(0)) revert ZeroAddress();
        if (implementationContract.code.length == 0) revert NotAContract();
        upgradeableBeacon.upgradeTo(implementationContract);
        for (uint256 i = 0; i < _nodes.length; i++) {
            _initializeNode(_nodes[i], i);
        }
        emit NodeImplementationChanged(address(upgradeableBeacon), implementationContract, false);
    }

    function _initializeNode(StakerNode node, uint256 nodeId) private {
        if (node.getInitializedVersion() != 0) return;
        node.initialize(StakerNode.Init(StakerNodeCoordinator(address(this)), nodeId));
        emit NodeInitialized(address(node), node.getInitializedVersion(), nodeId);
    }

    function setMaxNodes(uint256 newMaxNodes) public onlyRole(DEFAULT_ADMIN_ROLE) {
        if (newMaxNodes < _nodes.length) revert MaxNodesLowerThanCurrent(_nodes.length, newMaxNodes);
        emit MaxNodesUpdated(maxNodes, newMaxNodes, msg.sender);
        maxNodes = newMaxNodes;
    }

    function getAllNodes() public view returns (StakerNode[] memory) {
        return _nodes;
    }

    function getStakerNodesCount() public view returns (uint256) {
        return _nodes.length;
    }

    function getNodeById(uint256 nodeId) public view returns (StakerNode) {
        if (nodeId >= _nodes.length) revert NodeIdOutOfRange(nodeId);
        return _nodes[nodeId];
    }

    function hasStakerNodeDelegatorRole(address account) public view returns (bool) {
        return hasRole(STAKER_NODES_DELEGATOR_ROLE, account);
    }

    function hasLiquidTokenManagerRole(address caller) public view returns (bool) {
        return caller == liquidTokenManager;
    }
}
