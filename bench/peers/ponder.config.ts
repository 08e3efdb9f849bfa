// The chain and the LAT's contracts from PEERS_SETUP (written by bench/sections/peers.py); no
// RPC cache. The section recreates the database every run.
import { readFileSync } from "node:fs";
import { createConfig } from "ponder";

const setup = JSON.parse(readFileSync(process.env.PEERS_SETUP!, "utf8"));
const { startBlock, endBlock } = setup;
const contracts = Object.fromEntries(
  Object.entries(setup.contracts as Record<string, [string, object[]]>).map(
    ([name, [address, abi]]) => [name, { chain: "anvil", abi, address, startBlock, endBlock }],
  ),
);

export default createConfig({
  database: { kind: "postgres", connectionString: process.env.DATABASE_URL },
  chains: { anvil: { id: setup.chainId, rpc: setup.rpc, disableCache: true } },
  contracts: contracts as any,
});
