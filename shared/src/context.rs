//! One context builder for the judge and for generation (spec 004): the channel's
//! recent top level, the target conversation last, the time, the intervention history.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::conversation::Window;
use crate::deps::Deps;
use crate::domain::{
    Author, ChannelId, ChannelLine, ChannelMemory, Message, Persona, ResponseType, ThreadKey, Timestamp, Ts, UserId,
    WorkspaceMemory,
};
use crate::ports::{ChannelState, PortResult};
use crate::prompts::fence::fence_safe;

/// The last intervened conversation is quoted up to this many characters.
const EXCERPT_CHARS: usize = 200;
/// Other threads shown around the target, and messages shown of each.
const OTHER_THREADS: usize = 3;
const OTHER_THREAD_MESSAGES: usize = 5;

#[derive(Debug, Clone, Serialize)]
pub struct PromptMessage {
    pub time: String,
    pub name: String,
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct PromptContext<'a> {
    pub persona: &'a Persona,
    /// What kuuki remembers of the channel and the workspace (summaries).
    pub channel_memory: ChannelMemory,
    pub workspace_memory: WorkspaceMemory,
    /// The workspace's other public channels with a line of what kuuki remembers of
    /// each (seed 004), within `JUDGE_CHANNEL_LIST_TOKENS`, fenced. Judge only.
    pub other_channels: Vec<ChannelListEntry>,
    /// Facts relevant to the message answered (generation only), fenced.
    pub facts: Vec<String>,
    /// Who kuuki answers (generation only, with `USER_PROFILE_ENABLED`).
    pub speaker: Option<SpeakerContext>,
    pub now: String,
    /// The channel's top level, when the target is in a thread.
    pub top_level: Vec<PromptMessage>,
    /// Other threads active in the window, newest last, a few messages each.
    pub other_threads: Vec<Vec<PromptMessage>>,
    pub target_conversation: Vec<PromptMessage>,
    pub in_thread: bool,
    /// `target_conversation` holds the judged question's own lines only, the busy
    /// channel's other talk left out (the judge's, [`crate::judge::own_conversation`]).
    pub own_lines_only: bool,
    /// At a question's pick-up with the answered model on: the later lines the reply
    /// model thinks may answer it, for the judge to say whether one does.
    pub maybe_answers: Vec<PromptMessage>,
    pub target: PromptMessage,
    pub response_type: &'static str,
    pub minutes_since_last_intervention: Option<i64>,
    pub interventions_last_30_min: usize,
    pub last_intervention_excerpt: String,
}

/// `messages` as the prompts show them: the time, the author's display name (kuuki's
/// persona name for its own), the text, fenced.
pub async fn prompt_lines(deps: &Deps, messages: &[Arc<Message>]) -> Vec<PromptMessage> {
    let names = display_names(deps, messages.iter().map(|m| &**m)).await;
    messages.iter().map(|m| prompt_line(deps, &names, m)).collect()
}

fn prompt_line(deps: &Deps, names: &HashMap<UserId, String>, m: &Message) -> PromptMessage {
    PromptMessage {
        time: clock_time(m.at),
        name: match m.author {
            Author::OwnBot => deps.persona.name.clone(),
            _ => fence_safe(names.get(&m.user).unwrap_or(&m.user_name)),
        },
        text: fence_safe(&m.text),
    }
}

/// The conversation of `target` in the context window, oldest first; it may hold
/// messages newer than the target.
pub async fn load_conversation(deps: &Deps, window: &Window, target: &Message) -> PortResult<Vec<Arc<Message>>> {
    load_recent(deps, window, target, deps.settings.memory.channel_buffer_size).await
}

/// Like [`load_conversation`], at most `limit` messages, and a thread's opening
/// message first: on Slack it is a top-level message (its `thread_ts` equals its `ts`),
/// stored with the channel's top level, yet it is what the thread is about.
pub async fn load_recent(
    deps: &Deps,
    window: &Window,
    target: &Message,
    limit: usize,
) -> PortResult<Vec<Arc<Message>>> {
    if !deps.settings.memory.enabled {
        return Ok(vec![Arc::new(target.clone())]);
    }
    let since = deps.clock.now() - deps.settings.memory.channel_buffer_ttl;
    let since = since.min(target.at);
    let mut conversation = window
        .recent_in_thread(deps, &target.thread_key(), since, limit.min(deps.settings.memory.channel_buffer_size))
        .await?;
    if let Some(root) = &target.thread_root
        && conversation.first().is_none_or(|m| &m.ts != root)
        && let Some(opener) = window.thread_opener(deps, &target.channel, root).await?
    {
        conversation.insert(0, opener);
    }
    Ok(conversation)
}

pub async fn build<'a>(
    deps: &'a Deps,
    window: &Window,
    target: &Message,
    conversation: &[Arc<Message>],
    state: &ChannelState,
    response_type: ResponseType,
) -> PortResult<PromptContext<'a>> {
    let now = deps.clock.now();
    let top_level = match (&target.thread_root, deps.settings.memory.enabled) {
        (Some(_), true) => {
            let since = now - deps.settings.memory.channel_buffer_ttl;
            window
                .recent_in_thread(
                    deps,
                    &ThreadKey::top_level(target.channel.clone()),
                    since,
                    deps.settings.memory.channel_buffer_size,
                )
                .await?
        }
        _ => Vec::new(),
    };
    let others = if deps.settings.memory.enabled {
        let since = now - deps.settings.memory.channel_buffer_ttl;
        let channel =
            window.recent_in_channel(deps, &target.channel, since, deps.settings.memory.channel_buffer_size).await?;
        other_threads(channel, target)
    } else {
        Vec::new()
    };
    let last = state.interventions.last();
    let everyone = top_level
        .iter()
        .chain(others.iter().flatten())
        .chain(conversation)
        .map(|m| &**m)
        .chain(std::iter::once(target));
    let names = display_names(deps, everyone).await;
    let prompt_message = |m: &Message| prompt_line(deps, &names, m);
    let (channel_memory, workspace_memory) = if deps.settings.memory.enabled {
        (state.memory.clone(), deps.channels.workspace_memory(target.channel.workspace()).await?)
    } else {
        Default::default()
    };
    Ok(PromptContext {
        persona: &deps.persona,
        channel_memory: fenced_memory(channel_memory),
        facts: Vec::new(),
        speaker: None,
        workspace_memory: WorkspaceMemory {
            history: fence_safe(&workspace_memory.history),
            recent_events: fence_safe(&workspace_memory.recent_events),
            updated_at: workspace_memory.updated_at,
            channel_lines: Vec::new(),
        },
        other_channels: channel_list(
            &workspace_memory.channel_lines,
            &target.channel,
            deps.settings.judge.channel_list_tokens,
        ),
        now: now.to_utc_string(),
        top_level: top_level.iter().map(|m| prompt_message(m)).collect(),
        other_threads: others.iter().map(|t| t.iter().map(|m| prompt_message(m)).collect()).collect(),
        target_conversation: conversation.iter().map(|m| prompt_message(m)).collect(),
        in_thread: target.thread_root.is_some(),
        own_lines_only: false,
        maybe_answers: Vec::new(),
        target: prompt_message(target),
        response_type: response_type.as_str(),
        minutes_since_last_intervention: state.last_response_at.map(|at| (now.seconds_since(at) / 60.0).floor() as i64),
        interventions_last_30_min: state.interventions_within(now, Duration::from_secs(30 * 60)),
        last_intervention_excerpt: last.map(|i| fence_safe(&i.excerpt)).unwrap_or_default(),
    })
}

/// The person a reply is for: how well kuuki knows them (the tone), and what it noted
/// about them in this channel only (fenced).
#[derive(Debug, Clone, Serialize)]
pub struct SpeakerContext {
    /// `stranger`, `acquaintance`, `regular` or `close`.
    pub familiarity: &'static str,
    pub interactions: u64,
    pub tags: Vec<String>,
    pub summary: String,
    pub last_topics: Vec<String>,
}

impl SpeakerContext {
    pub fn new(
        familiarity: crate::domain::Familiarity,
        interactions: u64,
        note: Option<&crate::domain::UserNote>,
    ) -> Self {
        let fenced = |items: &[String]| items.iter().map(|t| fence_safe(t)).collect();
        SpeakerContext {
            familiarity: familiarity.as_str(),
            interactions,
            tags: note.map(|n| fenced(&n.tags)).unwrap_or_default(),
            summary: note.map(|n| fence_safe(&n.summary)).unwrap_or_default(),
            last_topics: note.map(|n| fenced(&n.last_topics)).unwrap_or_default(),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ChannelListEntry {
    pub channel: String,
    pub line: String,
}

/// Bytes per token for the budget, as everywhere in kuuki.
const BYTES_PER_TOKEN: usize = 4;

/// The channel list: every stored line but `here`'s, most recently updated first,
/// as many as fit in `tokens` (each entry costs its rendered `- #channel: line`).
/// Private channels have no line (the summarizer removes it), so they never appear.
fn channel_list(lines: &[ChannelLine], here: &ChannelId, tokens: usize) -> Vec<ChannelListEntry> {
    let mut left = tokens * BYTES_PER_TOKEN;
    lines
        .iter()
        .filter(|l| &l.channel != here && !l.line.is_empty())
        .map(|l| ChannelListEntry { channel: fence_safe(&l.channel.0), line: fence_safe(&l.line) })
        .take_while(|e| {
            let cost = "- #: \n".len() + e.channel.len() + e.line.len();
            let fits = cost <= left;
            left = left.saturating_sub(cost);
            fits
        })
        .collect()
}

/// Memory text came from channel messages through a model: it stays data too.
fn fenced_memory(m: ChannelMemory) -> ChannelMemory {
    ChannelMemory {
        summary: fence_safe(&m.summary),
        history: fence_safe(&m.history),
        mood: fence_safe(&m.mood),
        topic_keywords: m.topic_keywords.iter().map(|k| fence_safe(k)).collect(),
        active_users: m.active_users.iter().map(|u| fence_safe(u)).collect(),
        ..m
    }
}

/// The threads of the channel other than the target's, the most recently active
/// last, each cut to its newest messages.
fn other_threads(channel: Vec<Arc<Message>>, target: &Message) -> Vec<Vec<Arc<Message>>> {
    let mut threads: Vec<(Ts, Vec<Arc<Message>>)> = Vec::new();
    for m in channel {
        let Some(root) = m.thread_root.clone() else { continue };
        if target.thread_root.as_ref() == Some(&root) {
            continue;
        }
        match threads.iter_mut().find(|(r, _)| *r == root) {
            Some((_, messages)) => messages.push(m),
            None => threads.push((root, vec![m])),
        }
    }
    // Most recently active last, like the target that follows them.
    threads.sort_by(|a, b| a.1.last().map(|m| &m.ts).cmp(&b.1.last().map(|m| &m.ts)));
    let skip = threads.len().saturating_sub(OTHER_THREADS);
    threads
        .into_iter()
        .skip(skip)
        .map(|(_, mut messages)| {
            let cut = messages.len().saturating_sub(OTHER_THREAD_MESSAGES);
            messages.drain(..cut);
            messages
        })
        .collect()
}

/// People's display names from the platform (Slack's users.info, cached by the
/// client), asked all at once and within one chat call's budget (the time budget
/// counts one); a name that cannot be had in time falls back to what the message
/// carries.
pub(crate) async fn display_names<'m>(
    deps: &Deps,
    messages: impl Iterator<Item = &'m Message>,
) -> HashMap<UserId, String> {
    let mut people: HashMap<&UserId, &Message> = HashMap::new();
    for m in messages.filter(|m| m.author != Author::OwnBot) {
        people.entry(&m.user).or_insert(m);
    }
    let lookups = people.values().map(|m| async move { (*m, deps.chat.user_name(&m.channel, &m.user).await) });
    let found = tokio::time::timeout(deps.budget.chat_call, futures_util::future::join_all(lookups))
        .await
        .unwrap_or_else(|_| {
            tracing::warn!("display names took longer than a chat call may; using the names messages carry");
            Vec::new()
        });
    let mut names: HashMap<UserId, String> =
        people.iter().map(|(user, m)| ((*user).clone(), m.user_name.clone())).collect();
    for (m, name) in found {
        match name {
            Ok(name) => {
                names.insert(m.user.clone(), name);
            }
            Err(error) => tracing::warn!(%error, user = %m.user, "no display name; using the one the message carries"),
        }
    }
    names
}

impl PromptContext<'_> {
    /// A hash of the formatted conversation (not the time or the history around it):
    /// the same conversation judged again hits the judgment cache; any new message
    /// changes it.
    pub fn conversation_hash(&self, target: &Message) -> String {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        hasher.update(target.channel.0.as_bytes());
        hasher.update([0]);
        hasher.update(target.thread_root.as_ref().map_or("", Ts::as_str).as_bytes());
        let shown = self.top_level.iter().chain(&self.target_conversation).chain(std::iter::once(&self.target));
        for m in shown.chain(&self.maybe_answers) {
            for field in [&m.time, &m.name, &m.text] {
                hasher.update([0]);
                hasher.update(field.as_bytes());
            }
        }
        hex::encode(hasher.finalize())
    }
}

fn clock_time(at: Timestamp) -> String {
    let s = at.to_utc_string();
    s[11..16].to_owned()
}

/// Messages quoted in the intervention history.
pub const EXCERPT_MESSAGES: usize = 5;

/// The conversation as kuuki stepped in, for the intervention history.
pub fn excerpt<M: std::borrow::Borrow<Message>>(conversation: &[M]) -> String {
    let start = conversation.len().saturating_sub(EXCERPT_MESSAGES);
    // "name: text / name: text", cut at EXCERPT_CHARS characters, written once.
    let mut out = String::new();
    let mut room = EXCERPT_CHARS;
    for (i, m) in conversation[start..].iter().enumerate() {
        let m = m.borrow();
        let separator = if i == 0 { "" } else { " / " };
        for part in [separator, m.user_name.as_str(), ": ", m.text.as_str()] {
            if !push_within(&mut out, part, &mut room) {
                return out;
            }
        }
    }
    out
}

/// Appends as much of `text` as `room` characters allow, and takes them off `room`;
/// false when `text` did not fit whole.
fn push_within(out: &mut String, text: &str, room: &mut usize) -> bool {
    let fits = crate::domain::first_chars(text, *room);
    out.push_str(fits);
    if fits.len() < text.len() {
        *room = 0;
        return false;
    }
    *room -= text.chars().count();
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{Author, ChannelId, Timestamp, Ts, UserId};

    fn said(user: &str, text: &str) -> Message {
        Message {
            channel: ChannelId("C1".into()),
            ts: Ts::new("1.0"),
            thread_root: None,
            user: UserId(user.into()),
            user_name: user.to_owned(),
            text: text.to_owned(),
            author: Author::Human,
            replies_to_bot: false,
            replies_to: None,
            in_dm: false,
            private_channel: false,
            at: Timestamp(0),
        }
    }

    #[test]
    fn an_excerpt_is_the_last_lines_joined_and_cut_at_its_length() {
        // What it has always been: joined, then cut at EXCERPT_CHARS characters.
        let joined_then_cut = |conversation: &[Message]| {
            let start = conversation.len().saturating_sub(EXCERPT_MESSAGES);
            let joined: Vec<String> =
                conversation[start..].iter().map(|m| format!("{}: {}", m.user_name, m.text)).collect();
            joined.join(" / ").chars().take(EXCERPT_CHARS).collect::<String>()
        };
        let long = "デプロイ".repeat(60);
        let cases: Vec<Vec<Message>> = vec![
            vec![],
            vec![said("sato", "おはよう")],
            (0..8).map(|i| said("sato", &format!("line {i}"))).collect(),
            vec![said("sato", &long)],
            vec![said("sato", &"a".repeat(EXCERPT_CHARS - 6)), said("suzuki", "cut in the separator")],
            vec![said("sato", &"x".repeat(EXCERPT_CHARS - 6)), said("suzuki", "b")],
            (0..5).map(|_| said("tanaka", &"é".repeat(39))).collect(),
        ];
        for conversation in &cases {
            let excerpt = excerpt(conversation);
            assert_eq!(excerpt, joined_then_cut(conversation));
            assert!(excerpt.chars().count() <= EXCERPT_CHARS);
        }
    }
}
