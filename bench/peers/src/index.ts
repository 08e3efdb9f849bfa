// Every event of PEERS_SETUP's table kept with its feed type and arguments (uints as decimal
// strings); a Transfer moves the holders' balances, a mint or a burn from or to address zero.
import { readFileSync } from "node:fs";
import { ponder } from "ponder:registry";
import { event as events, holder } from "ponder:schema";

const ZERO = "0x0000000000000000000000000000000000000000";
const table: string[][] = JSON.parse(readFileSync(process.env.PEERS_SETUP!, "utf8")).table;
const plain = (args: object) =>
  JSON.parse(JSON.stringify(args, (_, v) => (typeof v === "bigint" ? v.toString() : v)));

for (const [contract, name, type] of table) {
  ponder.on(`${contract}:${name}` as any, async ({ event, context: { db } }: any) => {
    const { args, block, log, transaction } = event;
    let kind = type;
    if (name === "Transfer") {
      kind = args.from === ZERO ? "mint" : args.to === ZERO ? "burn" : "transfer";
      const { from, to, value } = args;
      const move = (sign: bigint) => (r: any) => ({ balance: r.balance + sign * value });
      if (from !== ZERO) await db.update(holder, { address: from }).set(move(-1n));
      if (to !== ZERO)
        await db.insert(holder).values({ address: to, balance: value, firstBlock: block.number })
          .onConflictDoUpdate(move(1n));
    }
    await db.insert(events).values({
      blockNumber: block.number, logIndex: log.logIndex, txHash: transaction.hash,
      blockHash: block.hash, createdAt: block.timestamp, type: kind, args: plain(args),
    });
  });
}
