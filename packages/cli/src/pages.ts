import type { PagePromise } from "@cardctl/sdk";
import type { Output } from "./output.js";

/** What a list command prints: one page (`--limit`), or with `--all` every page, `has_more` then false. */
export async function fetchList<T extends { id: string }>(
  out: Output,
  what: string,
  o: { all?: boolean },
  list: () => PagePromise<T>,
): Promise<{ data: T[]; has_more: boolean }> {
  const text = `Fetching ${what}`;
  if (o.all) return { data: await out.spin(text, () => list().toArray(Infinity)), has_more: false };
  return (await out.spin(text, async () => await list())).toJSON();
}
