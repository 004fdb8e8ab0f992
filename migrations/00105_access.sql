-- Who may use the console: users, API tokens, sign-in throttling and
-- signed-out sessions.

-- +goose Up

-- People who sign in to the console. Passwords are bcrypt hashes; a user
-- who signs in only through the SSO proxy needs no row at all. Names are
-- unique regardless of case, so "Alice" and "alice" cannot be two people.
--
-- session_epoch is copied into every session cookie and compared on each
-- request: bumping it (new password, disabled) ends every session the user
-- has, at once, without a server-side session table.
CREATE TABLE users (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name          text        NOT NULL,
    role          text        NOT NULL,
    password_hash bytea       NOT NULL,
    session_epoch bigint      NOT NULL DEFAULT 1,
    disabled_at   timestamptz,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT users_role_valid CHECK (role IN ('viewer', 'operator', 'admin')),
    CONSTRAINT users_name_valid CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9._@+-]{0,99}$')
);
CREATE UNIQUE INDEX users_name_key ON users (lower(name));

-- API tokens. Only the SHA-256 of a token is stored: tokens are 256 random
-- bits, so a fast hash is enough (no dictionary to guess from), and a stolen
-- table cannot be replayed. Active labels are unique so `redrive token
-- revoke LABEL` names exactly one.
CREATE TABLE api_tokens (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id      bigint      NOT NULL REFERENCES users (id),
    label        text        NOT NULL,
    token_hash   bytea       NOT NULL UNIQUE,
    created_by   text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz,

    CONSTRAINT api_tokens_label_valid CHECK (length(label) BETWEEN 1 AND 100)
);
CREATE UNIQUE INDEX api_tokens_active_label_key ON api_tokens (lower(label)) WHERE revoked_at IS NULL;
CREATE INDEX api_tokens_user_idx ON api_tokens (user_id);

-- Sign-in attempts, for throttling: failures are counted per (name,
-- address) pair, which locks, and per name from anywhere, which only slows
-- and spares the addresses the user has signed in from before. An attempt
-- is recorded as 'pending' before its password is checked, so that
-- concurrent guesses count against each other; it then becomes 'failed',
-- 'succeeded' or 'throttled' (refused without a check; not a failure).
-- Rows older than a day are deleted as new ones arrive.
CREATE TABLE login_attempts (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text        NOT NULL,
    remote_addr text        NOT NULL,
    at          timestamptz NOT NULL,
    outcome     text        NOT NULL DEFAULT 'pending',

    CONSTRAINT login_attempts_outcome_valid CHECK (outcome IN ('pending', 'failed', 'succeeded', 'throttled'))
);
CREATE INDEX login_attempts_name_idx ON login_attempts (name, at DESC);
CREATE INDEX login_attempts_addr_idx ON login_attempts (remote_addr, at DESC);
-- The pair's failures: one index range.
CREATE INDEX login_attempts_name_addr_idx ON login_attempts (name, remote_addr, at DESC);
CREATE INDEX login_attempts_at_idx ON login_attempts (at);

-- Where each name last signed in successfully: those addresses are "known"
-- and the per-name slow-down does not apply to them, so an attacker
-- guessing alice's password from many addresses cannot keep alice herself
-- out. One row per name and address, refreshed on each success.
CREATE TABLE sign_in_addresses (
    name            text        NOT NULL,
    remote_addr     text        NOT NULL,
    last_success_at timestamptz NOT NULL,
    PRIMARY KEY (name, remote_addr)
);

-- Sessions that were signed out before they expired. A session cookie
-- lives in the browser, so without this a copy taken before "Sign out"
-- would go on working until its idle timeout. Only a SHA-256 of the
-- session's secret is kept; a row can go once the session would have
-- expired anyway.
CREATE TABLE session_revocations (
    sid_hash   bytea       PRIMARY KEY,
    user_id    bigint      NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    revoked_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
CREATE INDEX session_revocations_expires_idx ON session_revocations (expires_at);

-- +goose Down
DROP TABLE session_revocations;
DROP TABLE sign_in_addresses;
DROP TABLE login_attempts;
DROP TABLE api_tokens;
DROP TABLE users;
