import { describe, expect, it } from "vitest";
import { formatMoney } from "@cardctl/sdk";
import { CardctlError } from "@cardctl/sdk";
import { EXIT, exitCodeFor } from "../src/errors.js";
import { parseAmount, parseCents } from "../src/money.js";
import { parseLimit } from "../src/options.js";
import { relativeTime } from "../src/output.js";

describe("money", () => {
  it("parses dollars exactly", () => {
    expect(parseAmount("12.50")).toBe(1250);
    expect(parseAmount("12.5")).toBe(1250);
    expect(parseAmount("12")).toBe(1200);
    expect(parseAmount("$0.01")).toBe(1);
    expect(parseAmount("0.29")).toBe(29); // 0.29 * 100 = 28.999999999999996 in floating point
    expect(parseAmount("500.00")).toBe(50000);
    for (const bad of ["", "abc", "12.505", "-1", "1e3", "1,000", "0", "0.00", ".5", "12.", " "]) expect(() => parseAmount(bad)).toThrow();
  });
  it("parses cents", () => {
    expect(parseCents("1250")).toBe(1250);
    for (const bad of ["12.5", "-3", "0", "abc"]) expect(() => parseCents(bad)).toThrow();
  });
  it("says an amount too large to hold exactly is too large, not too small", () => {
    expect(() => parseAmount("100000000000000")).toThrow('--amount is too large, got "100000000000000".');
    expect(() => parseCents("99999999999999999")).toThrow('--amount-cents is too large, got "99999999999999999".');
    expect(() => parseAmount("0.00")).toThrow("--amount must be at least 0.01");
  });
  it("formats cents (the SDK's formatMoney, shared with the MCP tools and the dashboard)", () => {
    expect(formatMoney(1250)).toBe("$12.50");
    expect(formatMoney(5)).toBe("$0.05");
    expect(formatMoney(123456789)).toBe("$1,234,567.89");
    expect(formatMoney(-5)).toBe("-$0.05");
    expect(formatMoney(null)).toBe("-");
  });
});

describe("--limit", () => {
  it("takes a whole number from 1 to 100 written in digits, nothing else", () => {
    expect([parseLimit("1"), parseLimit("20"), parseLimit("100")]).toEqual([1, 20, 100]);
    for (const bad of ["0", "101", "-1", "1.5", "1e1", "0x10", " 5", "5 ", "", "abc", "007a"]) expect(() => parseLimit(bad), bad).toThrow("--limit must be a whole number from 1 to 100.");
  });
});

describe("exit codes", () => {
  it("3 for the API's unauthorized (or a bare 401), 1 for the card processor refusing an ephemeral key", () => {
    expect(exitCodeFor(new CardctlError({ status: 401, code: "unauthorized", message: "Invalid API key." }))).toBe(EXIT.AUTH);
    expect(exitCodeFor(new CardctlError({ status: 401, code: "http_401", message: "HTTP 401" }))).toBe(EXIT.AUTH);
    const refused = new CardctlError({ status: 401, code: "invalid_request_error", message: "The card processor refused the reveal: expired key" });
    expect(exitCodeFor(refused)).toBe(EXIT.API);
  });
});

describe("relative time", () => {
  const now = Date.parse("2026-11-21T12:00:00Z");
  it("formats past and future", () => {
    expect(relativeTime("2026-11-21T11:59:55Z", now)).toBe("just now");
    expect(relativeTime("2026-11-21T11:59:30Z", now)).toBe("30 s ago");
    expect(relativeTime("2026-11-21T11:57:00Z", now)).toBe("3 min ago");
    expect(relativeTime("2026-11-21T10:00:00Z", now)).toBe("2 h ago");
    expect(relativeTime("2026-11-20T12:00:00Z", now)).toBe("1 day ago");
    expect(relativeTime("2026-11-22T11:59:00Z", now)).toBe("in 23 h");
    expect(relativeTime(null, now)).toBe("-");
  });
});
