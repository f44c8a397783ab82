-- Groups: one row per group, and one row per (group, user) holding the
-- user's standing: a role (member, admin, superadmin) or a pending
-- admission (join_request, invited). Names are unique.
CREATE TABLE groups (
    group_id     TEXT PRIMARY KEY,
    name         TEXT NOT NULL UNIQUE,
    description  TEXT NOT NULL,
    open         BOOLEAN NOT NULL,
    max_members  BIGINT NOT NULL,
    metadata     TEXT NOT NULL,
    creator_id   TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
CREATE TABLE group_members (
    group_id   TEXT NOT NULL REFERENCES groups(group_id) ON DELETE CASCADE,
    user_id    TEXT NOT NULL REFERENCES accounts(user_id),
    state      TEXT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (group_id, user_id)
);
CREATE INDEX group_members_user ON group_members(user_id);
