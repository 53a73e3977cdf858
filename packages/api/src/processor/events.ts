import type { DataSource } from "typeorm";
import { isUniqueViolation } from "../db/datasource.js";
import { queryRows } from "../db/fast.js";

export type EventClaim = { kind: "new" } | { kind: "seen"; outcome: string | null };

/**
 * Webhook events already handled, by the processor's event id: delivery is at least once, so a
 * replay is answered from here instead of being applied twice. A claim whose handling failed is
 * released, so the processor's retry runs it again. (The synchronous authorization request is not
 * claimed here: its authorization's unique key answers its replays.)
 */
export class ProcessorEventLog {
  constructor(private readonly ds: DataSource) {}

  async claim(id: string, type: string): Promise<EventClaim> {
    try {
      await queryRows(this.ds, `INSERT INTO stripe_events (id, type, outcome, received_at) VALUES (?, ?, NULL, ?)`, [id, type, Date.now()]);
      return { kind: "new" };
    } catch (err) {
      if (!isUniqueViolation(err)) throw err;
      return { kind: "seen", outcome: await this.outcome(id) };
    }
  }

  private async outcome(id: string): Promise<string | null> {
    const [row] = await queryRows(this.ds, `SELECT outcome FROM stripe_events WHERE id = ?`, [id]);
    return row?.outcome ?? null;
  }

  async complete(id: string, outcome: string): Promise<void> {
    await queryRows(this.ds, `UPDATE stripe_events SET outcome = ? WHERE id = ?`, [outcome, id]);
  }

  async release(id: string): Promise<void> {
    await queryRows(this.ds, `DELETE FROM stripe_events WHERE id = ? AND outcome IS NULL`, [id]);
  }
}
