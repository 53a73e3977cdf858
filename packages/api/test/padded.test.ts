import { describe, expect, it } from "vitest";
import { padded, placeholders } from "../src/db/fast.js";

describe("padded lists", () => {
  it("pad to the next power of two with the last element, so a statement has few texts", () => {
    expect(padded([])).toEqual([]);
    expect(padded(["a"])).toEqual(["a"]);
    expect(padded(["a", "b", "c"])).toEqual(["a", "b", "c", "c"]);
    expect(padded([1, 2, 3, 4])).toEqual([1, 2, 3, 4]);
    expect(padded([1, 2, 3, 4, 5])).toEqual([1, 2, 3, 4, 5, 5, 5, 5]);
    const texts = new Set(Array.from({ length: 320 }, (_, n) => placeholders(padded(Array.from({ length: n + 1 }, (_, i) => i)))));
    expect(texts.size).toBe(10);
  });
});
