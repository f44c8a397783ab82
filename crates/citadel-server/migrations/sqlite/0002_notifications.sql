-- Durable player notifications (SQLite). `seq` orders an inbox and backs
-- the list cursor; `id` is the opaque id clients deduplicate by.
CREATE TABLE notifications (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT NOT NULL UNIQUE,
    recipient    TEXT NOT NULL REFERENCES accounts(user_id),
    code         BIGINT NOT NULL,
    subject      TEXT NOT NULL,
    content      TEXT NOT NULL,
    sender       TEXT NOT NULL,
    delivery_key TEXT,
    created_at   BIGINT NOT NULL,
    read_at      BIGINT
);
CREATE INDEX notifications_inbox ON notifications(recipient, seq);
CREATE UNIQUE INDEX notifications_delivery_key ON notifications(recipient, delivery_key)
    WHERE delivery_key IS NOT NULL;
