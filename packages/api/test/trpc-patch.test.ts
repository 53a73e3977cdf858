import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { initTRPC } from "@trpc/server";
import { describe, expect, it } from "vitest";

/** patches/@trpc+server+*.patch: tRPC's object-spread helper, which every middleware step runs. */
describe("@trpc/server's spread helper (patches/)", () => {
  it("is the patched one: npm install applied the patch to both builds", () => {
    const dist = dirname(createRequire(import.meta.url).resolve("@trpc/server"));
    const helpers = readdirSync(dist).filter((f) => /^getErrorShape-.*\.(mjs|cjs)$/.test(f));
    expect(helpers).toHaveLength(2);
    for (const file of helpers) expect(readFileSync(join(dist, file), "utf8"), file).toContain("Patched by cardctl");
  });

  it("copies as object spread does: merged context and input, a __proto__ key as an own property", async () => {
    const t = initTRPC.context<{ a: number }>().create();
    const echo = t.procedure
      .use(({ next }) => next({ ctx: { b: 2 } }))
      .input((v: unknown) => v as { x?: number })
      .input((v: unknown) => v as { x?: number })
      .query(({ ctx, input }) => ({ ctx, input }));
    const caller = t.createCallerFactory(t.router({ echo }))({ a: 1 });

    const { ctx, input } = await caller.echo(JSON.parse('{"x": 1, "__proto__": {"polluted": true}}'));
    expect(ctx).toEqual({ a: 1, b: 2 });
    expect(Object.getPrototypeOf(input)).toBe(Object.prototype);
    expect(Object.keys(input)).toEqual(["x", "__proto__"]);
    expect((input as { polluted?: boolean }).polluted).toBeUndefined();
  });
});
