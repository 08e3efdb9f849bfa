// The events and the holders' balances, as deposits_event and deposits_holder keep them.
import { onchainTable, primaryKey } from "ponder";

export const event = onchainTable(
  "event",
  (t) => ({
    blockNumber: t.bigint().notNull(), logIndex: t.integer().notNull(),
    txHash: t.hex().notNull(), blockHash: t.hex().notNull(), createdAt: t.bigint().notNull(),
    type: t.text().notNull(), args: t.json().notNull(),
  }),
  (table) => ({ pk: primaryKey({ columns: [table.blockNumber, table.logIndex] }) }),
);

export const holder = onchainTable("holder", (t) => ({
  address: t.hex().primaryKey(), balance: t.bigint().notNull(), firstBlock: t.bigint().notNull(),
}));
