// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {Initializable, Owned} from "./Base.sol";
import {TransparentProxy} from "./TransparentProxy.sol";
import {StakerNode} from "./StakerNode.sol";
import {LiquidTokenManager} from "./LiquidTokenManager.sol";
import {StrategyManager} from "./StrategyManager.sol";
import {DelegationManager} from "./DelegationManager.sol";

/// @notice Creates and lists a LAT's staker nodes; each node is a TransparentProxy in front of
/// the shared StakerNode implementation. Lives behind a TransparentProxy itself.
contract StakerNodeCoordinator is Initializable, Owned {
    LiquidTokenManager public liquidTokenManager;
    StrategyManager public strategyManager;
    DelegationManager public delegationManager;
    address public stakerNodeImplementation;
    address public proxyAdmin;
    uint256 public maxNodes;
    address[] private _nodes;

    event NodeCreated(uint256 indexed nodeId, address indexed node, address indexed creator);
    event MaxNodesUpdated(uint256 oldMaxNodes, uint256 newMaxNodes);

    error TooManyStakerNodes(uint256 maxNodes);
    error NodeIdOutOfRange(uint256 nodeId);

    function initialize(
        address owner_,
        LiquidTokenManager manager,
        StrategyManager strategyManager_,
        DelegationManager delegationManager_,
        address stakerNodeImplementation_,
        address proxyAdmin_,
        uint256 maxNodes_
    ) external initializer {
        _transferOwnership(owner_);
        liquidTokenManager = manager;
        strategyManager = strategyManager_;
        delegationManager = delegationManager_;
        stakerNodeImplementation = stakerNodeImplementation_;
        proxyAdmin = proxyAdmin_;
        maxNodes = maxNodes_;
    }

    function createStakerNode() external onlyOwner returns (address node) {
        uint256 nodeId = _nodes.length;
        if (nodeId >= maxNodes) revert TooManyStakerNodes(maxNodes);
        bytes memory init = abi.encodeCall(StakerNode.initialize, (address(this), nodeId));
        node = address(new TransparentProxy(stakerNodeImplementation, proxyAdmin, init));
        _nodes.push(node);
        emit NodeCreated(nodeId, node, msg.sender);
    }

    function setMaxNodes(uint256 newMaxNodes) external onlyOwner {
        emit MaxNodesUpdated(maxNodes, newMaxNodes);
        maxNodes = newMaxNodes;
    }

    function getAllNodes() external view returns (address[] memory) {
        return _nodes;
    }

    function getStakerNodesCount() external view returns (uint256) {
        return _nodes.length;
    }

    function getNodeById(uint256 nodeId) external view returns (address) {
        if (nodeId >= _nodes.length) revert NodeIdOutOfRange(nodeId);
        return _nodes[nodeId];
    }
}
