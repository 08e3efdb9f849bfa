// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

// The proxies a LAT deployment stands behind, OpenZeppelin 4.9's as on Mainnet v1: each of the
// LAT's four contracts is a TransparentUpgradeableProxy whose admin is a ProxyAdmin contract;
// each staker node is a BeaconProxy of the coordinator's UpgradeableBeacon. Imported here so
// that the build has their bytecode.
import {ProxyAdmin} from "@openzeppelin/contracts/proxy/transparent/ProxyAdmin.sol";
import {TransparentUpgradeableProxy} from "@openzeppelin/contracts/proxy/transparent/TransparentUpgradeableProxy.sol";
import {BeaconProxy} from "@openzeppelin/contracts/proxy/beacon/BeaconProxy.sol";
import {UpgradeableBeacon} from "@openzeppelin/contracts/proxy/beacon/UpgradeableBeacon.sol";
