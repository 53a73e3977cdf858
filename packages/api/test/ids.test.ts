import { afterEach, describe, expect, it, vi } from "vitest";
import { newId, timeStamp } from "../src/domain/ids.js";

afterEach(() => vi.useRealTimers());

describe("ids", () => {
  it("keep the public shape: a prefix and 24 base62 characters", () => {
    expect(newId("card")).toMatch(/^card_[0-9A-Za-z]{24}$/);
  });

  it("start with the millisecond they were made in, so later ids sort after earlier ones", () => {
    vi.useFakeTimers();
    const made: string[] = [];
    for (const at of [0, 1, 61, 62, 3843, 3844, Date.UTC(2026, 10, 24), Date.UTC(2026, 10, 24) + 1, Date.UTC(8000, 0, 1)]) {
      vi.setSystemTime(at);
      made.push(newId("evt"));
    }
    // Plain string order (SQLite's default, MariaDB's binary collation) is the order they were made in.
    expect([...made].sort()).toEqual(made);
    vi.setSystemTime(62);
    expect(timeStamp()).toBe("00000010");
  });

  it("differ within one millisecond (the random part)", () => {
    vi.useFakeTimers();
    vi.setSystemTime(Date.UTC(2026, 10, 24));
    const ids = new Set(Array.from({ length: 10_000 }, () => newId("evt")));
    expect(ids.size).toBe(10_000);
  });
});
