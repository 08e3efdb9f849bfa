// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20, Owned} from "./Base.sol";

/// @notice EigenLayer-style RewardsCoordinator: the rewards submissions an AVS (or the owner, for
/// every staker) makes, and operators' splits per AVS. Submissions are checked as EigenLayer
/// checks them (whole days, strategies and operators in ascending address order, an
/// operator-directed one strictly in the past), except for the window limits on how far back or
/// ahead they may reach and the strategy whitelist. Nothing is ever paid out: the devnet has no
/// distribution roots or claims.
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

    struct OperatorReward {
        address operator;
        uint256 amount;
    }

    struct OperatorDirectedRewardsSubmission {
        StrategyAndMultiplier[] strategiesAndMultipliers;
        address token;
        OperatorReward[] operatorRewards;
        uint32 startTimestamp;
        uint32 duration;
        string description;
    }

    /// An operator's split for one AVS: `newSplitBips` from `activatedAt` on, `oldSplitBips`
    /// before (NEVER_SET: the default applies); `activatedAt` 0 when none was ever set.
    struct OperatorSplit {
        uint16 oldSplitBips;
        uint16 newSplitBips;
        uint32 activatedAt;
    }

    uint32 public constant CALCULATION_INTERVAL_SECONDS = 1 days;
    uint16 public constant MAX_SPLIT_BIPS = 10_000;
    uint16 private constant NEVER_SET = type(uint16).max;

    uint16 public defaultOperatorSplitBips = 1_000;
    /// Seconds between setting a split and its taking effect (a week until the owner sets another).
    uint32 public activationDelay;
    /// Per AVS (per submitter for the rewards for all stakers): the next submission's nonce.
    mapping(address => uint256) public submissionNonce;
    mapping(address avs => mapping(bytes32 => bool)) public isAVSRewardsSubmissionHash;
    mapping(address avs => mapping(bytes32 => bool)) public isOperatorDirectedAVSRewardsSubmissionHash;
    mapping(address submitter => mapping(bytes32 => bool)) public isRewardsSubmissionForAllHash;
    mapping(address operator => mapping(address avs => OperatorSplit)) private _operatorAVSSplit;

    event AVSRewardsSubmissionCreated(
        address indexed avs,
        uint256 indexed submissionNonce,
        bytes32 indexed rewardsSubmissionHash,
        RewardsSubmission rewardsSubmission
    );
    event RewardsSubmissionForAllCreated(
        address indexed submitter,
        uint256 indexed submissionNonce,
        bytes32 indexed rewardsSubmissionHash,
        RewardsSubmission rewardsSubmission
    );
    event OperatorDirectedAVSRewardsSubmissionCreated(
        address indexed caller,
        address indexed avs,
        bytes32 indexed operatorDirectedRewardsSubmissionHash,
        uint256 submissionNonce,
        OperatorDirectedRewardsSubmission operatorDirectedRewardsSubmission
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
    event ActivationDelaySet(uint32 oldActivationDelay, uint32 newActivationDelay);

    error AmountIsZero();
    error SplitExceedsMax(uint16 split);
    error UnauthorizedCaller(address caller);
    error TransferFailed();
    error PreviousSplitPending();
    error InputArrayLengthZero();
    error DurationIsZero();
    error InvalidDurationRemainder();
    error InvalidStartTimestampRemainder();
    error StrategiesNotInAscendingOrder();
    error OperatorsNotInAscendingOrder();
    error InvalidAddressZero();
    error SubmissionNotRetroactive();

    constructor() {
        _transferOwnership(msg.sender);
        _setActivationDelay(7 days);
    }

    // ----- submissions -----

    /// @notice Called by an AVS, which must have approved each submission's token amount.
    function createAVSRewardsSubmission(RewardsSubmission[] calldata submissions) external {
        for (uint256 i = 0; i < submissions.length; i++) {
            RewardsSubmission calldata submission = submissions[i];
            _checkRewardsSubmission(submission);
            uint256 nonce = submissionNonce[msg.sender]++;
            bytes32 submissionHash = keccak256(abi.encode(msg.sender, nonce, submission));
            isAVSRewardsSubmissionHash[msg.sender][submissionHash] = true;
            emit AVSRewardsSubmissionCreated(msg.sender, nonce, submissionHash, submission);
            _pull(submission.token, submission.amount);
        }
    }

    /// @notice Rewards for every staker of every operator, whatever its AVSs. EigenLayer lets the
    /// submitters it names make them; here the owner.
    function createRewardsForAllSubmission(RewardsSubmission[] calldata submissions) external onlyOwner {
        for (uint256 i = 0; i < submissions.length; i++) {
            RewardsSubmission calldata submission = submissions[i];
            _checkRewardsSubmission(submission);
            uint256 nonce = submissionNonce[msg.sender]++;
            bytes32 submissionHash = keccak256(abi.encode(msg.sender, nonce, submission));
            isRewardsSubmissionForAllHash[msg.sender][submissionHash] = true;
            emit RewardsSubmissionForAllCreated(msg.sender, nonce, submissionHash, submission);
            _pull(submission.token, submission.amount);
        }
    }

    /// @notice Called by the AVS itself (its ServiceManager): rewards it pays each named operator
    /// (and the operator's stakers) for a range of whole days that has ended. The caller must
    /// have approved the sum of each submission's amounts.
    function createOperatorDirectedAVSRewardsSubmission(
        address avs,
        OperatorDirectedRewardsSubmission[] calldata submissions
    ) external {
        if (msg.sender != avs) revert UnauthorizedCaller(msg.sender);
        for (uint256 i = 0; i < submissions.length; i++) {
            OperatorDirectedRewardsSubmission calldata submission = submissions[i];
            _checkRange(submission.strategiesAndMultipliers, submission.startTimestamp, submission.duration);
            if (uint256(submission.startTimestamp) + submission.duration >= block.timestamp) {
                revert SubmissionNotRetroactive();
            }
            uint256 total = _operatorRewardsTotal(submission.operatorRewards);
            uint256 nonce = submissionNonce[avs]++;
            bytes32 submissionHash = keccak256(abi.encode(avs, nonce, submission));
            _pull(submission.token, total);
            isOperatorDirectedAVSRewardsSubmissionHash[avs][submissionHash] = true;
            emit OperatorDirectedAVSRewardsSubmissionCreated(msg.sender, avs, submissionHash, nonce, submission);
        }
    }

    function _checkRewardsSubmission(RewardsSubmission calldata submission) private pure {
        _checkRange(submission.strategiesAndMultipliers, submission.startTimestamp, submission.duration);
        if (submission.amount == 0) revert AmountIsZero();
    }

    function _checkRange(StrategyAndMultiplier[] calldata strategies, uint32 startTimestamp, uint32 duration)
        private
        pure
    {
        if (strategies.length == 0) revert InputArrayLengthZero();
        if (duration == 0) revert DurationIsZero();
        if (duration % CALCULATION_INTERVAL_SECONDS != 0) revert InvalidDurationRemainder();
        if (startTimestamp % CALCULATION_INTERVAL_SECONDS != 0) revert InvalidStartTimestampRemainder();
        address previous = address(0);
        for (uint256 i = 0; i < strategies.length; i++) {
            if (strategies[i].strategy <= previous) revert StrategiesNotInAscendingOrder();
            previous = strategies[i].strategy;
        }
    }

    function _operatorRewardsTotal(OperatorReward[] calldata rewards) private pure returns (uint256 total) {
        if (rewards.length == 0) revert InputArrayLengthZero();
        address previous = address(0);
        for (uint256 i = 0; i < rewards.length; i++) {
            if (rewards[i].operator == address(0)) revert InvalidAddressZero();
            if (rewards[i].operator <= previous) revert OperatorsNotInAscendingOrder();
            if (rewards[i].amount == 0) revert AmountIsZero();
            total += rewards[i].amount;
            previous = rewards[i].operator;
        }
    }

    function _pull(address token, uint256 amount) private {
        if (!IERC20(token).transferFrom(msg.sender, address(this), amount)) revert TransferFailed();
    }

    // ----- splits -----

    /// @notice By the operator itself (or the owner, a devnet convenience). Takes effect
    /// `activationDelay` seconds from now; until then the split in force before stays, and no
    /// other may be set.
    function setOperatorAVSSplit(address operator, address avs, uint16 split) external {
        if (msg.sender != operator && msg.sender != owner) revert UnauthorizedCaller(msg.sender);
        if (split > MAX_SPLIT_BIPS) revert SplitExceedsMax(split);
        OperatorSplit storage current = _operatorAVSSplit[operator][avs];
        if (block.timestamp <= current.activatedAt) revert PreviousSplitPending();
        uint16 inForce = _splitInForce(current);
        uint32 activatedAt = uint32(block.timestamp) + activationDelay;
        current.oldSplitBips = current.activatedAt == 0 ? NEVER_SET : current.newSplitBips;
        current.newSplitBips = split;
        current.activatedAt = activatedAt;
        emit OperatorAVSSplitBipsSet(msg.sender, operator, avs, activatedAt, inForce, split);
    }

    function setDefaultOperatorSplit(uint16 split) external onlyOwner {
        if (split > MAX_SPLIT_BIPS) revert SplitExceedsMax(split);
        emit DefaultOperatorSplitBipsSet(defaultOperatorSplitBips, split);
        defaultOperatorSplitBips = split;
    }

    function setActivationDelay(uint32 delay) external onlyOwner {
        _setActivationDelay(delay);
    }

    /// @notice The operator's split for the AVS in bips, as in force now: the default where the
    /// operator never set one, or set its first one and it is not active yet.
    function getOperatorAVSSplit(address operator, address avs) external view returns (uint16) {
        return _splitInForce(_operatorAVSSplit[operator][avs]);
    }

    function _splitInForce(OperatorSplit memory split) private view returns (uint16) {
        if (split.activatedAt == 0) return defaultOperatorSplitBips;
        if (block.timestamp >= split.activatedAt) return split.newSplitBips;
        return split.oldSplitBips == NEVER_SET ? defaultOperatorSplitBips : split.oldSplitBips;
    }

    function _setActivationDelay(uint32 delay) private {
        emit ActivationDelaySet(activationDelay, delay);
        activationDelay = delay;
    }
}
