//! The rule-based judge (DESIGN §4, spec 000 and 001): pure functions over a message,
//! its conversation and the channel's state. No I/O, no clock.

use crate::config::Settings;
use crate::domain::{Author, BotIdentity, Breakdown, Decision, DirectTrigger, Message, ResponseType, RuleScore, Timestamp};

/// Points of each rule, as the source documents give them.
pub mod points {
    pub const QUESTION: i32 = 20;
    pub const KEYWORD: i32 = 15;
    pub const COOLDOWN: i32 = -50;
    pub const ONE_ON_ONE: i32 = -20;
    pub const NO_MENTION: i32 = -10;
    pub const BUSY: i32 = -10;
    pub const BOT_TOPIC: i32 = 15;
    pub const AFTER_SILENCE: i32 = 10;
    pub const FADING: i32 = -10;
    pub const FADING_STRONG: i32 = -15;
}

/// How many recent human messages the fading rule compares (first half vs second half).
const FADING_WINDOW: usize = 6;
/// Fewest messages that can make a conversation "lively".
const BUSY_MIN_MESSAGES: usize = 5;

/// Whether `message` is addressed to kuuki, and how. A reply to the bot is known from
/// the platform (`replies_to_bot`); a mention is `<@id>` (Discord also `<@!id>`).
pub fn direct_trigger(message: &Message, bot: &BotIdentity) -> Option<DirectTrigger> {
    let id = &bot.user_id.0;
    let text = message.text.as_str();
    if text.contains(&format!("<@{id}>")) || text.contains(&format!("<@!{id}>")) {
        return Some(DirectTrigger::Mention);
    }
    if message.replies_to_bot {
        return Some(DirectTrigger::Reply);
    }
    let mut names = std::iter::once(bot.name.as_str()).chain(bot.aliases.iter().map(String::as_str));
    if names.any(|name| mentions_name(text, name)) {
        return Some(DirectTrigger::Name);
    }
    None
}

/// Case-insensitive; an ASCII name must stand as a word ("kuuki," yes, "kuukiness" no),
/// other names (くうき) match anywhere since Japanese has no spaces.
fn mentions_name(text: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    let text = text.to_lowercase();
    let name = name.to_lowercase();
    if !name.is_ascii() {
        return text.contains(&name);
    }
    let is_word_char = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    text.match_indices(&name).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + name.len()..].chars().next();
        !is_word_char(before) && !is_word_char(after)
    })
}

fn contains_ignore_case(text_lower: &str, needle: &str) -> bool {
    !needle.is_empty() && text_lower.contains(&needle.to_lowercase())
}

/// Ends with `?` or `？`, ignoring trailing spaces.
pub fn is_question(text: &str) -> bool {
    let t = text.trim_end();
    t.ends_with('?') || t.ends_with('？')
}

/// What the rules look at besides the message itself.
pub struct RuleInput<'a> {
    pub message: &'a Message,
    /// The conversation's recent messages up to and including `message`, oldest first,
    /// already limited to the context window.
    pub conversation: &'a [Message],
    /// The channel's message before this one, in any conversation.
    pub previous_in_channel: Option<Timestamp>,
    /// kuuki's last response anywhere in this channel.
    pub last_response_at: Option<Timestamp>,
    /// When the judgment is made (a little after the message was written).
    pub now: Timestamp,
    pub bot: &'a BotIdentity,
}

/// Scores an ambient message. Direct triggers never come here.
pub fn score(input: &RuleInput<'_>, settings: &Settings) -> RuleScore {
    let message = input.message;
    let text_lower = message.text.to_lowercase();
    let mut breakdown = Breakdown::default();

    // Engagement: the message was written within the window after kuuki's last
    // response (a message written before it was not a reaction to it). Cooldown: kuuki
    // spoke in this channel too recently to speak again now.
    let engaged = input.last_response_at.is_some_and(|at| {
        let after = message.at.seconds_since(at);
        after >= 0.0 && after <= settings.engagement_duration.as_secs_f64()
    });
    if engaged {
        breakdown.add("engagement", settings.engagement_boost);
    }
    let question = is_question(&message.text);
    if question {
        breakdown.add("question", points::QUESTION);
    }
    if settings.judge_keywords.iter().any(|k| contains_ignore_case(&text_lower, k)) {
        breakdown.add("keyword", points::KEYWORD);
    }
    let in_cooldown = input
        .last_response_at
        .is_some_and(|at| input.now.seconds_since(at) <= settings.cooldown.as_secs_f64());
    if in_cooldown {
        breakdown.add("cooldown", points::COOLDOWN);
    }

    let window = recent_window(input.conversation, settings.judge_recent_messages);
    let humans: Vec<&Message> = window.iter().filter(|m| m.author == Author::Human).collect();
    let mut speakers: Vec<&str> = humans.iter().map(|m| m.user.0.as_str()).collect();
    speakers.sort_unstable();
    speakers.dedup();
    if speakers.len() == 2 {
        breakdown.add("one_on_one", points::ONE_ON_ONE);
    }
    if !window.iter().any(|m| direct_trigger(m, input.bot).is_some()) {
        breakdown.add("no_mention", points::NO_MENTION);
    }
    if is_busy(&humans, settings.judge_busy_messages_per_minute) {
        breakdown.add("busy", points::BUSY);
    }
    if settings.bot_topics.iter().any(|t| contains_ignore_case(&text_lower, t)) {
        breakdown.add("bot_topic", points::BOT_TOPIC);
    }
    let after_silence = match input.previous_in_channel {
        None => true,
        Some(prev) => message.at.seconds_since(prev) >= settings.judge_silence.as_secs_f64(),
    };
    if after_silence {
        breakdown.add("after_silence", points::AFTER_SILENCE);
    }
    if let Some(points) = fading(&humans) {
        breakdown.add("fading", points);
    }

    RuleScore {
        score: breakdown.total().clamp(0, 100),
        breakdown,
        engaged,
        question,
    }
}

/// The last `n` messages of the conversation up to the target (the slice's end).
fn recent_window(conversation: &[Message], n: usize) -> &[Message] {
    &conversation[conversation.len().saturating_sub(n)..]
}

/// A lively conversation: enough recent human messages arriving at or above the rate.
fn is_busy(humans: &[&Message], per_minute: f64) -> bool {
    if humans.len() < BUSY_MIN_MESSAGES {
        return false;
    }
    let span = humans[humans.len() - 1].at.seconds_since(humans[0].at);
    if span <= 0.0 {
        return true;
    }
    (humans.len() - 1) as f64 * 60.0 / span >= per_minute
}

/// Replies getting shorter: the last three human messages against the three before.
fn fading(humans: &[&Message]) -> Option<i32> {
    if humans.len() < FADING_WINDOW {
        return None;
    }
    let last = &humans[humans.len() - FADING_WINDOW..];
    let avg = |ms: &[&Message]| ms.iter().map(|m| m.text.chars().count()).sum::<usize>() as f64 / ms.len() as f64;
    let (first, second) = last.split_at(FADING_WINDOW / 2);
    let (first, second) = (avg(first), avg(second));
    if first <= 0.0 {
        return None;
    }
    let ratio = second / first;
    if ratio < 0.5 {
        Some(points::FADING_STRONG)
    } else if ratio < 0.75 {
        Some(points::FADING)
    } else {
        None
    }
}

/// What the thresholds say about a score (DESIGN §4).
pub fn decide(score: i32, settings: &Settings, llm_judge_available: bool) -> Decision {
    if settings.llm_judge_enabled && llm_judge_available {
        if score >= settings.judge_llm_threshold_high {
            Decision::Respond
        } else if score <= settings.judge_llm_threshold_low {
            Decision::Skip
        } else {
            Decision::Llm
        }
    } else if score >= settings.judge_score_threshold {
        Decision::Respond
    } else {
        Decision::Skip
    }
}

/// The response ladder: react below 60, a short acknowledgement from 60 to 79 outside
/// engagement, a full response at 80 and above or on a clear trigger.
pub fn response_type(score: i32, engaged: bool, clear_trigger: bool, settings: &Settings) -> ResponseType {
    if !settings.response_diversity_enabled || clear_trigger || score >= 80 {
        ResponseType::FullResponse
    } else if score >= 60 {
        if engaged {
            ResponseType::FullResponse
        } else {
            ResponseType::ShortAck
        }
    } else {
        ResponseType::ReactOnly
    }
}

/// An emoji for a react-only response (Slack names), picked from what the message says.
pub fn pick_emoji(text: &str) -> &'static str {
    let t = text.to_lowercase();
    let has = |words: &[&str]| words.iter().any(|w| t.contains(w));
    if is_question(text) {
        "thinking_face"
    } else if has(&["ありがと", "thank", "thx", "助かり", "感謝"]) {
        "pray"
    } else if has(&["できた", "完了", "終わった", "done", "shipped", "merged", "リリース", "やった", "🎉"]) {
        "tada"
    } else if has(&["笑", "www", "lol", "haha", "草", "😂"]) {
        "joy"
    } else if has(&["アイデア", "思いつ", "idea", "提案", "how about"]) {
        "bulb"
    } else if has(&["いいね", "すごい", "最高", "great", "nice", "awesome", "!", "！"]) {
        "sparkles"
    } else {
        "eyes"
    }
}
