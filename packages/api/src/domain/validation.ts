import type { ZodError } from "zod";
import { AppError } from "./errors.js";

/** One entry of `details.issues` of a 400 validation_error. */
export interface ValidationIssue {
  /** The field, dotted (`policy_override.max_amount_cents`), or `(body)` for the body as a whole. */
  path: string;
  /** A sentence naming the field and what it must be, e.g. "amount_cents must be an integer number of cents from 1 to 50000". */
  message: string;
}

type Issue = ZodError["issues"][number] & Record<string, any>;

/** zod's own English texts ("Invalid input: …", "Too small: …"); anything else is a message of the contract's. */
const ZOD_DEFAULT = /^(Invalid (input|option|key|element|string|email|url|value|[A-Za-z ]+)\b|Too (small|big):|Unrecognized keys?:|Invalid$)/;

const TYPE_NOUN: Record<string, string> = {
  number: "a number",
  int: "an integer",
  string: "a string",
  boolean: "true or false",
  object: "a JSON object",
  array: "an array",
  bigint: "an integer",
  date: "a date",
  null: "null",
};

const FORMAT_NOUN: Record<string, string> = {
  email: "an email address",
  url: "a URL",
  uuid: "a UUID",
  datetime: "an ISO 8601 timestamp",
  date: "a date (YYYY-MM-DD)",
  regex: "in the expected format",
};

const noun = (t: unknown) => TYPE_NOUN[String(t)] ?? `of type ${String(t)}`;
const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;
const list = (values: unknown[]) => values.map((v) => (typeof v === "string" ? v : JSON.stringify(v))).join(", ");

/** What the value received was, from zod's default text ("…, received undefined"). */
function received(issue: Issue): string | undefined {
  if (typeof issue.received === "string") return issue.received;
  return /received (\w+)$/.exec(issue.message)?.[1];
}

function bound(issue: Issue, dir: "min" | "max"): string {
  const n = Number(dir === "min" ? issue.minimum : issue.maximum);
  const inclusive = issue.inclusive !== false;
  switch (issue.origin) {
    case "string":
      if (dir === "min" && n === 1) return "must not be empty";
      return `must be ${dir === "min" ? "at least" : "at most"} ${plural(n, "character")} long`;
    case "array":
    case "set":
      return `must have ${dir === "min" ? "at least" : "at most"} ${plural(n, "item")}`;
    case "int":
      return "must be an integer in the safe range";
    default:
      if (inclusive) return `must be ${dir === "min" ? "at least" : "at most"} ${n}`;
      return `must be ${dir === "min" ? "greater" : "less"} than ${n}`;
  }
}

/** The sentence after the field name for one zod issue (without the field name). */
function predicate(issue: Issue): string {
  switch (issue.code) {
    case "invalid_type": {
      const got = received(issue);
      if (got === "undefined") return `is required (${noun(issue.expected)})`;
      if (got === "NaN") return `must be ${noun(issue.expected)}`;
      return `must be ${noun(issue.expected)}${got ? `, not ${got === "null" ? "null" : TYPE_NOUN[got] ?? got}` : ""}`;
    }
    case "too_small":
      return bound(issue, "min");
    case "too_big":
      return bound(issue, "max");
    case "not_multiple_of":
      return `must be a multiple of ${issue.divisor}`;
    case "invalid_value": {
      const values: unknown[] = issue.values ?? [];
      return values.length === 1 ? `must be ${list(values)}` : `must be one of ${list(values)}`;
    }
    case "invalid_format":
      return `must be ${FORMAT_NOUN[issue.format] ?? `in the ${issue.format} format`}`;
    case "invalid_union":
      return "is not valid here";
    default:
      return "is not valid";
  }
}

/**
 * zod's issues as API-level sentences, one per field: what was missing, of the wrong type, out of
 * range, not one of the allowed values (listed) or not a field at all. Messages the contract wrote
 * itself ("must be an integer number of cents from 1 to 50000") are kept, after the field name.
 */
export function describeIssues(error: Pick<ZodError, "issues">): ValidationIssue[] {
  const out: ValidationIssue[] = [];
  const seen = new Set<string>();
  const push = (path: string, message: string) => {
    // One sentence per field: zod can report several checks of one value (e.g. not an integer and too big).
    if (seen.has(path)) return;
    seen.add(path);
    out.push({ path, message });
  };
  for (const raw of error.issues) {
    const issue = raw as Issue;
    const segments = issue.path.map(String);
    if (issue.code === "unrecognized_keys") {
      for (const key of issue.keys as string[]) {
        const where = segments.length ? segments.join(".") : "the request";
        push([...segments, key].join("."), `${[...segments, key].join(".")} is not a field of ${where} (field names are case-sensitive)`);
      }
      continue;
    }
    const path = segments.join(".") || "(body)";
    const subject = segments.length ? path : "the request body";
    const custom = typeof issue.message === "string" && issue.message !== "" && !ZOD_DEFAULT.test(issue.message);
    push(path, `${subject} ${custom ? issue.message : predicate(issue)}`);
  }
  return out;
}

/** The top-level message of a validation_error: every issue, in one line. */
function validationMessage(issues: ValidationIssue[]): string {
  return `Invalid request: ${issues.map((i) => i.message).join("; ")}.`;
}

/** The 400 validation_error of these issues: all of them in the message, each in `details.issues`. */
export function validationError(issues: ValidationIssue[]): AppError {
  return new AppError(400, "validation_error", validationMessage(issues), { issues });
}
