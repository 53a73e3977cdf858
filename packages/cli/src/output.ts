import { formatMoney } from "@cardctl/sdk";

export interface OutputOptions {
  json?: boolean;
  /** commander's --no-color gives color: false */
  color?: boolean;
}

const CODES = {
  bold: [1, 22],
  dim: [2, 22],
  red: [31, 39],
  green: [32, 39],
  yellow: [33, 39],
  blue: [34, 39],
  magenta: [35, 39],
  cyan: [36, 39],
  gray: [90, 39],
  inverse: [7, 27],
} as const;
export type Style = keyof typeof CODES;

/** Colour only on a TTY, never with NO_COLOR (any value) or --no-color; FORCE_COLOR forces it. */
export function colorEnabled(stream: NodeJS.WriteStream, opts: OutputOptions, env = process.env): boolean {
  if (opts.color === false || (env.NO_COLOR !== undefined && env.NO_COLOR !== "")) return false;
  if (env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== "0") return true;
  return Boolean(stream.isTTY) && env.TERM !== "dumb";
}

const ANSI = /\x1b\[[0-9;]*m/g;
export const visibleLength = (s: string) => s.replace(ANSI, "").length;

/** The parameters of our own styles' escape sequences: the only ones printed as they are. */
const OWN_SGR = new Set<string>(Object.values(CODES).flatMap((codes) => codes.map(String)));
const ownStyle = (params: string) => params.split(";").every((p) => OWN_SGR.has(p));
/** ESC and the SGR sequence it may start. */
const ESCAPES = /\x1b(\[[0-9;]*m)?/g;
/**
 * Control characters but ESC (handled above), tab and newline: C0, DEL, C1, and the bidirectional
 * controls and separators, which could make a text read as another.
 */
const CONTROLS = /[\x00-\x08\x0b-\x1a\x1c-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;
const LINE_BREAKS = /[\n\t]/g;
const escaped = (c: string) => (c === "\n" ? "\\n" : c === "\t" ? "\\t" : c === "\r" ? "\\r" : `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);

/**
 * Text for the terminal, whatever it holds: API data carries what agents wrote (a purpose, an
 * agent id, a merchant's name), which must not move the cursor, hide text, draw a fake row or
 * rename the window before a human who approves from it. Control characters are shown escaped
 * (`\u001b[8m`, `\r`), our own styles kept; `oneLine` escapes line breaks and tabs too (a table
 * cell, a summary).
 */
export function terminalSafe(s: string, oneLine = false): string {
  const text = s.replace(ESCAPES, (seq, sgr: string | undefined) => (sgr && ownStyle(sgr.slice(1, -1)) ? seq : `\\u001b${sgr ?? ""}`)).replace(CONTROLS, escaped);
  return oneLine ? text.replace(LINE_BREAKS, escaped) : text;
}

export class Output {
  readonly json: boolean;
  readonly color: boolean;
  readonly errColor: boolean;
  readonly interactive: boolean;

  constructor(
    opts: OutputOptions,
    readonly stdout: NodeJS.WriteStream = process.stdout,
    readonly stderr: NodeJS.WriteStream = process.stderr,
  ) {
    this.json = Boolean(opts.json);
    this.color = colorEnabled(stdout, opts);
    this.errColor = colorEnabled(stderr, opts);
    this.interactive = Boolean(process.stdin.isTTY && stdout.isTTY);
  }

  style(s: string, ...styles: Style[]): string {
    if (!this.color) return s;
    return styles.reduce((acc, st) => `\x1b[${CODES[st][0]}m${acc}\x1b[${CODES[st][1]}m`, s);
  }

  errStyle(s: string, ...styles: Style[]): string {
    if (!this.errColor) return s;
    return styles.reduce((acc, st) => `\x1b[${CODES[st][0]}m${acc}\x1b[${CODES[st][1]}m`, s);
  }

  line(s = ""): void {
    this.stdout.write(terminalSafe(s) + "\n");
  }

  err(s = ""): void {
    this.stderr.write(terminalSafe(s) + "\n");
  }

  printJson(value: unknown): void {
    this.stdout.write(JSON.stringify(value, null, 2) + "\n");
  }

  status(s: string | null | undefined): string {
    if (!s) return "-";
    const colour: Record<string, Style> = {
      OPEN: "green",
      APPROVED: "green",
      USED: "blue",
      CLOSED: "gray",
      PENDING: "yellow",
      PENDING_APPROVAL: "yellow",
      REJECTED: "red",
      EXPIRED: "gray",
    };
    const st = colour[s];
    return st ? this.style(s, st) : s;
  }

  money(cents: number | null | undefined): string {
    return formatMoney(cents);
  }

  /** A hint or note for the person (not data): on stderr, so stdout stays the result alone. */
  hint(s: string): void {
    if (this.json) return;
    this.err(this.errStyle(s, "dim"));
  }

  /**
   * Aligned columns with a bold header, as wide as the terminal at most (80 columns when stdout is
   * not a terminal). To fit, the `shrink` columns (PURPOSE first) are cut with "…", down to 8
   * characters each (or their header), and if that is not enough the `drop` columns are left out, in order.
   */
  table(headers: string[], cells: string[][], empty = "Nothing to show.", o: { shrink?: string[]; drop?: string[] } = {}): void {
    const rows = cells.map((row) => row.map((cell) => terminalSafe(cell, true)));
    if (rows.length === 0) {
      this.line(this.style(empty, "dim"));
      return;
    }
    const max = terminalWidth(this.stdout);
    const natural = headers.map((h, i) => Math.max(visibleLength(h), ...rows.map((r) => visibleLength(r[i] ?? ""))));
    const shrink = (o.shrink ?? []).map((h) => headers.indexOf(h)).filter((i) => i >= 0);
    const least = (i: number) => (shrink.includes(i) ? Math.min(natural[i]!, Math.max(visibleLength(headers[i]!), 8)) : natural[i]!);
    let shown = headers.map((_, i) => i);
    const total = (width: (i: number) => number) => shown.reduce((sum, i) => sum + width(i), 0) + 2 * (shown.length - 1);
    for (const name of o.drop ?? []) {
      if (total(least) <= max) break;
      shown = shown.filter((i) => headers[i] !== name);
    }
    const widths = [...natural];
    let over = total((i) => widths[i]!) - max;
    for (const i of shrink) {
      if (over <= 0) break;
      const cut = Math.min(over, widths[i]! - least(i));
      widths[i] = widths[i]! - cut;
      over -= cut;
    }
    const cell = (c: string, i: number) => (visibleLength(c) > widths[i]! ? truncate(c.replace(ANSI, ""), widths[i]!) : c);
    const fmt = (cells: string[]) =>
      shown
        .map((i, k) => {
          const c = cell(cells[i] ?? "", i);
          return k === shown.length - 1 ? c : c + " ".repeat(Math.max(0, widths[i]! - visibleLength(c)));
        })
        .join("  ")
        .trimEnd();
    this.line(this.style(fmt(headers), "bold"));
    for (const r of rows) this.line(fmt(r));
  }

  /** Key/value pairs, keys aligned. */
  kv(pairs: Array<[string, string]>): void {
    const width = Math.max(...pairs.map(([k]) => k.length));
    for (const [k, v] of pairs) this.line(`${this.style(k.padEnd(width), "dim")}  ${terminalSafe(v, true)}`);
  }

  /** A spinner on stderr while `work` runs, only when stderr is a TTY and not --json. */
  async spin<T>(text: string, work: () => Promise<T>): Promise<T> {
    if (this.json || !this.stderr.isTTY) return work();
    const frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
    let i = 0;
    const draw = () => this.stderr.write(`\r${this.errStyle(frames[i++ % frames.length]!, "cyan")} ${text}\x1b[K`);
    draw();
    const timer = setInterval(draw, 80);
    try {
      return await work();
    } finally {
      clearInterval(timer);
      this.stderr.write("\r\x1b[K");
    }
  }
}

/** "3 min ago", "in 2 h", "just now"; "-" for null. */
export function relativeTime(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return "-";
  const t = Date.parse(iso);
  if (Number.isNaN(t)) return iso;
  const diff = Math.trunc((t - now) / 1000);
  const abs = Math.abs(diff);
  if (abs < 10) return "just now";
  let n: number;
  let unit: string;
  if (abs < 60) [n, unit] = [abs, "s"];
  else if (abs < 3600) [n, unit] = [Math.floor(abs / 60), "min"];
  else if (abs < 86400) [n, unit] = [Math.floor(abs / 3600), "h"];
  else if (abs < 86400 * 60) [n, unit] = [Math.floor(abs / 86400), n1(Math.floor(abs / 86400), "day")];
  else return iso.slice(0, 10);
  return diff < 0 ? `${n} ${unit} ago` : `in ${n} ${unit}`;
}

const n1 = (n: number, word: string) => (n === 1 ? word : `${word}s`);

export function truncate(s: string | null | undefined, max: number): string {
  if (!s) return "-";
  return s.length > max ? s.slice(0, max - 1) + "…" : s;
}

/** Columns of the terminal on `stream`; when it is not a terminal (a pipe, a file), $COLUMNS, else 80. */
export function terminalWidth(stream: NodeJS.WriteStream = process.stdout, env = process.env): number {
  if (stream.isTTY && stream.columns) return stream.columns;
  const columns = Number(env.COLUMNS);
  return Number.isInteger(columns) && columns > 0 ? columns : 80;
}

/** 900000 → "15 min", 90000 → "1 min 30 s", 1500 → "1.5 s", 250 → "250 ms", 7200000 → "2 h". */
export function formatDuration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return `${ms} ms`;
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${Math.round(ms / 100) / 10} s`;
  const parts: string[] = [];
  let rest = Math.round(ms / 1000);
  const h = Math.floor(rest / 3600);
  rest -= h * 3600;
  const min = Math.floor(rest / 60);
  const sec = rest - min * 60;
  if (h) parts.push(`${h} h`);
  if (min) parts.push(`${min} min`);
  if (sec && !h) parts.push(`${sec} s`);
  return parts.join(" ");
}

/** Every "<n> ms" of a message (the SDK's timeouts) in words: "within 900000 ms" → "within 15 min". */
export const durationsInWords = (message: string) => message.replace(/\b(\d+) ms\b/g, (_m, n: string) => formatDuration(Number(n)));
