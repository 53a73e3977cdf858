import { LessThan, type FindOptionsWhere, type ObjectLiteral } from "typeorm";
import type { FastRepository, FindRead } from "../db/fast.js";
import { AppError } from "./errors.js";

export interface PageQuery {
  limit: number;
  startingAfter?: string;
}

export interface Page<T> {
  data: T[];
  has_more: boolean;
}

/** A `starting_after` that names no item of the list (another account's, another mode's, or none). */
export const unknownCursor = () =>
  new AppError(400, "validation_error", "Invalid request: starting_after does not name an item of this list.", {
    issues: [{ path: "starting_after", message: "does not name an item of this list" }],
  });

/**
 * Newest first by the auto-increment `seq`, a strict order even within one millisecond.
 * `startingAfter` is an id from the previous page, looked up within the same scope.
 */
export async function pageOf<T extends ObjectLiteral & { seq: number; id: string; account_id: string; mode: string }>(
  repo: FastRepository<T>,
  scope: { account_id: string; mode: string },
  filters: FindOptionsWhere<T>,
  page: PageQuery,
  /**
   * Rows to keep, checked here instead of in SQL: a filter that matches nearly every row (the
   * visible card statuses) as an IN list makes MariaDB range-scan and sort the whole account
   * instead of walking (account_id, mode, seq) newest first for one page.
   */
  keep?: (row: T) => boolean,
  /** How the rows are read: the index that serves this list newest first, a partial index's condition. */
  read: FindRead = {},
): Promise<Page<T>> {
  let filter = { ...scope, ...filters } as FindOptionsWhere<T>;
  if (page.startingAfter) {
    // The cursor is looked up in the whole scope: an item may have left a filtered list since.
    const cursor = await repo.findOne({ where: { ...scope, id: page.startingAfter } as FindOptionsWhere<T>, select: { seq: true } as never });
    if (!cursor)
      throw unknownCursor();
    filter = { ...filter, seq: LessThan(cursor.seq) } as FindOptionsWhere<T>;
  }
  const want = page.limit + 1;
  const find = (where: FindOptionsWhere<T>) => repo.findWith({ where, order: { seq: "DESC" } as never, take: want }, read);
  if (!keep) {
    const rows = await find(filter);
    return { data: rows.slice(0, page.limit), has_more: rows.length > page.limit };
  }
  const rows: T[] = [];
  for (;;) {
    const batch = await find(filter);
    for (const row of batch) if (keep(row) && rows.length < want) rows.push(row);
    if (rows.length >= want || batch.length < want) break;
    filter = { ...filter, seq: LessThan(batch[batch.length - 1]!.seq) } as FindOptionsWhere<T>;
  }
  return { data: rows.slice(0, page.limit), has_more: rows.length > page.limit };
}
