// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {DelegationManager} from "./DelegationManager.sol";

/// @notice The AVS part of EigenLayer's AVSDirectory (its "legacy M2" registration, which AVSs
/// without operator sets use): an AVS announces its metadata URI, and registers and deregisters
/// operators. The caller is the AVS: an AVS's ServiceManager contract, or any account acting as
/// one. The operator's signature is not verified here (its salt and expiry are); everything else
/// is checked as EigenLayer does, with its error names.
contract AVSDirectory {
    /// The registration status of an operator with an AVS (uint8 in the ABI: 0 unregistered,
    /// 1 registered).
    enum OperatorAVSRegistrationStatus {
        UNREGISTERED,
        REGISTERED
    }

    /// EigenLayer's SignatureWithSaltAndExpiry.
    struct SignatureWithSaltAndExpiry {
        bytes signature;
        bytes32 salt;
        uint256 expiry;
    }

    DelegationManager public immutable delegation;
    mapping(address avs => mapping(address operator => OperatorAVSRegistrationStatus)) public avsOperatorStatus;
    mapping(address operator => mapping(bytes32 salt => bool)) public operatorSaltIsSpent;

    event AVSMetadataURIUpdated(address indexed avs, string metadataURI);
    event OperatorAVSRegistrationStatusUpdated(
        address indexed operator, address indexed avs, OperatorAVSRegistrationStatus status
    );

    error OperatorNotRegisteredToEigenLayer();
    error OperatorNotRegisteredToAVS();
    error OperatorAlreadyRegisteredToAVS();
    error SaltSpent();
    error SignatureExpired();

    constructor(DelegationManager delegationManager) {
        delegation = delegationManager;
    }

    function updateAVSMetadataURI(string calldata metadataURI) external {
        emit AVSMetadataURIUpdated(msg.sender, metadataURI);
    }

    /// @notice Called by the AVS (msg.sender) for an operator registered in the DelegationManager.
    function registerOperatorToAVS(address operator, SignatureWithSaltAndExpiry memory operatorSignature) external {
        if (avsOperatorStatus[msg.sender][operator] == OperatorAVSRegistrationStatus.REGISTERED) {
            revert OperatorAlreadyRegisteredToAVS();
        }
        if (operatorSaltIsSpent[operator][operatorSignature.salt]) revert SaltSpent();
        if (!delegation.isOperator(operator)) revert OperatorNotRegisteredToEigenLayer();
        if (operatorSignature.expiry < block.timestamp) revert SignatureExpired();
        operatorSaltIsSpent[operator][operatorSignature.salt] = true;
        avsOperatorStatus[msg.sender][operator] = OperatorAVSRegistrationStatus.REGISTERED;
        emit OperatorAVSRegistrationStatusUpdated(operator, msg.sender, OperatorAVSRegistrationStatus.REGISTERED);
    }

    /// @notice Called by the AVS (msg.sender) for an operator registered to it.
    function deregisterOperatorFromAVS(address operator) external {
        if (avsOperatorStatus[msg.sender][operator] != OperatorAVSRegistrationStatus.REGISTERED) {
            revert OperatorNotRegisteredToAVS();
        }
        avsOperatorStatus[msg.sender][operator] = OperatorAVSRegistrationStatus.UNREGISTERED;
        emit OperatorAVSRegistrationStatusUpdated(operator, msg.sender, OperatorAVSRegistrationStatus.UNREGISTERED);
    }
}
