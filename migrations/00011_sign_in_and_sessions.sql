-- +goose NO TRANSACTION

-- Sign-in throttling by name and address together, and sign-out that ends
-- a session on the server.
--
-- 1. Failures are now counted per (name, address) pair, which locks, and
--    per name from anywhere, which only slows and spares the addresses
--    the user has signed in from before. The pair is one index range.
--    CONCURRENTLY, hence NO TRANSACTION: sign-ins go on while it builds;
--    a build that failed half way leaves an invalid index, so it is
--    dropped first.
--
-- 2. sign_in_addresses remembers where each name last signed in
--    successfully: those addresses are "known" and the per-name slow-down
--    does not apply to them, so an attacker guessing alice's password from
--    many addresses cannot keep alice herself out. One row per name and
--    address, refreshed on each success.
--
-- 3. session_revocations lists sessions that were signed out before they
--    expired. A session cookie lives in the browser, so without this a
--    copy taken before "Sign out" went on working until its idle timeout.
--    Only a SHA-256 of the session's secret is kept; a row can go once the
--    session would have expired anyway.
--
-- Both tables are new and small; IF NOT EXISTS makes the file rerunnable.

-- +goose Up
DROP INDEX CONCURRENTLY IF EXISTS login_attempts_name_addr_idx;
CREATE INDEX CONCURRENTLY login_attempts_name_addr_idx ON login_attempts (name, remote_addr, at DESC);

CREATE TABLE IF NOT EXISTS sign_in_addresses (
    name            text        NOT NULL,
    remote_addr     text        NOT NULL,
    last_success_at timestamptz NOT NULL,
    PRIMARY KEY (name, remote_addr)
);

CREATE TABLE IF NOT EXISTS session_revocations (
    sid_hash   bytea       PRIMARY KEY,
    user_id    bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    revoked_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS session_revocations_expires_idx ON session_revocations (expires_at);

-- +goose Down
DROP TABLE IF EXISTS session_revocations;
DROP TABLE IF EXISTS sign_in_addresses;
DROP INDEX CONCURRENTLY IF EXISTS login_attempts_name_addr_idx;
