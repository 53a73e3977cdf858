import { describe, expect, it } from "vitest";
import { isLuhnValid, withLuhnDigit } from "../src/processor/luhn.js";

describe("Luhn", () => {
  it("completes known card numbers", () => {
    expect(withLuhnDigit("424242424242424")).toBe("4242424242424242");
    expect(isLuhnValid("4242424242424242")).toBe(true);
    expect(isLuhnValid("4242424242424241")).toBe(false);
  });
});
