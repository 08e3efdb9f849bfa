// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20, Owned} from "./Base.sol";

/// @notice EigenLayer-style RewardsCoordinator: AVS rewards submissions and operator/AVS splits.
contract RewardsCoordinator is Owned {
    struct StrategyAndMultiplier {
        address strategy;
        uint96 multiplier;
    }

    struct RewardsSubmission {
        StrategyAndMultiplier[] strategiesAndMultipliers;
        address token;
        uint256 amount;
        uint32 startTimestamp;
        uint32 duration;
    }

    uint16 public constant MAX_SPLIT_BIPS = 10_000;
    uint16 public defaultOperatorSplitBips = 1_000;
    mapping(address avs => uint256) public submissionNonce;
    mapping(address avs => mapping(bytes32 => bool)) public isAVSRewardsSubmissionHash;
    mapping(address operator => mapping(address avs => uint16)) private _splitBips;
    mapping(address operator => mapping(address avs => bool)) private _splitSet;

    event AVSRewardsSubmissionCreated(
        address indexed avs,
        uint256 indexed submissionNonce,
        bytes32 indexed rewardsSubmissionHash,
        RewardsSubmission rewardsSubmission
    );
    event OperatorAVSSplitBipsSet(
        address indexed caller,
        address indexed operator,
        address indexed avs,
        uint32 activatedAt,
        uint16 oldOperatorAVSSplitBips,
        uint16 newOperatorAVSSplitBips
    );
    event DefaultOperatorSplitBipsSet(uint16 oldDefaultOperatorSplitBips, uint16 newDefaultOperatorSplitBips);

    error AmountIsZero();
    error SplitExceedsMax(uint16 split);
    error UnauthorizedCaller(address caller);
    error TransferFailed();

    constructor() {
        _transferOwnership(msg.sender);
    }

    /// @notice Called by an AVS, which must have approved each submission's token amount.
    function createAVSRewardsSubmission(RewardsSubmission[] calldata submissions) external {
        for (uint256 i = 0; i < submissions.length; i++) {
            RewardsSubmission calldata submission = submissions[i];
            if (submission.amount == 0) revert AmountIsZero();
            uint256 nonce = submissionNonce[msg.sender]++;
            bytes32 submissionHash = keccak256(abi.encode(msg.sender, nonce, submission));
            isAVSRewardsSubmissionHash[msg.sender][submissionHash] = true;
            emit AVSRewardsSubmissionCreated(msg.sender, nonce, submissionHash, submission);
            if (!IERC20(submission.token).transferFrom(msg.sender, address(this), submission.amount)) {
                revert TransferFailed();
            }
        }
    }

    /// @notice By the operator itself (or the owner, a devnet convenience). Takes effect at once.
    function setOperatorAVSSplit(address operator, address avs, uint16 split) external {
        if (msg.sender != operator && msg.sender != owner) revert UnauthorizedCaller(msg.sender);
        if (split > MAX_SPLIT_BIPS) revert SplitExceedsMax(split);
        uint16 old = getOperatorAVSSplit(operator, avs);
        _splitBips[operator][avs] = split;
        _splitSet[operator][avs] = true;
        emit OperatorAVSSplitBipsSet(msg.sender, operator, avs, uint32(block.timestamp), old, split);
    }

    function setDefaultOperatorSplit(uint16 split) external onlyOwner {
        if (split > MAX_SPLIT_BIPS) revert SplitExceedsMax(split);
        emit DefaultOperatorSplitBipsSet(defaultOperatorSplitBips, split);
        defaultOperatorSplitBips = split;
    }

    /// @notice The operator's split in bips; the default (10 %) where the operator set none.
    function getOperatorAVSSplit(address operator, address avs) public view returns (uint16) {
        return _splitSet[operator][avs] ? _splitBips[operator][avs] : defaultOperatorSplitBips;
    }
}
