// The peer indexer's config: the chain and the LAT's contracts, from setup.json (written by
// bench/sections/peers.py). No RPC cache; the section recreates the database every run.
import { readFileSync } from "node:fs";
import { createConfig } from "ponder";

const setup = JSON.parse(readFileSync("setup.json", "utf8"));
const contract = ([address, abi]: [string, object[]]) => ({
  chain: "anvil", abi, address, startBlock: setup.startBlock, endBlock: setup.endBlock,
});

export default createConfig({
  database: { kind: "postgres", connectionString: process.env.DATABASE_URL },
  chains: { anvil: { id: setup.chainId, rpc: setup.rpc, disableCache: true } },
  contracts: Object.fromEntries(
    Object.entries(setup.contracts).map(([name, c]) => [name, contract(c as any)]),
  ) as any,
});
