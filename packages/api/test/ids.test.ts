import { afterEach, describe, expect, it, vi } from "vitest";
import { isoTime, newId, timeStamp } from "../src/domain/ids.js";

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

describe("isoTime", () => {
  const dateOwn = (ms: number) => new Date(ms).toISOString();

  it("writes what Date's toISOString writes, on the calendar's edges", () => {
    const edges = [
      0, 1, 999, 1000, 59_999, 60_000, 3_599_999, 86_399_999, 86_400_000,
      Date.UTC(1972, 1, 29), Date.UTC(1999, 11, 31, 23, 59, 59, 999), Date.UTC(2000, 1, 29, 12), Date.UTC(2000, 2, 1),
      Date.UTC(2024, 1, 29, 23, 59, 59, 999), Date.UTC(2026, 10, 28, 21, 54, 24, 7), Date.UTC(2100, 1, 28), Date.UTC(2100, 2, 1),
      Date.UTC(2400, 1, 29), Date.UTC(9999, 11, 31, 23, 59, 59, 999),
    ];
    for (const ms of edges) expect(isoTime(ms)).toBe(dateOwn(ms));
  });

  it("writes what Date's toISOString writes, for 100,000 random instants from 1970 to 9999", () => {
    for (let i = 0; i < 100_000; i++) {
      const ms = Math.floor(Math.random() * 253_402_300_800_000);
      expect(isoTime(ms)).toBe(dateOwn(ms));
    }
  });

  it("leaves other values to Date: before 1970, after 9999, fractions, and invalid ones still throw", () => {
    for (const ms of [-1, -86_400_001, 253_402_300_800_000, 8.64e15, 1.5]) expect(isoTime(ms)).toBe(dateOwn(ms));
    expect(() => isoTime(Number.NaN)).toThrow(RangeError);
  });
});
