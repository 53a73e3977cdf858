/**
 * The settings loadConfig refuses (a ConfigError naming the variable, which main prints as the one
 * start-up line) and the ones it accepts, and the masking of credentials in printed URLs.
 */
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig, maskSecrets, maskUrl } from "../src/config.js";

const PASSWORD = "s3cret-Pa55";

/** The ConfigError loadConfig throws for `env`. */
function refusal(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

describe("credentials in printed URLs", () => {
  it.each([
    [`mysql://app:p@${PASSWORD}@127.0.0.1:1/cardctl`, "mysql://app:***@127.0.0.1:1/cardctl"],
    [`mysql://app:pa/${PASSWORD}@127.0.0.1:1/cardctl`, "mysql://app:***@127.0.0.1:1/cardctl"],
    // Parses, but as host "app", port 12 and a path holding the rest of the password.
    [`mysql://app:12/${PASSWORD}@127.0.0.1:1/cardctl`, "mysql://app:***@127.0.0.1:1/cardctl"],
    [`mysql://app:${PASSWORD}@[bad/cardctl`, "mysql://app:***@[bad/cardctl"],
    [`mysql://app:p%40${PASSWORD}@db:3306/cardctl`, "mysql://app:***@db:3306/cardctl"],
    [`redis://:${PASSWORD}@127.0.0.1:6390`, "redis://:***@127.0.0.1:6390"],
    ["mysql://root@127.0.0.1:3306/cardctl", "mysql://root@127.0.0.1:3306/cardctl"],
    ["sqlite:./data/cardctl.sqlite", "sqlite:./data/cardctl.sqlite"],
  ])("maskUrl(%s)", (url, masked) => {
    expect(maskUrl(url)).toBe(masked);
  });

  it("maskSecrets masks every URL in a text, whatever its password holds", () => {
    const text = `connect 'mysql://app:p@${PASSWORD}@db/cardctl' failed; also redis://:a/${PASSWORD}@cache:6379 and https://example.com/docs`;
    expect(maskSecrets(text)).toBe("connect 'mysql://app:***@db/cardctl' failed; also redis://:***@cache:6379 and https://example.com/docs");
  });

  it.each([`mysql://app:pa/${PASSWORD}@127.0.0.1:1/cardctl`, `mysql://app:12/${PASSWORD}@127.0.0.1:1/cardctl`])(
    "a DATABASE_URL whose password needs percent-encoding is refused, masked: %s",
    (url) => {
      const { message } = refusal({ DATABASE_URL: url });
      expect(message).toContain("DATABASE_URL 'mysql://app:***@127.0.0.1:1/cardctl' is not a valid URL");
      expect(message).not.toContain(PASSWORD);
    },
  );

  it("a password with @ is accepted (the last @ ends it)", () => {
    expect(loadConfig({ DATABASE_URL: `mysql://app:p@${PASSWORD}@127.0.0.1:1/cardctl` }).databaseUrl).toBe(`mysql://app:p@${PASSWORD}@127.0.0.1:1/cardctl`);
  });
});

describe("Stripe keys match their mode", () => {
  it.each([
    ["STRIPE_TEST_SECRET_KEY", "sk_live_51AbCdEfGhIjKlMn", "STRIPE_TEST_SECRET_KEY must be a test-mode Stripe secret key, starting with sk_test_ or rk_test_", "'sk_live_…'"],
    ["STRIPE_TEST_SECRET_KEY", "rk_live_51AbCdEfGhIjKlMn", "STRIPE_TEST_SECRET_KEY must be a test-mode", "'rk_live_…'"],
    ["STRIPE_TEST_SECRET_KEY", "pk_test_51AbCdEfGhIjKlMn", "STRIPE_TEST_SECRET_KEY must be a test-mode", "'pk_test_…'"],
    ["STRIPE_LIVE_SECRET_KEY", "sk_test_51AbCdEfGhIjKlMn", "STRIPE_LIVE_SECRET_KEY must be a live-mode Stripe secret key, starting with sk_live_ or rk_live_", "'sk_test_…'"],
    ["STRIPE_LIVE_SECRET_KEY", "51AbCdEfGhIjKlMn", "STRIPE_LIVE_SECRET_KEY must be a live-mode", "something that is not a Stripe key"],
    ["STRIPE_LIVE_SECRET_KEY", "sk_live_51Ab CdEf", "STRIPE_LIVE_SECRET_KEY must be a live-mode", "'sk_live_…'"],
    ["STRIPE_WEBHOOK_SECRET", "whsec_51AbCdEfGhIjKlMn,sk_test_51AbCdEfGhIjKlMn", "STRIPE_WEBHOOK_SECRET must be Stripe webhook signing secrets, each starting with whsec_", "'sk_test_…'"],
  ])("%s=%s is refused", (name, value, message, got) => {
    const error = refusal({ [name]: value });
    expect(error.message).toContain(message);
    expect(error.message).toContain(`got ${got}`);
    // Never the key itself: only what it starts with.
    expect(error.message).not.toContain("51AbCdEf");
  });

  it("keys of their own mode, restricted keys and several webhook secrets are accepted", () => {
    expect(loadConfig({ STRIPE_TEST_SECRET_KEY: "sk_test_abc", STRIPE_LIVE_SECRET_KEY: "sk_live_abc", STRIPE_WEBHOOK_SECRET: "whsec_a, whsec_b" })).toMatchObject({
      stripeTestSecretKey: "sk_test_abc",
      stripeLiveSecretKey: "sk_live_abc",
      stripeWebhookSecrets: [
        { secret: "whsec_a", mode: undefined },
        { secret: "whsec_b", mode: undefined },
      ],
    });
    // Each mode's endpoint its own: an event signed with one must be of its mode.
    expect(loadConfig({ STRIPE_TEST_WEBHOOK_SECRET: "whsec_t1,whsec_t2", STRIPE_LIVE_WEBHOOK_SECRET: "whsec_l" }).stripeWebhookSecrets).toEqual([
      { secret: "whsec_t1", mode: "test" },
      { secret: "whsec_t2", mode: "test" },
      { secret: "whsec_l", mode: "live" },
    ]);
    expect(loadConfig({ STRIPE_TEST_SECRET_KEY: "rk_test_abc", STRIPE_LIVE_SECRET_KEY: "rk_live_abc" })).toMatchObject({
      stripeTestSecretKey: "rk_test_abc",
      stripeLiveSecretKey: "rk_live_abc",
    });
  });
});

describe("numbers: digits only, within bounds", () => {
  // Every number has a ceiling (APPROVAL_TTL_SECONDS=100000000000000 made card creation fail with 500).
  it.each([
    ["PORT", 65535],
    ["APPROVAL_TTL_SECONDS", 2592000],
    ["CARD_TTL_SECONDS", 345600],
    ["RATE_LIMIT_PER_HOUR", 1000000000],
    ["PROCESSOR_TIMEOUT_MS", 600000],
    ["REQUEST_TIMEOUT_MS", 3600000],
    ["CREATION_LEASE_MS", 3600000],
    ["MAINTENANCE_INTERVAL_MS", 86400000],
    ["EVENT_STREAM_HEARTBEAT_MS", 3600000],
    ["EVENT_STREAM_POLL_MS", 3600000],
    ["WEBHOOK_TIMEOUT_MS", 600000],
    ["WEBHOOK_RETRY_BASE_MS", 21600000],
    ["WEBHOOK_RETRY_WINDOW_MS", 2505600000],
    ["WEBHOOK_POLL_MS", 3600000],
  ])("%s: at most %i", (name, max) => {
    expect(refusal({ [name]: String(max + 1) }).message).toMatch(new RegExp(`^${name} must be an integer from \\d+ to ${max}, got '${max + 1}'$`));
    expect(refusal({ [name]: "100000000000000" }).message).toContain(`${name} must be an integer`);
    // (the longest processor timeout needs a creation lease of three of them)
    expect(() => loadConfig({ ...(name === "PROCESSOR_TIMEOUT_MS" ? { CREATION_LEASE_MS: "3600000" } : {}), [name]: String(max) })).not.toThrow();
  });

  it("CREATION_LEASE_MS is at least 4 x PROCESSOR_TIMEOUT_MS: a request still at the processor is never taken over", () => {
    expect(refusal({ PROCESSOR_TIMEOUT_MS: "30000" }).message).toBe(
      "CREATION_LEASE_MS (60000) must be at least 4 x PROCESSOR_TIMEOUT_MS (30000): a request still at the processor would be taken over. Raise CREATION_LEASE_MS to 120000 or more, or lower PROCESSOR_TIMEOUT_MS",
    );
    expect(refusal({ CREATION_LEASE_MS: "1000" }).message).toMatch(/^CREATION_LEASE_MS \(1000\) must be at least 4 x PROCESSOR_TIMEOUT_MS \(10000\)/);
    expect(loadConfig({ CREATION_LEASE_MS: "1000", PROCESSOR_TIMEOUT_MS: "250" })).toMatchObject({ creationLeaseMs: 1000, processorTimeoutMs: 250 });
    expect(loadConfig({})).toMatchObject({ creationLeaseMs: 60000, processorTimeoutMs: 10000 });
  });

  it("APPROVAL_TTL_SECONDS: 30 days at most", () => {
    expect(refusal({ APPROVAL_TTL_SECONDS: "100000000000000" }).message).toBe("APPROVAL_TTL_SECONDS must be an integer from 1 to 2592000, got '100000000000000'");
    expect(loadConfig({ APPROVAL_TTL_SECONDS: "2592000" }).approvalTtlSeconds).toBe(2592000);
  });

  it.each(["0x12A0", "4e3", "1.5", "-1", "+80", "80 80", "٤٠٠٠", "Infinity"])("PORT=%s is refused", (value) => {
    expect(refusal({ PORT: value }).message).toBe(`PORT must be an integer from 0 to 65535, got '${value}'`);
  });

  it.each([
    ["PORT", " ", "PORT is blank: set it to an integer from 0 to 65535, or unset it for the default (4000)"],
    ["PORT", "\t\n", "PORT is blank"],
    ["MAINTENANCE_INTERVAL_MS", " ", "MAINTENANCE_INTERVAL_MS is blank: set it to an integer from 0 to 86400000, or unset it for the default (30000)"],
  ])("%s=%j (blank) is refused", (name, value, message) => {
    expect(refusal({ [name]: value }).message).toContain(message);
  });

  it("surrounding whitespace is ignored; empty is the default", () => {
    expect(loadConfig({ PORT: " 8080\n" }).port).toBe(8080);
    expect(loadConfig({ PORT: "" }).port).toBe(4000);
    expect(loadConfig({ MAINTENANCE_INTERVAL_MS: "0" }).maintenanceIntervalMs).toBe(0);
  });
});

describe("HOST and PUBLIC_URL", () => {
  it.each([
    [{ HOST: "::" }, "http://[::]:4000"],
    [{ HOST: "::1", PORT: "4100" }, "http://[::1]:4100"],
    [{ HOST: "0.0.0.0" }, "http://0.0.0.0:4000"],
    [{ HOST: "localhost" }, "http://localhost:4000"],
    [{ PUBLIC_URL: "https://cards.example.com/" }, "https://cards.example.com"],
    [{ PUBLIC_URL: "http://[::1]:4000/cardctl/" }, "http://[::1]:4000/cardctl"],
  ])("%o: PUBLIC_URL %s", (env, publicUrl) => {
    expect(loadConfig(env).publicUrl).toBe(publicUrl);
  });

  it.each([
    ["cardctl.example", "PUBLIC_URL must be an http:// or https:// URL"],
    ["ftp://cards.example", "PUBLIC_URL must be an http:// or https:// URL"],
    ["http://", "PUBLIC_URL must be an http:// or https:// URL"],
    ["https://cards example.com", "PUBLIC_URL must be an http:// or https:// URL"],
    ["https://cards.example.com/?ref=1", "PUBLIC_URL must have no query (?…) or fragment (#…)"],
    ["https://cards.example.com/?", "PUBLIC_URL must have no query (?…) or fragment (#…)"],
    ["https://cards.example.com/#top", "PUBLIC_URL must have no query (?…) or fragment (#…)"],
    [`https://admin:${PASSWORD}@cards.example.com`, "PUBLIC_URL must have no user or password"],
  ])("PUBLIC_URL=%s is refused", (value, message) => {
    const error = refusal({ PUBLIC_URL: value });
    expect(error.message).toContain(message);
    expect(error.message).not.toContain(PASSWORD);
  });

  it("a HOST that makes no URL is refused, naming HOST", () => {
    expect(refusal({ HOST: "my host" }).message).toContain("HOST 'my host' gives no valid default PUBLIC_URL");
  });
});

describe("ADMIN_TOKEN", () => {
  it.each([
    ["adm_0123456789 abcdefghij", "ADMIN_TOKEN must be printable ASCII with no whitespace"],
    ["adm_0123456789abcdefghij\n", "ADMIN_TOKEN must be printable ASCII with no whitespace"],
    ["\tadm_0123456789abcdefghij", "ADMIN_TOKEN must be printable ASCII with no whitespace"],
    ["adm_0123456789abcdéfghij", "ADMIN_TOKEN must be printable ASCII with no whitespace"],
    ["adm_0123456789a", "ADMIN_TOKEN must be at least 16 characters (it has 15)"],
  ])("%j is refused", (token, message) => {
    const error = refusal({ ADMIN_TOKEN: token });
    expect(error.message).toContain(message);
    expect(error.message).not.toContain("0123456789");
  });

  it("16 characters or more are accepted; unset, one is generated", () => {
    expect(loadConfig({ ADMIN_TOKEN: "adm_0123456789ab" }).adminToken).toBe("adm_0123456789ab");
    expect(loadConfig({}).adminToken).toBeUndefined();
  });
});
