import { describe, expect, it } from "vitest";
import { backoffMs } from "../src/domain/backoff.js";

describe("backoffMs", () => {
  const samples = (attempts: number, base?: number, max?: number) => Array.from({ length: 2000 }, () => backoffMs(attempts, base, max));

  it("doubles from the base with ±25 % jitter", () => {
    for (const [attempts, delay] of [[1, 2000], [2, 4000], [5, 32000]] as const) {
      const got = samples(attempts);
      expect(Math.min(...got)).toBeGreaterThanOrEqual(delay * 0.75);
      expect(Math.max(...got)).toBeLessThanOrEqual(delay * 1.25);
      expect(new Set(got).size).toBeGreaterThan(1000);
    }
  });

  it("never exceeds the cap, jitter included, and still spreads below it", () => {
    for (const attempts of [14, 15, 40]) {
      const got = samples(attempts, 5000, 6 * 3600_000);
      expect(Math.max(...got)).toBeLessThanOrEqual(6 * 3600_000);
      expect(Math.min(...got)).toBeGreaterThanOrEqual(0.75 * 6 * 3600_000);
      expect(got.filter((ms) => ms < 6 * 3600_000).length).toBeGreaterThan(500);
    }
  });
});
