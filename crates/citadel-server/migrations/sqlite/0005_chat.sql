-- Durable chat (SQLite). A channel row holds its kind, its target and the
-- per-channel event counter; every mutation bumps `last_event_id` in the
-- same transaction that writes the message, its event and its outbox row.
-- Message ids are the event id of their creation (so they increase per
-- channel). Subscriptions are live, per connection, and stay in memory.
CREATE TABLE chat_channels (
    channel_id    TEXT PRIMARY KEY,
    kind          TEXT NOT NULL,
    target_a      TEXT NOT NULL,
    target_b      TEXT NOT NULL,
    last_event_id BIGINT NOT NULL,
    created_at    BIGINT NOT NULL
);
CREATE TABLE chat_messages (
    channel_id    TEXT NOT NULL REFERENCES chat_channels(channel_id),
    message_id    BIGINT NOT NULL,
    sender        TEXT NOT NULL,
    content       TEXT NOT NULL,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    revision      BIGINT NOT NULL,
    last_event_id BIGINT NOT NULL,
    deleted       BOOLEAN NOT NULL,
    PRIMARY KEY (channel_id, message_id)
);
-- Server-side revision history: the content each edit or tombstone replaced.
CREATE TABLE chat_revisions (
    channel_id TEXT NOT NULL,
    message_id BIGINT NOT NULL,
    revision   BIGINT NOT NULL,
    content    TEXT NOT NULL,
    replaced_at BIGINT NOT NULL,
    PRIMARY KEY (channel_id, message_id, revision)
);
-- The durable event log: one row per committed mutation.
CREATE TABLE chat_events (
    channel_id TEXT NOT NULL,
    event_id   BIGINT NOT NULL,
    event_type TEXT NOT NULL,
    message_id BIGINT NOT NULL,
    payload    TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (channel_id, event_id)
);
-- Live-delivery work: bounded (chat.max_outbox_rows), acknowledged once
-- every destination answered, useless after `expires_at`.
CREATE TABLE chat_outbox (
    channel_id TEXT NOT NULL,
    event_id   BIGINT NOT NULL,
    payload    TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (channel_id, event_id)
);
CREATE INDEX chat_outbox_expiry ON chat_outbox(expires_at);
-- Moderation audit: who tombstoned whose message, never the content (only
-- its SHA-256).
CREATE TABLE chat_moderation (
    audit_id       INTEGER PRIMARY KEY AUTOINCREMENT,
    channel_id     TEXT NOT NULL,
    message_id     BIGINT NOT NULL,
    actor_id       TEXT NOT NULL,
    actor_role     TEXT NOT NULL,
    author_id      TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    event_id       BIGINT NOT NULL,
    created_at     BIGINT NOT NULL
);
-- [chat.limits] fixed windows: one row per hashed (rule, key), its current
-- window and count; a new window resets the row in place (nothing to prune).
CREATE TABLE chat_rate_windows (
    key_hash     TEXT PRIMARY KEY,
    window_start BIGINT NOT NULL,
    count        BIGINT NOT NULL
);
