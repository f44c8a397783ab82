-- Friends: one row per direction, each holding the state as its owner sees
-- it (invited_sent, invited_received, friend, blocked). A block keeps only
-- the blocker's row.
CREATE TABLE friendships (
    user_id    TEXT NOT NULL REFERENCES accounts(user_id),
    other_id   TEXT NOT NULL REFERENCES accounts(user_id),
    state      TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, other_id)
);
CREATE INDEX friendships_other ON friendships(other_id);
