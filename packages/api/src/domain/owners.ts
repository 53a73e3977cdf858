import { In, LessThan, type EntityManager } from "typeorm";
import { databaseKind, isUniqueViolation } from "../db/datasource.js";
import { AccountEntity, OwnerEntity, OwnerInviteEntity, OwnerSessionEntity, SignInFailureEntity, type Owner, type OwnerInvite } from "../db/entities.js";
import type { Deps } from "./deps.js";
import { AppError, notFound } from "./errors.js";
import { isoTime, newId, randomToken } from "./ids.js";
import { hashPassword, verifyPassword } from "./passwords.js";
import { sha256 } from "./secrets.js";

const INVITE_TTL_MS = 24 * 60 * 60 * 1000;
/** Sessions end after 12 h without use (DESIGN 3.9); using one pushes its end forward. */
export const SESSION_IDLE_MS = 12 * 60 * 60 * 1000;
/** A session's expiry is pushed forward at most this often (one write per minute, not per request). */
const TOUCH_EVERY_MS = 60 * 1000;
/** A session ends this long after sign-in however busy it is: a stolen cookie does not live for ever. */
export const SESSION_MAX_MS = 7 * 24 * 60 * 60 * 1000;
/** Failed sign-ins in a row that block an email's sign-in, and for how long (also how long a failure counts). */
/** Failed sign-ins of an email from one client address before that address is blocked for it. */
const MAX_FAILED_SIGN_INS = 5;
/** Failed sign-ins of an email from all addresses together before it is blocked for all (guessing spread over many). */
const MAX_FAILED_SIGN_INS_IN_ALL = 50;
const BLOCK_MS = 15 * 60 * 1000;

/** A signed-in owner, as the HTTP layer hands it to procedures. */
export interface OwnerPrincipal {
  ownerId: string;
  email: string;
  accountId: string;
  sessionId: string;
  csrfToken: string;
  expiresAt: number;
}

/** A new session: the cookie's value (shown once, stored hashed) and what the page needs. */
export interface NewSession {
  token: string;
  owner: OwnerPrincipal;
}

const invalidCredentials = () => new AppError(401, "invalid_credentials", "Wrong email or password.");
const invalidInvite = () => new AppError(400, "invite_invalid", "This invite link is invalid, used or expired: ask the operator for a new one.");
export const normalizeEmail = (email: string) => email.trim().toLowerCase();

/** Owners of accounts: invites, passwords, sign-in and sessions (DESIGN 3.9). */
export class OwnerService {
  constructor(private readonly deps: Deps) {}

  private get ds() {
    return this.deps.ds;
  }

  /**
   * The operator invites an email to own an account: a one-time link, valid 24 h, that lets it set
   * a password (and signs it in). Inviting an existing owner of the account again works as a
   * password reset: it spends the earlier links, and at once ends the owner's sessions and voids
   * the old password (a reset after a compromise must shut the intruder out now, not when the link
   * is used). An email that owns another account is refused.
   */
  async invite(accountId: string, rawEmail: string): Promise<{ ownerId: string; email: string; url: string; expiresAt: number }> {
    if (!(await this.ds.getRepository(AccountEntity).findOneBy({ id: accountId }))) throw notFound("account");
    const email = normalizeEmail(rawEmail);
    const now = Date.now();
    const owners = this.ds.getRepository(OwnerEntity);
    let owner = await owners.findOneBy({ email });
    if (!owner) {
      try {
        await owners.insert({ id: newId("own"), account_id: accountId, email, password_hash: null, created_at: now });
      } catch (err) {
        if (!isUniqueViolation(err)) throw err; // invited twice at once: the other insert made it
      }
      owner = await owners.findOneByOrFail({ email });
    }
    if (owner.account_id !== accountId)
      throw new AppError(409, "owner_exists", `${email} already owns another account; an owner signs in to one account only.`);
    const token = `inv_${randomToken(40)}`;
    const expiresAt = now + INVITE_TTL_MS;
    // The newest link is the one that works: earlier unused ones for this email are spent, with
    // the owner's row locked first so that invitations at once queue (each spends the one before).
    await this.ds.transaction(async (m) => {
      await m.query("UPDATE owners SET password_hash = NULL WHERE id = ?", [owner.id]);
      await m.getRepository(OwnerSessionEntity).delete({ owner_id: owner.id });
      await m.query("UPDATE owner_invites SET used_at = ? WHERE email = ? AND used_at IS NULL", [now, email]);
      await m.getRepository(OwnerInviteEntity).insert({ id: newId("inv"), account_id: accountId, email, token_hash: sha256(token), created_at: now, expires_at: expiresAt, used_at: null });
    });
    // The token travels in the fragment: browsers never send it to a server, so no log holds it.
    return { ownerId: owner.id, email, url: `${this.deps.config.publicUrl}/invite#${token}`, expiresAt };
  }

  /** Spends an invite: the owner's password is set and a session starts. The claim is one conditional update: a link works once. */
  async acceptInvite(token: string, password: string): Promise<NewSession> {
    const usable = (invite: OwnerInvite | null, now: number): invite is OwnerInvite => !!invite && invite.used_at === null && invite.expires_at > now;
    // Checked before the password's hash (32 MB and tens of ms of scrypt): a made-up token costs nothing.
    if (!usable(await this.ds.getRepository(OwnerInviteEntity).findOneBy({ token_hash: sha256(token) }), Date.now())) throw invalidInvite();
    const hash = await hashPassword(password);
    return this.ds.transaction(async (m) => {
      const now = Date.now();
      const invite = await m.getRepository(OwnerInviteEntity).findOneBy({ token_hash: sha256(token) });
      if (!usable(invite, now)) throw invalidInvite();
      const claimed = await m
        .createQueryBuilder()
        .update(OwnerInviteEntity)
        .set({ used_at: now })
        .where("id = :id AND used_at IS NULL", { id: invite.id })
        .execute();
      if (claimed.affected !== 1) throw invalidInvite();
      const owner = await m.getRepository(OwnerEntity).findOneByOrFail({ email: invite.email });
      await m.getRepository(OwnerEntity).update({ id: owner.id }, { password_hash: hash });
      await m.getRepository(SignInFailureEntity).delete({ email_hash: sha256(owner.email) });
      // A new password (an invite again is the reset) ends every session the old one opened.
      await m.getRepository(OwnerSessionEntity).delete({ owner_id: owner.id });
      return this.startSession(m, owner, now);
    });
  }

  /**
   * Email and password to a session. After 5 failures in a row within 15 minutes from one client
   * address, the email is blocked for 15 minutes (429) from that address, whatever the password;
   * after 50 from all addresses together, from every address (guessing spread over many). Someone
   * else's failures do not lock the owner out of their own address, and attempts during a block
   * do not make it last longer. Unknown emails are counted and blocked the same way, and cost the
   * same time, so neither tells which emails are owners'. Each attempt is counted as a failure
   * before its password is checked (a success clears the counts), so attempts made at once cannot
   * all pass the count before any failure is recorded.
   */
  async signIn(rawEmail: string, password: string, clientIp: string): Promise<NewSession> {
    const email = normalizeEmail(rawEmail);
    const counts = [
      { hash: sha256(`${email}\n${clientIp}`), max: MAX_FAILED_SIGN_INS },
      { hash: sha256(email), max: MAX_FAILED_SIGN_INS_IN_ALL },
    ];
    const failures = this.ds.getRepository(SignInFailureEntity);
    const now = Date.now();
    for (const { hash, max } of counts) {
      await this.countFailure(hash, max, now);
      const record = (await failures.findOneBy({ email_hash: hash }))!;
      if (record.failures > max && record.blocked_until !== null && record.blocked_until > now) {
        const seconds = Math.ceil((record.blocked_until - now) / 1000);
        throw new AppError(429, "rate_limited", `Too many failed sign-ins for this email; try again in ${Math.ceil(seconds / 60)} minutes.`, { retry_after_seconds: seconds });
      }
    }
    const owner = await this.ds.getRepository(OwnerEntity).findOneBy({ email });
    const ok = await verifyPassword(password, owner?.password_hash ?? null);
    if (!owner || !ok) throw invalidCredentials();
    await failures.delete({ email_hash: In(counts.map((c) => c.hash)) });
    return this.ds.transaction((m) => this.startSession(m, owner, now));
  }

  /**
   * One more failed sign-in under a count (its key's hash): the count starts again when the last
   * failure is older than the block, or its block has ended, and the one that reaches `max` blocks
   * it (those after it too), until the block's end, which no attempt during it moves. SET reads the
   * old row on SQLite and left to right on MySQL, so each expression reads only columns set after
   * it; an ended block is cleared by a statement of its own first, for that reason.
   */
  private async countFailure(hash: string, max: number, now: number): Promise<void> {
    await this.ds.query("UPDATE sign_in_failures SET failures = 0, blocked_until = NULL WHERE email_hash = ? AND blocked_until <= ?", [hash, now]);
    const update =
      "blocked_until = CASE WHEN blocked_until > ? THEN blocked_until WHEN updated_at >= ? AND failures + 1 >= ? THEN ? ELSE NULL END, failures = CASE WHEN updated_at >= ? THEN failures + 1 ELSE 1 END, updated_at = ?";
    const insert = "INSERT INTO sign_in_failures (email_hash, failures, blocked_until, updated_at) VALUES (?, 1, NULL, ?)";
    const upsert = databaseKind(this.ds) === "mysql" ? `${insert} ON DUPLICATE KEY UPDATE ${update}` : `${insert} ON CONFLICT(email_hash) DO UPDATE SET ${update}`;
    const stale = now - BLOCK_MS;
    await this.ds.query(upsert, [hash, now, now, stale, max, now + BLOCK_MS, stale, now]);
  }

  /** Forgets failed sign-ins older than a block lasts (the maintenance pass). */
  async purgeSignInFailures(): Promise<number> {
    const res = await this.ds.getRepository(SignInFailureEntity).delete({ updated_at: LessThan(Date.now() - BLOCK_MS) });
    return res.affected ?? 0;
  }

  private async startSession(m: EntityManager, owner: Owner, now: number): Promise<NewSession> {
    const token = randomToken(43);
    const session = {
      id: newId("sess"),
      owner_id: owner.id,
      account_id: owner.account_id,
      token_hash: sha256(token),
      csrf_token: randomToken(32),
      created_at: now,
      expires_at: now + SESSION_IDLE_MS,
      revoked_at: null,
    };
    await m.getRepository(OwnerSessionEntity).insert(session);
    return {
      token,
      owner: { ownerId: owner.id, email: owner.email, accountId: owner.account_id, sessionId: session.id, csrfToken: session.csrf_token, expiresAt: session.expires_at },
    };
  }

  /** The session behind a cookie's token, or null (unknown, revoked, idle too long); using it keeps it alive. */
  async authenticate(token: string): Promise<OwnerPrincipal | null> {
    // One read per request: the session and its owner together.
    const [session]: {
      id: string;
      account_id: string;
      csrf_token: string;
      created_at: number | string;
      expires_at: number | string;
      revoked_at: number | string | null;
      owner_id: string;
      email: string;
    }[] = await this.ds.query(
      "SELECT s.id, s.account_id, s.csrf_token, s.created_at, s.expires_at, s.revoked_at, o.id AS owner_id, o.email FROM owner_sessions s JOIN owners o ON o.id = s.owner_id WHERE s.token_hash = ?",
      [sha256(token)],
    );
    const now = Date.now();
    if (!session || session.revoked_at !== null || Number(session.expires_at) <= now) return null;
    let expiresAt = Number(session.expires_at);
    const idleUntil = Math.min(now + SESSION_IDLE_MS, Number(session.created_at) + SESSION_MAX_MS);
    if (idleUntil - expiresAt > TOUCH_EVERY_MS) {
      expiresAt = idleUntil;
      await this.ds.query("UPDATE owner_sessions SET expires_at = ? WHERE id = ? AND revoked_at IS NULL AND expires_at < ?", [expiresAt, session.id, expiresAt]);
    }
    return { ownerId: session.owner_id, email: session.email, accountId: session.account_id, sessionId: session.id, csrfToken: session.csrf_token, expiresAt };
  }

  /** Whether a session still stands (not signed out, not idle too long), without keeping it alive. */
  async inForce(sessionId: string): Promise<boolean> {
    const [session]: { expires_at: number | string; revoked_at: number | string | null }[] = await this.ds.query(
      "SELECT expires_at, revoked_at FROM owner_sessions WHERE id = ?",
      [sessionId],
    );
    return !!session && session.revoked_at === null && Number(session.expires_at) > Date.now();
  }

  /** Signs out: the session is revoked for good (every instance sees it at once: it is a row). */
  async signOut(sessionId: string): Promise<void> {
    await this.ds.query("UPDATE owner_sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", [Date.now(), sessionId]);
  }
}

/** A signed-in owner as the API shows it. */
export const ownerView = (o: OwnerPrincipal) => ({ id: o.ownerId, email: o.email, account_id: o.accountId, session_expires_at: isoTime(o.expiresAt) });
