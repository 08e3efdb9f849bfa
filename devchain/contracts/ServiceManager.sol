// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20, Owned} from "./Base.sol";
import {AVSDirectory} from "./AVSDirectory.sol";
import {RewardsCoordinator} from "./RewardsCoordinator.sol";

/// @notice An AVS's own contract, as EigenLayer middleware's ServiceManagerBase is one: its
/// address is the AVS's address in EigenLayer (the AVSDirectory's and RewardsCoordinator's
/// `avs`), and its owner, the AVS's team, acts through it. Where middleware derives an operator's
/// restaked strategies from its registry's quorums, the owner sets them here.
///
/// The two core contracts are plain storage, not immutables, so that the deployed code is the
/// compiler's runtime code byte for byte (the demo recognises a devnet of older contracts by it).
contract ServiceManager is Owned {
    AVSDirectory public avsDirectory;
    RewardsCoordinator public rewardsCoordinator;
    /// Registrations made so far: each one's signature salt, never spent before.
    uint256 public registrations;
    mapping(address operator => address[]) private _restakedStrategies;

    error TransferFailed();

    constructor(AVSDirectory directory, RewardsCoordinator coordinator) {
        avsDirectory = directory;
        rewardsCoordinator = coordinator;
        _transferOwnership(msg.sender);
    }

    function updateAVSMetadataURI(string calldata metadataURI) external onlyOwner {
        avsDirectory.updateAVSMetadataURI(metadataURI);
    }

    /// @notice Registers an operator to this AVS (the AVSDirectory does not verify the
    /// operator's signature on the devnet: none is given).
    function registerOperatorToAVS(address operator) external onlyOwner {
        bytes32 salt = bytes32(registrations++);
        avsDirectory.registerOperatorToAVS(
            operator, AVSDirectory.SignatureWithSaltAndExpiry("", salt, type(uint256).max)
        );
    }

    function deregisterOperatorFromAVS(address operator) external onlyOwner {
        avsDirectory.deregisterOperatorFromAVS(operator);
    }

    function setOperatorRestakedStrategies(address operator, address[] calldata strategies) external onlyOwner {
        _restakedStrategies[operator] = strategies;
    }

    /// @notice The strategies set for the operator; none for an operator never set.
    function getOperatorRestakedStrategies(address operator) external view returns (address[] memory) {
        return _restakedStrategies[operator];
    }

    /// @notice Takes each submission's amount from the owner and submits them with this AVS as
    /// their `avs`.
    function createAVSRewardsSubmission(RewardsCoordinator.RewardsSubmission[] calldata submissions)
        external
        onlyOwner
    {
        for (uint256 i = 0; i < submissions.length; i++) {
            _fund(submissions[i].token, submissions[i].amount);
        }
        rewardsCoordinator.createAVSRewardsSubmission(submissions);
    }

    /// @notice Takes the sum of each submission's operator rewards from the owner and submits
    /// them for this AVS.
    function createOperatorDirectedAVSRewardsSubmission(
        RewardsCoordinator.OperatorDirectedRewardsSubmission[] calldata submissions
    ) external onlyOwner {
        for (uint256 i = 0; i < submissions.length; i++) {
            uint256 total = 0;
            for (uint256 j = 0; j < submissions[i].operatorRewards.length; j++) {
                total += submissions[i].operatorRewards[j].amount;
            }
            _fund(submissions[i].token, total);
        }
        rewardsCoordinator.createOperatorDirectedAVSRewardsSubmission(address(this), submissions);
    }

    /// @dev Moves `amount` of `token` from the owner here and lets the coordinator take it.
    function _fund(address token, uint256 amount) private {
        IERC20 erc20 = IERC20(token);
        if (!erc20.transferFrom(msg.sender, address(this), amount)) revert TransferFailed();
        uint256 allowed = erc20.allowance(address(this), address(rewardsCoordinator));
        if (!erc20.approve(address(rewardsCoordinator), allowed + amount)) revert TransferFailed();
    }

}
