import type { ListResponse } from "./types.js";

/** Fetches the page that starts after `cursor` (the first page when undefined). */
export type PageLoader<T> = (cursor: string | undefined) => Promise<ListResponse<T>>;

/**
 * One page of a list: `data` and `has_more` as the API sent them, plus helpers to walk on.
 * `for await (const item of page)` yields this page's items and then every later page's.
 */
export class Page<T extends { id: string }> implements ListResponse<T>, AsyncIterable<T> {
  /** The items of this page, newest first. */
  readonly data: T[];
  /** Whether a later page exists. */
  readonly has_more: boolean;
  readonly #load: PageLoader<T>;

  /** @internal Pages come from list methods. */
  constructor(response: ListResponse<T>, load: PageLoader<T>) {
    this.data = response.data;
    this.has_more = response.has_more;
    this.#load = load;
  }

  /** True when {@link getNextPage} has something to fetch. */
  hasNextPage(): boolean {
    return this.has_more && this.data.length > 0;
  }

  /** Fetches the next page (`starting_after` = the last id of this one); `null` when this is the last. */
  async getNextPage(): Promise<Page<T> | null> {
    if (!this.hasNextPage()) return null;
    const cursor = this.data[this.data.length - 1]!.id;
    return new Page(await this.#load(cursor), this.#load);
  }

  /** Yields every item from this page on, fetching later pages as needed. */
  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    let page: Page<T> | null = this;
    while (page) {
      for (const item of page.data) yield item;
      page = await page.getNextPage();
    }
  }

  /** The page as the API sent it: `{ data, has_more }`. */
  toJSON(): ListResponse<T> {
    return { data: this.data, has_more: this.has_more };
  }
}

/**
 * What list methods return: `await` it for the first {@link Page}, or iterate it with
 * `for await (const item of client.cards.list(...))` to walk every page (has_more/starting_after).
 * The first request is sent when it is first awaited or iterated.
 */
export class PagePromise<T extends { id: string }> implements PromiseLike<Page<T>>, AsyncIterable<T> {
  readonly #load: PageLoader<T>;
  #first: Promise<Page<T>> | undefined;

  /** @internal List methods make these. */
  constructor(load: PageLoader<T>) {
    this.#load = load;
  }

  #page(): Promise<Page<T>> {
    this.#first ??= this.#load(undefined).then((r) => new Page(r, this.#load));
    return this.#first;
  }

  /** Sends the first request (once) and settles with the first page. */
  then<A = Page<T>, B = never>(
    onfulfilled?: ((value: Page<T>) => A | PromiseLike<A>) | null,
    onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null,
  ): Promise<A | B> {
    return this.#page().then(onfulfilled, onrejected);
  }

  /** Like `Promise.prototype.catch`, on the first page. */
  catch<B = never>(onrejected?: ((reason: unknown) => B | PromiseLike<B>) | null): Promise<Page<T> | B> {
    return this.#page().catch(onrejected);
  }

  /** Like `Promise.prototype.finally`, on the first page. */
  finally(onfinally?: (() => void) | null): Promise<Page<T>> {
    return this.#page().finally(onfinally);
  }

  /** Yields every item of every page. */
  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    yield* await this.#page();
  }

  /** Collects items of every page into an array, stopping after `max` items (default 10 000). */
  async toArray(max = 10_000): Promise<T[]> {
    const out: T[] = [];
    if (max <= 0) return out;
    for await (const item of this) {
      out.push(item);
      if (out.length >= max) break;
    }
    return out;
  }
}
