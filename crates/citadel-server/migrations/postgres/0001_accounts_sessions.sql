-- Accounts, credentials, sessions and durable rate-limit counters (PostgreSQL).
CREATE TABLE accounts (
    user_id      TEXT PRIMARY KEY,
    username     TEXT NOT NULL UNIQUE,
    display_name TEXT,
    metadata     TEXT NOT NULL DEFAULT '{}',
    disabled     BOOLEAN NOT NULL DEFAULT FALSE,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);

CREATE TABLE credentials (
    kind       TEXT NOT NULL,
    credential TEXT NOT NULL,
    user_id    TEXT NOT NULL REFERENCES accounts(user_id),
    secret     TEXT,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (kind, credential)
);
CREATE INDEX credentials_user ON credentials(user_id);

CREATE TABLE sessions (
    session_id         TEXT PRIMARY KEY,
    user_id            TEXT NOT NULL REFERENCES accounts(user_id),
    access_hash        TEXT NOT NULL UNIQUE,
    refresh_hash       TEXT UNIQUE,
    access_expires_at  BIGINT NOT NULL,
    refresh_expires_at BIGINT NOT NULL,
    owner_node         TEXT NOT NULL,
    created_at         BIGINT NOT NULL,
    revoked_at         BIGINT,
    revoked_reason     TEXT
);
CREATE INDEX sessions_user ON sessions(user_id);

CREATE TABLE rate_limits (
    key_hash     TEXT NOT NULL,
    window_start BIGINT NOT NULL,
    count        BIGINT NOT NULL,
    PRIMARY KEY (key_hash, window_start)
);
