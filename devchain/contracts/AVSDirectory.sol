// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @notice The metadata part of EigenLayer's AVSDirectory: an AVS announces its metadata URI.
contract AVSDirectory {
    event AVSMetadataURIUpdated(address indexed avs, string metadataURI);

    function updateAVSMetadataURI(string calldata metadataURI) external {
        emit AVSMetadataURIUpdated(msg.sender, metadataURI);
    }
}
