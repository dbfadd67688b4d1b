//! Short-term memory: [`MessageStore`] on the `messages` table, every read an index
//! range in ts order.

use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::{SqliteStore, bool_int};
use crate::domain::{Author, ChannelId, Message, ThreadKey, Timestamp, Ts, UserId};
use crate::ports::{ChannelWindow, MessageStore, PortResult, PutOutcome};

const COLUMNS: &str =
    "channel, ts, root, user, user_name, text, author, replies_to_bot, in_dm, private_channel, at, replies_to";

fn author_text(author: Author) -> &'static str {
    match author {
        Author::Human => "human",
        Author::OwnBot => "own_bot",
        Author::OtherBot => "other_bot",
    }
}

fn author_from(text: &str) -> Author {
    match text {
        "own_bot" => Author::OwnBot,
        "other_bot" => Author::OtherBot,
        _ => Author::Human,
    }
}

fn root_key(root: Option<&Ts>) -> String {
    root.map_or_else(String::new, Ts::sort_key)
}

fn message_from(row: &Row<'_>) -> rusqlite::Result<Arc<Message>> {
    Ok(Arc::new(Message {
        channel: ChannelId(row.get::<_, String>(0)?.into()),
        ts: Ts::new(row.get::<_, String>(1)?),
        thread_root: row.get::<_, Option<String>>(2)?.map(Ts::new),
        user: UserId(row.get::<_, String>(3)?.into()),
        user_name: row.get(4)?,
        text: row.get(5)?,
        author: author_from(&row.get::<_, String>(6)?),
        replies_to_bot: row.get(7)?,
        replies_to: row.get::<_, Option<String>>(11)?.map(Ts::new),
        in_dm: row.get(8)?,
        private_channel: row.get(9)?,
        at: Timestamp(row.get(10)?),
    }))
}

/// The rows `sql` selects (its columns [`COLUMNS`]), in the order it gives.
fn select(conn: &Connection, sql: &str, params: impl rusqlite::Params) -> rusqlite::Result<Vec<Arc<Message>>> {
    let mut statement = conn.prepare_cached(sql)?;
    statement.query_map(params, message_from)?.collect()
}

/// Newest-first rows back to oldest first.
fn oldest_first(mut newest_first: Vec<Arc<Message>>) -> Vec<Arc<Message>> {
    newest_first.reverse();
    newest_first
}

/// Messages read newest first by time, back in ts order (the two agree but for an
/// edit or a late delivery).
fn in_ts_order(mut messages: Vec<Arc<Message>>) -> Vec<Arc<Message>> {
    messages.sort_by(|a, b| a.ts.cmp(&b.ts));
    messages
}

/// A window from `limit + 1` newest-first rows: the extra row only says more exist.
fn window(mut rows: Vec<Arc<Message>>, limit: usize) -> ChannelWindow {
    let complete = rows.len() <= limit;
    rows.truncate(limit);
    ChannelWindow { messages: oldest_first(rows), complete }
}

fn limit_param(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

#[async_trait]
impl MessageStore for SqliteStore {
    /// Each read is an index lookup on a local file: no network between.
    fn reads_in_process(&self) -> bool {
        true
    }

    async fn put_message(&self, message: &Arc<Message>) -> PortResult<PutOutcome> {
        let conn = self.lock();
        let inserted = conn
            .prepare_cached(
                "INSERT INTO messages (channel, ts_key, ts, root_key, root, user, user_name, text, author,
                     replies_to_bot, in_dm, private_channel, at, replies_to)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
                 ON CONFLICT (channel, ts_key) DO NOTHING",
            )
            .and_then(|mut insert| {
                insert.execute(params![
                    message.channel.0.as_ref(),
                    message.ts.sort_key(),
                    message.ts.as_str(),
                    root_key(message.thread_root.as_ref()),
                    message.thread_root.as_ref().map(Ts::as_str),
                    message.user.0.as_ref(),
                    message.user_name,
                    message.text,
                    author_text(message.author),
                    bool_int(message.replies_to_bot),
                    bool_int(message.in_dm),
                    bool_int(message.private_channel),
                    message.at.as_micros(),
                    message.replies_to.as_ref().map(Ts::as_str),
                ])
            })
            .map_err(|e| self.failed(e))?;
        if inserted == 0 {
            return Ok(PutOutcome::AlreadyExists);
        }
        self.count_put(&conn).map_err(|e| self.failed(e))?;
        Ok(PutOutcome::Inserted)
    }

    async fn get_message(&self, channel: &ChannelId, ts: &Ts) -> PortResult<Option<Arc<Message>>> {
        let conn = self.lock();
        let sql = format!("SELECT {COLUMNS} FROM messages WHERE channel = ?1 AND ts_key = ?2");
        let mut statement = conn.prepare_cached(&sql).map_err(|e| self.failed(e))?;
        statement
            .query_row(params![channel.0.as_ref(), ts.sort_key()], message_from)
            .optional()
            .map_err(|e| self.failed(e))
    }

    async fn update_text(&self, channel: &ChannelId, ts: &Ts, text: &str) -> PortResult<bool> {
        let conn = self.lock();
        let mut update = conn
            .prepare_cached("UPDATE messages SET text = ?3 WHERE channel = ?1 AND ts_key = ?2")
            .map_err(|e| self.failed(e))?;
        Ok(update.execute(params![channel.0.as_ref(), ts.sort_key(), text]).map_err(|e| self.failed(e))? > 0)
    }

    async fn delete_message(&self, channel: &ChannelId, ts: &Ts) -> PortResult<bool> {
        let conn = self.lock();
        let mut delete = conn
            .prepare_cached("DELETE FROM messages WHERE channel = ?1 AND ts_key = ?2")
            .map_err(|e| self.failed(e))?;
        Ok(delete.execute(params![channel.0.as_ref(), ts.sort_key()]).map_err(|e| self.failed(e))? > 0)
    }

    async fn recent_in_thread(
        &self,
        thread: &ThreadKey,
        since: Timestamp,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        // By time, newest first: the read ends at the first message older than `since`
        // instead of walking the whole conversation for it.
        let sql = format!(
            "SELECT {COLUMNS} FROM messages WHERE channel = ?1 AND root_key = ?2 AND at >= ?3
             ORDER BY at DESC, ts_key DESC LIMIT ?4"
        );
        let key = root_key(thread.root.as_ref());
        let params = params![thread.channel.0.as_ref(), key, since.as_micros(), limit_param(limit)];
        Ok(in_ts_order(select(&self.lock(), &sql, params).map_err(|e| self.failed(e))?))
    }

    async fn recent_in_channel(
        &self,
        channel: &ChannelId,
        since: Timestamp,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM messages WHERE channel = ?1 AND at >= ?2 ORDER BY at DESC, ts_key DESC LIMIT ?3"
        );
        let params = params![channel.0.as_ref(), since.as_micros(), limit_param(limit)];
        Ok(in_ts_order(select(&self.lock(), &sql, params).map_err(|e| self.failed(e))?))
    }

    async fn messages_after(
        &self,
        channel: &ChannelId,
        after: Option<&Ts>,
        limit: usize,
    ) -> PortResult<Vec<Arc<Message>>> {
        let sql = format!("SELECT {COLUMNS} FROM messages WHERE channel = ?1 AND ts_key > ?2 ORDER BY ts_key LIMIT ?3");
        let after = after.map_or_else(String::new, Ts::sort_key);
        select(&self.lock(), &sql, params![channel.0.as_ref(), after, limit_param(limit)]).map_err(|e| self.failed(e))
    }

    async fn channel_window(&self, channel: &ChannelId, limit: usize) -> PortResult<ChannelWindow> {
        let sql = format!("SELECT {COLUMNS} FROM messages WHERE channel = ?1 ORDER BY ts_key DESC LIMIT ?2");
        let rows = select(&self.lock(), &sql, params![channel.0.as_ref(), limit_param(limit.saturating_add(1))])
            .map_err(|e| self.failed(e))?;
        Ok(window(rows, limit))
    }

    async fn channel_window_before(&self, channel: &ChannelId, before: &Ts, limit: usize) -> PortResult<ChannelWindow> {
        let sql =
            format!("SELECT {COLUMNS} FROM messages WHERE channel = ?1 AND ts_key < ?2 ORDER BY ts_key DESC LIMIT ?3");
        let params = params![channel.0.as_ref(), before.sort_key(), limit_param(limit.saturating_add(1))];
        Ok(window(select(&self.lock(), &sql, params).map_err(|e| self.failed(e))?, limit))
    }

    async fn previous_in_channel(&self, channel: &ChannelId, before: &Ts) -> PortResult<Option<Arc<Message>>> {
        let sql =
            format!("SELECT {COLUMNS} FROM messages WHERE channel = ?1 AND ts_key < ?2 ORDER BY ts_key DESC LIMIT 1");
        let rows =
            select(&self.lock(), &sql, params![channel.0.as_ref(), before.sort_key()]).map_err(|e| self.failed(e))?;
        Ok(rows.into_iter().next())
    }

    async fn delete_messages_by(
        &self,
        channel: &ChannelId,
        user: &UserId,
        posted_before: Option<Timestamp>,
    ) -> PortResult<usize> {
        let conn = self.lock();
        let before = posted_before.map_or(i64::MAX, Timestamp::as_micros);
        let mut delete = conn
            .prepare_cached("DELETE FROM messages WHERE channel = ?1 AND user = ?2 AND at < ?3")
            .map_err(|e| self.failed(e))?;
        delete.execute(params![channel.0.as_ref(), user.0.as_ref(), before]).map_err(|e| self.failed(e))
    }

    async fn message_channels(&self) -> PortResult<Vec<ChannelId>> {
        let conn = self.lock();
        let mut statement = conn.prepare_cached("SELECT DISTINCT channel FROM messages").map_err(|e| self.failed(e))?;
        statement
            .query_map([], |row| Ok(ChannelId(row.get::<_, String>(0)?.into())))
            .and_then(|rows| rows.collect())
            .map_err(|e| self.failed(e))
    }

    async fn delete_channel_messages(&self, channel: &ChannelId) -> PortResult<usize> {
        let conn = self.lock();
        let mut delete = conn.prepare_cached("DELETE FROM messages WHERE channel = ?1").map_err(|e| self.failed(e))?;
        delete.execute([channel.0.as_ref()]).map_err(|e| self.failed(e))
    }
}
