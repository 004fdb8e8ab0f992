-- +goose Up
-- +goose StatementBegin

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

-- Sign-in attempts, for throttling: recent failures per name and per
-- address decide whether the next attempt is slowed or refused. An attempt
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
CREATE INDEX login_attempts_at_idx ON login_attempts (at);
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DROP TABLE login_attempts;
DROP TABLE api_tokens;
DROP TABLE users;
-- +goose StatementEnd
