// The handlers: every event of setup.json's table stored with its feed type and arguments
// (uints as decimal strings); Transfer moves the holders' balances and is a mint or a burn
// from or to the zero address.
import { readFileSync } from "node:fs";
import { ponder } from "ponder:registry";
import { event as events, holder } from "ponder:schema";

const ZERO = "0x0000000000000000000000000000000000000000";
const table: [string, string, string][] = JSON.parse(readFileSync("setup.json", "utf8")).table;
const plain = (args: object) =>
  JSON.parse(JSON.stringify(args, (_, v) => (typeof v === "bigint" ? v.toString() : v)));

for (const [contract, name, type] of table) {
  ponder.on(`${contract}:${name}` as any, async ({ event, context }: any) => {
    const { args, block, log, transaction } = event;
    let kind = type;
    if (name === "Transfer") {
      kind = args.from === ZERO ? "mint" : args.to === ZERO ? "burn" : "transfer";
      if (args.from !== ZERO) {
        await context.db
          .update(holder, { address: args.from })
          .set((row: any) => ({ balance: row.balance - args.value }));
      }
      if (args.to !== ZERO) {
        await context.db
          .insert(holder)
          .values({ address: args.to, balance: args.value, firstBlock: block.number })
          .onConflictDoUpdate((row: any) => ({ balance: row.balance + args.value }));
      }
    }
    await context.db.insert(events).values({
      blockNumber: block.number,
      logIndex: log.logIndex,
      txHash: transaction.hash,
      blockHash: block.hash,
      createdAt: block.timestamp,
      type: kind,
      args: plain(args),
    });
  });
}
