//! The data file's layout, versioned by `PRAGMA user_version`: migration `i` brings a
//! file from version `i` to `i + 1`, all of them in one transaction with the version.

use rusqlite::Connection;

/// The version this build writes: the number of migrations.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Each step, oldest first. Never edit a step once released: add one.
pub(super) const MIGRATIONS: &[&str] = &[
    // 1: every tier, the ledger and the queue.
    r#"
    CREATE TABLE meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
    INSERT INTO meta (key, value) VALUES ('opens', 0), ('fact_revision', 0);

    -- Short-term memory. `ts_key` and `root_key` sort like the ts (Ts::sort_key);
    -- `root_key` is '' at the top level.
    CREATE TABLE messages (
        channel TEXT NOT NULL,
        ts_key TEXT NOT NULL,
        ts TEXT NOT NULL,
        root_key TEXT NOT NULL,
        root TEXT,
        user TEXT NOT NULL,
        user_name TEXT NOT NULL,
        text TEXT NOT NULL,
        author TEXT NOT NULL,
        replies_to_bot INTEGER NOT NULL,
        in_dm INTEGER NOT NULL,
        private_channel INTEGER NOT NULL,
        at INTEGER NOT NULL,
        PRIMARY KEY (channel, ts_key)
    ) WITHOUT ROWID;
    -- The recent reads ("written since"), which stop at the first older message.
    CREATE INDEX messages_by_conversation_time ON messages (channel, root_key, at);
    CREATE INDEX messages_by_channel_time ON messages (channel, at);
    CREATE INDEX messages_by_time ON messages (at);

    -- Channel state as the ports' JSON, and the lull's reflection time beside it (it
    -- is never in the JSON).
    CREATE TABLE channel_states (
        channel TEXT PRIMARY KEY,
        state TEXT NOT NULL,
        lull_at INTEGER
    ) WITHOUT ROWID;

    CREATE TABLE workspace (key TEXT PRIMARY KEY, memory TEXT NOT NULL) WITHOUT ROWID;
    CREATE TABLE channel_lines (
        channel TEXT PRIMARY KEY,
        line TEXT NOT NULL
    ) WITHOUT ROWID;

    CREATE TABLE facts (
        channel TEXT NOT NULL,
        id TEXT NOT NULL,
        fact TEXT NOT NULL,
        rev INTEGER NOT NULL,
        PRIMARY KEY (channel, id)
    ) WITHOUT ROWID;
    CREATE TABLE notes (
        channel TEXT NOT NULL,
        user TEXT NOT NULL,
        note TEXT NOT NULL,
        PRIMARY KEY (channel, user)
    ) WITHOUT ROWID;
    CREATE TABLE profiles (user TEXT PRIMARY KEY, profile TEXT NOT NULL) WITHOUT ROWID;

    -- The ledger. A claim: `done` 0 in progress (until its lease ends), 1 completed
    -- (kept until `until`); `posting` 1 once its holder began to post.
    CREATE TABLE claims (
        key TEXT PRIMARY KEY,
        done INTEGER NOT NULL,
        until INTEGER NOT NULL,
        posting INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE cache (key TEXT PRIMARY KEY, value TEXT NOT NULL, until INTEGER NOT NULL) WITHOUT ROWID;

    -- The job queue. `visible_at`: when a waiting job is due, or when a delivered one
    -- (`taken` 1) comes back unless settled. `deliveries`: deliveries before the next.
    CREATE TABLE jobs (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        job TEXT NOT NULL,
        visible_at INTEGER NOT NULL,
        deliveries INTEGER NOT NULL,
        taken INTEGER NOT NULL
    );
    CREATE INDEX jobs_by_time ON jobs (visible_at, seq);
    -- Queued jobs this build could not read (a newer build's), kept to be looked at.
    CREATE TABLE dead_jobs (seq INTEGER PRIMARY KEY, job TEXT NOT NULL, reason TEXT NOT NULL);
    "#,
    // 2: the message a message replies to (a Discord reply), which answers a question.
    r#"
    ALTER TABLE messages ADD COLUMN replies_to TEXT;
    "#,
    // 3: Slack installations (issue 45): `key` is the workspace id, the JSON holds
    // the tokens sealed, `rev` the revision a token refresh is written over.
    r#"
    CREATE TABLE installations (key TEXT PRIMARY KEY, installation TEXT NOT NULL, rev INTEGER NOT NULL) WITHOUT ROWID;
    "#,
];

/// Brings a file at `version` up to `migrations.len()`, in one transaction: a file is
/// at one version or the next, never between.
pub(super) fn migrate(conn: &mut Connection, version: i64, migrations: &[&str]) -> rusqlite::Result<()> {
    let target = migrations.len() as i64;
    if version >= target {
        return Ok(());
    }
    let tx = conn.transaction()?;
    for (step, sql) in migrations.iter().enumerate().skip(version as usize) {
        tx.execute_batch(sql)?;
        tracing::info!(from = step, to = step + 1, "data file migrated");
    }
    tx.pragma_update(None, "user_version", target)?;
    tx.commit()
}
