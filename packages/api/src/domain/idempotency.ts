import { LessThan } from "typeorm";
import { affected, isUniqueViolation } from "../db/datasource.js";
import { IdempotencyEntity } from "../db/entities.js";
import type { Deps } from "./deps.js";
import { AppError } from "./errors.js";
import { fastRepository, queryRows, runSql } from "../db/fast.js";

const PURGE_BATCH = 1000;

export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

export type IdempotencyOutcome =
  /**
   * `scope` names this claim of the key: `<key id>:<key>:<claimed at>`; `retry`: it was taken over
   * from an earlier request (one that died, or failed with a 5xx), which may have made something;
   * `lease`: this request's hold on the key (its locked_until), the fencing token of what it then
   * writes to the key: a request whose lease ran out and was taken over writes nothing.
   */
  | { kind: "proceed"; scope: string; retry: boolean; lease: number }
  | { kind: "replay"; status: number; body: string };

/**
 * Idempotency keys, stored in the database so they hold across restarts and instances. `begin`
 * claims a key with a unique insert: exactly one request runs, the others replay its stored
 * response, wait (409), or are told the key was used for another request (422).
 */
export class IdempotencyStore {
  constructor(private readonly deps: Deps) {}

  private get repo() {
    return fastRepository(this.deps.ds, IdempotencyEntity);
  }

  async begin(apiKeyId: string, key: string, requestHash: string): Promise<IdempotencyOutcome> {
    const now = Date.now();
    const lockUntil = now + this.deps.config.creationLeaseMs;
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        await this.repo.insert({
          api_key_id: apiKeyId,
          idem_key: key,
          request_hash: requestHash,
          status: "RUNNING",
          response_status: null,
          response_body: null,
          locked_until: lockUntil,
          created_at: now,
          expires_at: now + IDEMPOTENCY_TTL_MS,
        });
        return { kind: "proceed", scope: `${apiKeyId}:${key}:${now}`, retry: false, lease: lockUntil };
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
      }
      const found = await this.repo.findOneBy({ api_key_id: apiKeyId, idem_key: key });
      if (!found) continue; // purged in between: claim again
      if (found.expires_at <= now) {
        await this.repo.delete({ api_key_id: apiKeyId, idem_key: key, expires_at: found.expires_at });
        continue;
      }
      if (found.request_hash !== requestHash)
        throw new AppError(
          422,
          "idempotency_key_reused",
          "This Idempotency-Key was already used for a different request. Use a new key for a new request.",
        );
      if (found.status === "DONE") return { kind: "replay", status: found.response_status!, body: found.response_body! };
      // Still running, unless the request that claimed it died: then this retry takes over.
      const takeover = await this.repo.update(
        { api_key_id: apiKeyId, idem_key: key, status: "RUNNING", locked_until: LessThan(now) },
        { locked_until: lockUntil },
      );
      if (affected(takeover) === 1) return { kind: "proceed", scope: `${apiKeyId}:${key}:${found.created_at}`, retry: true, lease: lockUntil };
      break;
    }
    throw new AppError(409, "idempotency_key_in_use", "A request with this Idempotency-Key is still running; retry shortly.");
  }

  /** Stores the answer of the request holding the key under `lease` (begin's). */
  async complete(apiKeyId: string, key: string, lease: number, status: number, body: string): Promise<void> {
    await this.repo.update(
      { api_key_id: apiKeyId, idem_key: key, status: "RUNNING", locked_until: lease },
      { status: "DONE", response_status: status, response_body: body },
    );
  }

  /** Forgets a key whose request ran nothing (validation errors): the key may carry another request. */
  async forget(apiKeyId: string, key: string, lease: number): Promise<void> {
    await this.repo.delete({ api_key_id: apiKeyId, idem_key: key, status: "RUNNING", locked_until: lease });
  }

  /**
   * Keeps a key whose request ended without an answer to remember (a failure, or its work still
   * running elsewhere) but lets the next retry take it over at once, under the same claim (scope),
   * so the retry finds whatever that request left behind instead of starting a second one.
   */
  async unlock(apiKeyId: string, key: string, lease: number): Promise<void> {
    await this.repo.update({ api_key_id: apiKeyId, idem_key: key, status: "RUNNING", locked_until: lease }, { locked_until: 0 });
  }

  /** Deletes expired keys, oldest first in batches (short statements that never lock the table for long, after downtime too). */
  async purgeExpired(): Promise<number> {
    const now = Date.now();
    let purged = 0;
    for (;;) {
      const old: { api_key_id: string; idem_key: string }[] = await queryRows(
        this.deps.ds,
        `SELECT api_key_id, idem_key FROM idempotency_keys WHERE expires_at < ? ORDER BY expires_at LIMIT ${PURGE_BATCH}`,
        [now],
      );
      if (old.length === 0) return purged;
      const pairs = old.map(() => "(?, ?)").join(", ");
      const res = await runSql(this.deps.ds, `DELETE FROM idempotency_keys WHERE expires_at < ? AND (api_key_id, idem_key) IN (${pairs})`, [
        now,
        ...old.flatMap((k) => [k.api_key_id, k.idem_key]),
      ]);
      purged += res.affected ?? 0;
      if (old.length < PURGE_BATCH) return purged;
    }
  }
}
