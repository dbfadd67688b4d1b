//! The rule-based judge (DESIGN §4, spec 000 and 001): pure functions over a message,
//! its conversation and the channel's state. No I/O, no clock.

use std::sync::Arc;

use crate::config::Settings;
use crate::domain::{
    Author, BotIdentity, Breakdown, Decision, DirectTrigger, Message, Pending, ResponseType, RuleScore, Timestamp,
    UserId, positions_of,
};

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
    /// Fewer messages than `JUDGE_MIN_CONVERSATION_MESSAGES`: more than the content
    /// rules can add without a question (keyword 15 + topic 15 + silence 10), so a
    /// remark in a conversation just begun stays below the LLM's band; engagement
    /// (+40) still offsets it when someone answers kuuki.
    pub const SHORT_CONVERSATION: i32 = -40;
}

/// How many recent human messages the fading rule compares (first half vs second half).
const FADING_WINDOW: usize = 6;
/// A conversation is lively when its newest this-many human messages (within the last
/// N) came at the busy rate: the current burst, not diluted by older messages.
const BUSY_MESSAGES: usize = 5;

/// `text` in lowercase, borrowed when it already is: most chat lines (Japanese, or
/// lowercase English) are, and the rules lowercase every message of the window.
pub(crate) fn lowercase(text: &str) -> std::borrow::Cow<'_, str> {
    let bytes = text.as_bytes();
    // One pass over the bytes says whether any is an ASCII capital and whether any
    // leads a character outside ASCII and U+3000..=U+9FFF.
    let class = bytes.iter().fold(0u8, |class, &b| class | BYTE_CLASS[usize::from(b)]);
    let upper = class & ASCII_CAPITAL != 0;
    if class & OTHER_LEAD == 0 || only_ascii_letters_have_case(bytes) {
        // Only ASCII letters can change here.
        return if upper {
            std::borrow::Cow::Owned(text.to_ascii_lowercase())
        } else {
            std::borrow::Cow::Borrowed(text)
        };
    }
    if upper {
        return std::borrow::Cow::Owned(text.to_lowercase());
    }
    let unchanged = |c: char| {
        if c.is_ascii() {
            !c.is_ascii_uppercase()
        } else if ('\u{3000}'..='\u{9fff}').contains(&c) {
            // Kana, CJK punctuation and ideographs have no case.
            true
        } else {
            let mut lower = c.to_lowercase();
            lower.next() == Some(c) && lower.next().is_none()
        }
    };
    if text.chars().all(unchanged) {
        std::borrow::Cow::Borrowed(text)
    } else {
        std::borrow::Cow::Owned(text.to_lowercase())
    }
}

/// [`BYTE_CLASS`] bits.
const ASCII_CAPITAL: u8 = 1;
const OTHER_LEAD: u8 = 2;

/// For each byte value: [`ASCII_CAPITAL`] for A..=Z, [`OTHER_LEAD`] for a byte that
/// leads a character other than ASCII or U+3000..=U+9FFF (C0..=E2, EA..=FF).
static BYTE_CLASS: [u8; 256] = {
    let mut class = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        class[b] = match b as u8 {
            b'A'..=b'Z' => ASCII_CAPITAL,
            0xC0..=0xE2 | 0xEA..=0xFF => OTHER_LEAD,
            _ => 0,
        };
        b += 1;
    }
    class
};

/// Whether, of the characters in UTF-8 `bytes`, only ASCII letters can change when
/// lowercased: besides ASCII, the text is kana, CJK ideographs and punctuation
/// (U+3000..=U+9FFF, led by E3..=E9), general punctuation (U+2000..=U+203F, E2 80) or
/// full-width forms other than Ａ..Ｚ (U+FF00..=U+FFFF, EF BC..=BF). Read off the bytes
/// without decoding; anything else answers no, and the caller decodes.
fn only_ascii_letters_have_case(bytes: &[u8]) -> bool {
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            0..0x80 => i += 1,
            0xE3..=0xE9 => i += 3,
            0xE2 if bytes[i + 1] == 0x80 => i += 3,
            // U+FF21..=U+FF3A (Ａ..Ｚ) is EF BC A1..=BA.
            0xEF if matches!(bytes[i + 1], 0xBC..=0xBF)
                && !(bytes[i + 1] == 0xBC && matches!(bytes[i + 2], 0xA1..=0xBA)) =>
            {
                i += 3
            }
            _ => return false,
        }
    }
    true
}

/// Whether `message` is addressed to kuuki, and how. A reply to the bot is known from
/// the platform (`replies_to_bot`); a mention is `<@id>` (Discord also `<@!id>`).
pub fn direct_trigger(message: &Message, bot: &BotIdentity) -> Option<DirectTrigger> {
    let text = message.text.as_str();
    if bot.is_mentioned_in(text) {
        return Some(DirectTrigger::Mention);
    }
    if message.replies_to_bot {
        return Some(DirectTrigger::Reply);
    }
    if message.in_dm {
        return Some(DirectTrigger::DirectMessage);
    }
    if bot.names_lowercase().is_empty() {
        return None;
    }
    let text = lowercase(text);
    if mentions_name(&text, bot) {
        return Some(DirectTrigger::Name);
    }
    None
}

/// `text` is lowercase. An ASCII name must stand as a word ("kuuki," yes, "kuukiness"
/// no); other names (くうき) match anywhere since Japanese has no spaces.
fn mentions_name(text: &str, bot: &BotIdentity) -> bool {
    let is_word_char = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
    bot.names_in(text).any(|(name, i)| {
        !name.is_ascii() || {
            let before = text[..i].chars().next_back();
            let after = text[i + name.len()..].chars().next();
            !is_word_char(before) && !is_word_char(after)
        }
    })
}

/// The people `text` mentions other than kuuki ([`crate::domain::mentioned_ids`]).
pub fn mentioned_others<'t>(text: &'t str, bot: &BotIdentity) -> Vec<&'t str> {
    crate::domain::mentioned_ids(text).filter(|id| !bot.is_me(id)).collect()
}

/// Who the last turn of `conversation` is meant for when it is someone else's: a
/// person it mentions, or, in a thread, the person whose question the turn replies to
/// (the turn just before it, another human's, asked something).
pub fn addressee(conversation: &[Arc<Message>], bot: &BotIdentity) -> Option<String> {
    let turn = turn(conversation);
    let speaker = turn.last()?;
    if let Some(id) = turn.iter().find_map(|m| mentioned_others(&m.text, bot).first().copied()) {
        return Some(id.to_owned());
    }
    if let Some(name) = called_by_name(&turn[0], conversation, bot) {
        return Some(name);
    }
    speaker.thread_root.as_ref()?;
    let before = self::turn(&conversation[..conversation.len() - turn.len()]);
    let asker = before.last()?;
    let asked =
        asker.author == Author::Human && asker.user != speaker.user && before.iter().any(|m| is_question(&m.text));
    asked.then(|| asker.user_name.clone())
}

/// The person a message opens by calling, without a mention: 「satoさん、…」 (any name
/// with an honorific), "Yuki, could you…" or "daniel are you…" (the name of someone
/// else in the conversation, followed by a comma or a question).
fn called_by_name(message: &Message, conversation: &[Arc<Message>], bot: &BotIdentity) -> Option<String> {
    const HONORIFICS: [&str; 6] = ["さん", "くん", "君", "ちゃん", "様", "氏"];
    const ASKING: [&str; 10] = ["are ", "is ", "can ", "could ", "would ", "will ", "do ", "did ", "have ", "when "];
    let text = message.text.trim_start();
    let lower = lowercase(text);
    let lower = ["hey ", "hi ", "@"].iter().find_map(|p| lower.strip_prefix(p)).unwrap_or(&lower);
    let end = lower.find([',', '、', ':', ' ', '　', '!', '！']).unwrap_or(lower.len());
    let (word, rest) = lower.split_at(end);
    let is_bot = |w: &str| bot.names_lowercase().iter().any(|n| n == w);
    if let Some(name) = HONORIFICS.iter().find_map(|h| word.strip_suffix(h))
        && !name.is_empty()
        && name.chars().count() <= 12
        && !is_bot(name)
    {
        return Some(name.to_owned());
    }
    if word.is_empty() || is_bot(word) {
        return None;
    }
    // "Yuki, could you…" names someone even before they wrote here; "So, could you…" not.
    const NOT_NAMES: &[&str] = &[
        "so",
        "also",
        "ok",
        "okay",
        "and",
        "but",
        "well",
        "btw",
        "folks",
        "guys",
        "team",
        "all",
        "everyone",
        "anyone",
        "somebody",
        "someone",
        "how",
        "what",
        "why",
        "where",
        "when",
        "who",
        "which",
        "whom",
        "whose",
        "where",
        "are",
        "is",
        "can",
        "could",
        "would",
        "will",
        "do",
        "did",
        "does",
        "have",
        "has",
        "i",
        "you",
        "we",
        "they",
        "it",
        "this",
        "that",
        "then",
        "now",
        "oh",
        "ah",
        "hmm",
        "yes",
        "no",
        "yeah",
        "yep",
        "nope",
        "thanks",
        "sorry",
        "please",
        "wait",
        "right",
        "seriously",
        "honestly",
    ];
    let after_name = rest.trim_start_matches([',', '、', ':']).trim_start();
    let asks_you = ASKING.iter().any(|a| after_name.starts_with(a) && after_name[a.len()..].starts_with("you"));
    if asks_you && !NOT_NAMES.contains(&word) && word.chars().all(char::is_alphabetic) {
        return Some(word.to_owned());
    }
    let calls = rest.starts_with([',', '、', ':']) || ASKING.iter().any(|a| after_name.starts_with(a));
    // Only a line that calls someone is worth checking against everyone's names.
    let known = || {
        conversation.iter().any(|m| {
            m.author == Author::Human && m.user != message.user && {
                let n = lowercase(&m.user_name);
                n == word || n.split_whitespace().next() == Some(word)
            }
        })
    };
    (calls && known()).then(|| word.to_owned())
}

fn contains_ignore_case(text_lower: &str, needle: &str) -> bool {
    let needle = lowercase(needle);
    !needle.is_empty() && positions_of(text_lower, &needle).next().is_some()
}

/// The text asks something. People often leave out the question mark ("how do I undo
/// the last commit but keep the changes", 「どこで見られるんだっけ」) or ask for help
/// without a question ("the cache key stuff confuses me"), so besides a final `?`/`？`
/// this reads: a question mark ending a sentence of some length inside the text (not
/// "what? no."), a sentence opening like an English question ("how do I", "is there",
/// "anyone know"), a sentence ending like a Japanese one (っけ, かな, ですか …), and a
/// few phrases that ask for help (教えて, "stuck on", わからない …).
pub fn is_question(text: &str) -> bool {
    let t = text.trim_end();
    if t.ends_with('?') || t.ends_with('？') {
        return true;
    }
    let lower = lowercase(t);
    if question_phrases::ASKING_ANYWHERE.is_match(&*lower) {
        return true;
    }
    let mut sentence_start = 0;
    for (i, c) in lower.char_indices() {
        let ends_sentence = matches!(c, '?' | '？' | '.' | '!' | '！' | '。' | '\n' | ';' | ':' | ',' | '、');
        if !ends_sentence {
            continue;
        }
        let sentence = &lower[sentence_start..i];
        let followed_by_space = lower[i + c.len_utf8()..].chars().next().is_none_or(char::is_whitespace);
        if (c == '？' || (c == '?' && followed_by_space)) && sentence.trim().chars().count() >= 12 {
            return true;
        }
        if asks(sentence) {
            return true;
        }
        sentence_start = i + c.len_utf8();
    }
    asks(&lower[sentence_start..])
}

/// One sentence (lowercase) opens like an English question or ends like a Japanese one.
fn asks(sentence: &str) -> bool {
    use aho_corasick::{Anchored, Input};
    let mut s = sentence.trim_start();
    // "so how do I …", "ok quick question: is there …"
    while let Some(filler) = question_phrases::FILLERS_AT_START.find(Input::new(s).anchored(Anchored::Yes)) {
        s = s[filler.end()..].trim_start();
    }
    if question_phrases::OPENINGS_AT_START.is_match(Input::new(s).anchored(Anchored::Yes)) {
        return true;
    }
    let end = s.trim_end_matches(|c: char| !c.is_alphanumeric());
    // Only endings with the sentence's last character are compared whole.
    end.chars()
        .next_back()
        .is_some_and(|last| question_phrases::JA_ENDINGS.iter().any(|e| e.ends_with(last) && end.ends_with(e)))
}

mod question_phrases {
    pub const OPENINGS: &[&str] = &[
        "how do ",
        "how does ",
        "how can ",
        "how to ",
        "how should ",
        "how would ",
        "how come ",
        "what is ",
        "what's the ",
        "what are ",
        "what does ",
        "what do ",
        "where is ",
        "where are ",
        "where do ",
        "where does ",
        "where can ",
        "why does ",
        "why do ",
        "why is ",
        "why are ",
        "why would ",
        "when is ",
        "when does ",
        "who knows ",
        "who can ",
        "is there ",
        "are there ",
        "is it ",
        "does anyone",
        "does anybody",
        "do we ",
        "do you ",
        "do i ",
        "can i ",
        "can we ",
        "can someone",
        "can anyone",
        "could someone",
        "could anyone",
        "should i ",
        "should we ",
        "anyone know",
        "anybody know",
        "any idea",
        "any tips",
    ];
    pub const FILLERS: &[&str] =
        &["so ", "ok ", "okay ", "but ", "and ", "also ", "hey ", "quick question", "dumb question"];
    pub const JA_ENDINGS: &[&str] = &[
        "っけ",
        "かな",
        "かなぁ",
        "ですか",
        "ますか",
        "でしょうか",
        "ませんか",
        "だろうか",
        "のかな",
        "ばいい",
        "たらいい",
        "ばいいの",
        "たらいいの",
        "んだろう",
        "教えて",
    ];
    use aho_corasick::AhoCorasick;
    use std::sync::LazyLock;

    /// [`OPENINGS`] matched at the start of a sentence, in one pass.
    pub static OPENINGS_AT_START: LazyLock<AhoCorasick> = LazyLock::new(|| at_the_start(OPENINGS));
    /// [`FILLERS`] matched at the start of a sentence, the first listed winning.
    pub static FILLERS_AT_START: LazyLock<AhoCorasick> = LazyLock::new(|| at_the_start(FILLERS));
    /// [`ASKING`] as one automaton: a text is read once, not once a phrase.
    pub static ASKING_ANYWHERE: LazyLock<AhoCorasick> =
        LazyLock::new(|| AhoCorasick::new(ASKING).expect("fixed phrases"));

    fn at_the_start(phrases: &[&str]) -> AhoCorasick {
        AhoCorasick::builder()
            .match_kind(aho_corasick::MatchKind::LeftmostFirst)
            .start_kind(aho_corasick::StartKind::Anchored)
            .build(phrases)
            .expect("fixed phrases")
    }

    /// Asking for help without a question.
    pub const ASKING: &[&str] = &[
        "anyone know",
        "anybody know",
        "figure out",
        "stuck on",
        "confuses me",
        "教えてください",
        "教えて下さい",
        "教えてほしい",
        "教えて欲しい",
        "教えてくれ",
        "わかる人",
        "分かる人",
        "知ってる人",
        "知っている人",
        "詳しい人",
        "わからない",
        "分からない",
        "わかんない",
        "困って",
        "詰まって",
        "ハマって",
        "はまって",
    ];
}

/// The speaker's last turn: the messages at the end of `conversation` written by the
/// author of its last message without anyone else in between. People split one
/// thought over several lines ("CI のキャッシュってどこで消せる？" / "急ぎではないです"),
/// and only the newest line is judged, so the content rules read the whole turn.
pub fn turn(conversation: &[Arc<Message>]) -> &[Arc<Message>] {
    let Some(last) = conversation.last() else {
        return conversation;
    };
    let start = conversation.iter().rposition(|m| m.user != last.user || m.author != last.author).map_or(0, |i| i + 1);
    &conversation[start..]
}

/// What the rules look at besides the message itself.
#[derive(Clone, Copy)]
pub struct RuleInput<'a> {
    pub message: &'a Message,
    /// The conversation's recent messages up to and including `message`, oldest first,
    /// already limited to the context window.
    pub conversation: &'a [Arc<Message>],
    /// The channel's message before the speaker's turn began, in any conversation.
    pub previous_in_channel: Option<Timestamp>,
    /// kuuki's last response anywhere in this channel (cooldown).
    pub last_response_at: Option<Timestamp>,
    /// kuuki's last response in this message's conversation (engagement): people
    /// who just talked with kuuki, not the channel's other threads.
    pub last_response_here: Option<Timestamp>,
    /// When the judgment is made (a little after the message was written).
    pub now: Timestamp,
    /// Someone other than the speaker wrote in the conversation (or in the thread the
    /// message started) after it: a question is no longer unanswered.
    pub answered: bool,
    pub bot: &'a BotIdentity,
}

/// Scores an ambient message. Direct triggers never come here.
pub fn score(input: &RuleInput<'_>, settings: &Settings) -> RuleScore {
    let message = input.message;
    // A conversation not loaded (memory off) is the message alone.
    let alone;
    let conversation = if input.conversation.is_empty() {
        alone = [Arc::new(message.clone())];
        &alone[..]
    } else {
        input.conversation
    };
    let turn = turn(conversation);
    let turn_lower: Vec<_> = turn.iter().map(|m| lowercase(&m.text)).collect();
    let mentions_any =
        |needles: &[String]| needles.iter().any(|n| turn_lower.iter().any(|t| contains_ignore_case(t, n)));
    let mut breakdown = Breakdown::default();

    // Engagement: the message was written within the window after kuuki's last
    // response (a message written before it was not a reaction to it). Cooldown: kuuki
    // spoke in this channel too recently to speak again now.
    let engaged = input.last_response_here.is_some_and(|at| {
        let after = message.at.seconds_since(at);
        after >= 0.0 && after <= settings.engagement_duration.as_secs_f64()
    });
    if engaged {
        breakdown.add("engagement", settings.engagement_boost);
    }
    let question = turn.iter().any(|m| is_question(&m.text));
    if question {
        breakdown.add("question", points::QUESTION);
    }
    if mentions_any(&settings.judge_keywords) {
        breakdown.add("keyword", points::KEYWORD);
    }
    let in_cooldown =
        input.last_response_at.is_some_and(|at| input.now.seconds_since(at) <= settings.cooldown.as_secs_f64());
    if in_cooldown {
        breakdown.add("cooldown", points::COOLDOWN);
    }

    let window = recent_window(input.conversation, settings.judge_recent_messages);
    let humans: Vec<&Message> = window.iter().map(|m| &**m).filter(|m| m.author == Author::Human).collect();
    // Only whether there are exactly two matters: counting stops at a third.
    let mut speakers: Vec<&UserId> = Vec::with_capacity(3);
    for m in &humans {
        if speakers.len() == 3 {
            break;
        }
        if !speakers.contains(&&m.user) {
            speakers.push(&m.user);
        }
    }
    let kuuki_addressed = window.iter().any(|m| direct_trigger(m, input.bot).is_some());
    if !kuuki_addressed {
        breakdown.add("no_mention", points::NO_MENTION);
    }
    if is_busy(&humans, settings.judge_busy_messages_per_minute) {
        breakdown.add("busy", points::BUSY);
    }
    if mentions_any(&settings.bot_topics) {
        breakdown.add("bot_topic", points::BOT_TOPIC);
    }
    let after_silence = match input.previous_in_channel {
        None => true,
        Some(prev) => turn[0].at.seconds_since(prev) >= settings.judge_silence.as_secs_f64(),
    };
    if after_silence {
        breakdown.add("after_silence", points::AFTER_SILENCE);
    }
    if let Some(points) = fading(&humans) {
        breakdown.add("fading", points);
    }

    // The time-dependent rules count from the end of the turn: that is when the others
    // could start answering.
    let age = input.now.seconds_since(message.at);
    let addressee = addressee(conversation, input.bot);
    let other_wait = settings.addressed_to_other_wait.as_secs_f64();
    let for_other = addressee.filter(|_| age < other_wait);
    let mut pending = None;
    if let Some(who) = &for_other {
        breakdown.add("addressed_to_other", settings.addressed_to_other_points);
        if question && !input.answered {
            pending = Some(Pending {
                at: message.at + settings.addressed_to_other_wait,
                reason: format!(
                    "the question is for {who}: judged again after {} min unless someone answers",
                    settings.addressed_to_other_wait.as_secs() / 60
                ),
            });
        }
    }
    let open_question = question && !input.answered && !kuuki_addressed && for_other.is_none();
    if open_question {
        let wait = settings.unanswered_question_wait;
        if age >= wait.as_secs_f64() {
            breakdown.add("unanswered_question", settings.unanswered_question_points);
        } else {
            pending = Some(Pending {
                at: message.at + wait,
                reason: format!(
                    "the question has stood {age:.0} s: judged again at {} s unless someone answers",
                    wait.as_secs()
                ),
            });
        }
    }

    // Two people talking to each other, unless one of them asked the room something
    // the other left unanswered: then it is an open question like any other.
    if speakers.len() == 2 && !open_question {
        breakdown.add("one_on_one", points::ONE_ON_ONE);
    }

    // Seed 003 waits for a few messages to follow the flow before eavesdropping. An
    // open question needs no flow to be answered, so it is exempt: a channel's first
    // question left hanging can still be taken up.
    let messages = input.conversation.len().max(1);
    if messages < settings.judge_min_conversation_messages && !open_question {
        breakdown.add("short_conversation", points::SHORT_CONVERSATION);
    }

    RuleScore { score: breakdown.total().clamp(0, 100), breakdown, engaged, question, for_other, pending }
}

/// The last `n` messages of the conversation up to the target (the slice's end).
fn recent_window(conversation: &[Arc<Message>], n: usize) -> &[Arc<Message>] {
    &conversation[conversation.len().saturating_sub(n)..]
}

/// A lively conversation: the newest human messages arriving at or above the rate.
fn is_busy(humans: &[&Message], per_minute: f64) -> bool {
    if humans.len() < BUSY_MESSAGES {
        return false;
    }
    let burst = &humans[humans.len() - BUSY_MESSAGES..];
    let span = burst[BUSY_MESSAGES - 1].at.seconds_since(burst[0].at);
    if span <= 0.0 {
        return true;
    }
    (BUSY_MESSAGES - 1) as f64 * 60.0 / span >= per_minute
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
        if engaged { ResponseType::FullResponse } else { ResponseType::ShortAck }
    } else {
        ResponseType::ReactOnly
    }
}

/// Thanks and nothing more: no question, no request. Said to kuuki, an emoji answers it
/// better than a reply ("that's the one, thanks!!", 「できました！ありがとうございます」).
pub fn is_thanks(text: &str) -> bool {
    const THANKS: [&str; 7] = ["ありがと", "thank", "thx", "助かり", "助かった", "感謝", "ty!"];
    const REQUESTS: [&str; 12] = [
        "please",
        "pls",
        "can you",
        "could you",
        "would you",
        "お願い",
        "ください",
        "下さい",
        "してほしい",
        "して欲しい",
        "もう一つ",
        "one more",
    ];
    let t = lowercase(text);
    THANKS.iter().any(|w| t.contains(w)) && !REQUESTS.iter().any(|w| t.contains(w)) && !is_question(text)
}

/// An emoji for a react-only response (Slack names), picked from what the message says.
pub fn pick_emoji(text: &str) -> &'static str {
    let t = lowercase(text);
    let has = |words: &[&str]| words.iter().any(|w| t.contains(w));
    if is_question(text) {
        "thinking_face"
    } else if has(&["ありがと", "thank", "thx", "助かり", "感謝"]) {
        "pray"
    } else if has(&["できた", "完了", "終わった", "done", "shipped", "merged", "リリース", "やった", "🎉"])
    {
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::domain::{ChannelId, Ts, UserId};

    const T0: i64 = 1_767_603_600;

    fn at(secs: f64) -> Timestamp {
        Timestamp((T0 as f64 * 1e6 + secs * 1e6) as i64)
    }

    fn msg(secs: f64, user: &str, text: &str) -> Message {
        Message {
            channel: ChannelId("c".into()),
            ts: Ts::from_timestamp(at(secs)),
            thread_root: None,
            user: UserId(user.into()),
            user_name: user.into(),
            text: text.into(),
            author: Author::Human,
            replies_to_bot: false,
            in_dm: false,
            private_channel: false,
            at: at(secs),
        }
    }

    fn bot() -> BotIdentity {
        BotIdentity::new(UserId("UBOT".into()), "kuuki", &["くうき".into()])
    }

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        let vars: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Settings::from_vars(&vars).unwrap()
    }

    /// Scores the last message of `conversation`, judged `judge_delay` seconds after it
    /// was written, with the previous message in the channel `silence` seconds before.
    struct Case {
        conversation: Vec<Message>,
        last_response: Option<f64>,
        /// When kuuki last spoke in this conversation, if not at `last_response`.
        last_response_here: Option<f64>,
        silence: Option<f64>,
        judge_delay: f64,
        /// Someone else wrote after the last message.
        answered: bool,
    }

    impl Case {
        fn new(conversation: Vec<Message>) -> Self {
            Case {
                conversation,
                last_response: None,
                last_response_here: None,
                silence: Some(60.0),
                judge_delay: 30.0,
                answered: false,
            }
        }

        fn score(&self, settings: &Settings) -> RuleScore {
            let conversation: Vec<Arc<Message>> = self.conversation.iter().cloned().map(Arc::new).collect();
            let message = self.conversation.last().unwrap();
            let bot = bot();
            score(
                &RuleInput {
                    message,
                    conversation: &conversation,
                    previous_in_channel: self.silence.map(|s| Timestamp(message.at.0 - (s * 1e6) as i64)),
                    last_response_at: self.last_response.map(at),
                    last_response_here: self.last_response_here.or(self.last_response).map(at),
                    now: Timestamp(message.at.0 + (self.judge_delay * 1e6) as i64),
                    answered: self.answered,
                    bot: &bot,
                },
                settings,
            )
        }
    }

    fn one(text: &str) -> Case {
        Case::new(vec![msg(1000.0, "alice", text)])
    }

    fn points_of(s: &RuleScore, rule: &str) -> Option<i32> {
        s.breakdown.0.iter().find(|(r, _)| r == rule).map(|(_, p)| *p)
    }

    #[test]
    fn direct_triggers() {
        let b = bot();
        assert_eq!(direct_trigger(&msg(0.0, "a", "<@UBOT> hi"), &b), Some(DirectTrigger::Mention));
        assert_eq!(direct_trigger(&msg(0.0, "a", "<@!UBOT> hi"), &b), Some(DirectTrigger::Mention));
        assert_eq!(direct_trigger(&msg(0.0, "a", "<@UOTHER> hi"), &b), None);
        let mut reply = msg(0.0, "a", "sure");
        reply.replies_to_bot = true;
        assert_eq!(direct_trigger(&reply, &b), Some(DirectTrigger::Reply));
        assert_eq!(direct_trigger(&msg(0.0, "a", "Kuuki, lunch?"), &b), Some(DirectTrigger::Name));
        assert_eq!(direct_trigger(&msg(0.0, "a", "ねえくうきはどう思う"), &b), Some(DirectTrigger::Name));
        assert_eq!(direct_trigger(&msg(0.0, "a", "kuukiness is a word"), &b), None);
        assert_eq!(direct_trigger(&msg(0.0, "a", "nothing here"), &b), None);
        assert_eq!(DirectTrigger::Mention.score(), 100);
        assert_eq!(DirectTrigger::Reply.score(), 100);
        assert_eq!(DirectTrigger::Name.score(), 80);
    }

    #[test]
    fn question_adds_20_with_either_question_mark() {
        let s = Settings::default();
        assert_eq!(points_of(&one("lunch?").score(&s), "question"), Some(20));
        assert_eq!(points_of(&one("お昼どうする？  ").score(&s), "question"), Some(20));
        assert_eq!(points_of(&one("what? no.").score(&s), "question"), None);
    }

    #[test]
    fn thanks_is_thanks_without_a_question_or_a_request() {
        for text in ["that's the one, thanks!! 🙏", "できました！ありがとうございます🙏", "kuuki ty!", "助かりました"]
        {
            assert!(is_thanks(text), "{text}");
        }
        for text in [
            "thanks! how do I do the same for views?",
            "ありがとう、もう一つ教えてほしいんだけど",
            "thanks, could you also check the staging logs",
            "お願いします",
            "the deploy is done",
        ] {
            assert!(!is_thanks(text), "{text}");
        }
    }

    #[test]
    fn questions_without_a_final_mark_are_questions() {
        for text in [
            "ugh, committed to main. how do I undo the last commit but keep the changes",
            "anyone know why rustc keeps saying `borrowed value does not live long enough`",
            "ok dumb question: is it 'a URL' or 'an URL'? I've written it both ways",
            "is there a quick way to see which queries are the slowest? postgres 14",
            "trying to figure out the right way to cache ~/.cargo between runs",
            "So is there a flag for that",
            "直前のコミット取り消したいんだけど、変更は残したい。どうやるんだっけ",
            "sccache も併用したらもっと速くなるのかな。キャッシュかぶりそうな気もするけど",
            "どっち使えばいいんだっけ…",
            "ステージングのログってどこで見られますか",
            "このエラーの意味、誰か教えてください",
            "ビルドの直し方教えて〜",
        ] {
            assert!(is_question(text), "{text}");
        }
        for text in [
            "what? no.",
            "deployed to staging, all green",
            "see https://example.com/search?q=kuuki for the list",
            "how nice is that",
            "that's the one, thanks!! 🙏",
            "お昼はカレーにしました",
            "ステージングのログは Grafana で見られます。",
            "which is why I moved it",
            "昨日教えてもらったやつ、入れたら通るようになったよ",
        ] {
            assert!(!is_question(text), "{text}");
        }
    }

    #[test]
    fn keywords_add_15_once() {
        let s = settings(&[("JUDGE_KEYWORDS", "deploy,障害")]);
        assert_eq!(points_of(&one("Deploy の障害です").score(&s), "keyword"), Some(15));
        let r = one("deploy deploy 障害").score(&s);
        assert_eq!(r.breakdown.0.iter().filter(|(k, _)| k == "keyword").count(), 1);
        assert_eq!(points_of(&one("nothing").score(&s), "keyword"), None);
    }

    #[test]
    fn bot_topics_add_15() {
        let s = settings(&[("BOT_TOPICS", "Rust,天気")]);
        assert_eq!(points_of(&one("rust の async むずい").score(&s), "bot_topic"), Some(15));
        assert_eq!(points_of(&one("明日の天気").score(&s), "bot_topic"), Some(15));
        assert_eq!(points_of(&one("go generics").score(&s), "bot_topic"), None);
    }

    #[test]
    fn cooldown_and_engagement_offset_each_other_on_the_spec_timeline() {
        let s = Settings::default();
        // Response at t=1000-x; message at 1000; judged at 1030.
        let mut c = one("hmm");
        c.judge_delay = 0.0;
        // Inside cooldown (and engagement): +40 -50.
        c.last_response = Some(1000.0 - 60.0);
        let r = c.score(&s);
        assert_eq!(points_of(&r, "engagement"), Some(40));
        assert_eq!(points_of(&r, "cooldown"), Some(-50));
        assert!(r.engaged);
        // Cooldown boundary: exactly COOLDOWN_SECONDS is still inside, one more is out.
        c.last_response = Some(1000.0 - 120.0);
        assert_eq!(points_of(&c.score(&s), "cooldown"), Some(-50));
        c.last_response = Some(1000.0 - 121.0);
        let r = c.score(&s);
        assert_eq!(points_of(&r, "cooldown"), None);
        assert_eq!(points_of(&r, "engagement"), Some(40));
        // Engagement boundary: exactly 300 s inside, 301 out.
        c.last_response = Some(1000.0 - 300.0);
        assert_eq!(points_of(&c.score(&s), "engagement"), Some(40));
        c.last_response = Some(1000.0 - 301.0);
        let r = c.score(&s);
        assert_eq!(points_of(&r, "engagement"), None);
        assert!(!r.engaged);
    }

    #[test]
    fn cooldown_counts_to_the_judgment_engagement_to_the_message() {
        let s = Settings::default();
        let mut c = one("hmm");
        // Written 100 s after the response, judged 30 s later: 130 s > cooldown.
        c.last_response = Some(900.0);
        c.judge_delay = 30.0;
        assert_eq!(points_of(&c.score(&s), "cooldown"), None);
        // A message written before kuuki's response is not engaged with it, but kuuki
        // is still in cooldown when judging it.
        c.last_response = Some(1010.0);
        let r = c.score(&s);
        assert_eq!(points_of(&r, "engagement"), None);
        assert_eq!(points_of(&r, "cooldown"), Some(-50));
    }

    #[test]
    fn engagement_is_for_the_conversation_kuuki_spoke_in() {
        let s = Settings::default();
        let mut c = one("and then?");
        c.last_response = Some(950.0);
        c.last_response_here = Some(-10_000.0);
        let r = c.score(&s);
        assert_eq!(points_of(&r, "engagement"), None, "kuuki spoke elsewhere in the channel");
        assert_eq!(points_of(&r, "cooldown"), Some(-50), "but cooldown is channel-wide");
    }

    #[test]
    fn engagement_boost_is_a_setting() {
        let s =
            settings(&[("ENGAGEMENT_BOOST", "25"), ("ENGAGEMENT_DURATION_SECONDS", "600"), ("COOLDOWN_SECONDS", "10")]);
        let mut c = one("hmm");
        c.last_response = Some(1000.0 - 500.0);
        assert_eq!(points_of(&c.score(&s), "engagement"), Some(25));
    }

    #[test]
    fn one_on_one_is_exactly_two_humans_in_the_recent_window() {
        let s = Settings::default();
        let two = Case::new(vec![msg(900.0, "alice", "a"), msg(950.0, "bob", "b"), msg(1000.0, "alice", "c")]);
        assert_eq!(points_of(&two.score(&s), "one_on_one"), Some(-20));
        let three = Case::new(vec![msg(900.0, "carol", "a"), msg(950.0, "bob", "b"), msg(1000.0, "alice", "c")]);
        assert_eq!(points_of(&three.score(&s), "one_on_one"), None);
        assert_eq!(points_of(&one("alone").score(&s), "one_on_one"), None);
        // Carol left the window of the last N messages: a 1:1 again.
        let s3 = settings(&[("JUDGE_RECENT_MESSAGES", "3")]);
        let mut conv = vec![msg(800.0, "carol", "x")];
        conv.extend([msg(900.0, "alice", "a"), msg(950.0, "bob", "b"), msg(1000.0, "alice", "c")]);
        assert_eq!(points_of(&Case::new(conv).score(&s3), "one_on_one"), Some(-20));
    }

    #[test]
    fn no_mention_in_the_last_n_messages_costs_10() {
        let s = settings(&[("JUDGE_RECENT_MESSAGES", "3")]);
        assert_eq!(points_of(&one("hi").score(&s), "no_mention"), Some(-10));
        let mentioned =
            Case::new(vec![msg(900.0, "bob", "<@UBOT> hi"), msg(950.0, "bob", "x"), msg(1000.0, "alice", "y")]);
        assert_eq!(points_of(&mentioned.score(&s), "no_mention"), None);
        let named = Case::new(vec![msg(900.0, "bob", "kuuki?"), msg(950.0, "bob", "x"), msg(1000.0, "alice", "y")]);
        assert_eq!(points_of(&named.score(&s), "no_mention"), None);
        let too_old = Case::new(vec![
            msg(800.0, "bob", "<@UBOT> hi"),
            msg(900.0, "bob", "x"),
            msg(950.0, "bob", "x"),
            msg(1000.0, "alice", "y"),
        ]);
        assert_eq!(points_of(&too_old.score(&s), "no_mention"), Some(-10));
    }

    #[test]
    fn a_lively_conversation_costs_10() {
        let s = Settings::default();
        let users = ["a", "b", "c", "d", "e"];
        // Five messages in 40 s: 6 a minute.
        let busy = Case::new(users.iter().enumerate().map(|(i, u)| msg(960.0 + 10.0 * i as f64, u, "x")).collect());
        assert_eq!(points_of(&busy.score(&s), "busy"), Some(-10));
        // Five messages in 41 s: under 6 a minute.
        let calm = Case::new(users.iter().enumerate().map(|(i, u)| msg(959.0 + 10.25 * i as f64, u, "x")).collect());
        assert_eq!(points_of(&calm.score(&s), "busy"), None);
        // Four messages are never lively, however fast.
        let few = Case::new(users[..4].iter().map(|u| msg(1000.0, u, "x")).collect());
        assert_eq!(points_of(&few.score(&s), "busy"), None);
        // A burst after a slow start is lively: older messages do not dilute it.
        let mut conv: Vec<Message> = (0..5).map(|i| msg(100.0 * i as f64, "z", "slow")).collect();
        conv.extend(users.iter().enumerate().map(|(i, u)| msg(990.0 + 2.0 * i as f64, u, "x")));
        assert_eq!(points_of(&Case::new(conv).score(&s), "busy"), Some(-10));
    }

    #[test]
    fn first_message_after_silence_adds_10() {
        let s = Settings::default();
        let mut c = one("hello again");
        c.silence = Some(30.0 * 60.0);
        assert_eq!(points_of(&c.score(&s), "after_silence"), Some(10));
        c.silence = Some(30.0 * 60.0 - 1.0);
        assert_eq!(points_of(&c.score(&s), "after_silence"), None);
        c.silence = None;
        assert_eq!(points_of(&c.score(&s), "after_silence"), Some(10), "a channel's first message");
    }

    #[test]
    fn fading_replies_cost_10_or_15() {
        let s = Settings::default();
        let conv = |lens: [usize; 6]| {
            Case::new(
                lens.iter()
                    .enumerate()
                    .map(|(i, n)| msg(900.0 + 10.0 * i as f64, if i % 2 == 0 { "a" } else { "b" }, &"x".repeat(*n)))
                    .collect(),
            )
        };
        assert_eq!(points_of(&conv([40, 40, 40, 10, 10, 10]).score(&s), "fading"), Some(-15));
        assert_eq!(points_of(&conv([40, 40, 40, 25, 25, 25]).score(&s), "fading"), Some(-10));
        // Exactly 3/4 is not fading yet; exactly half is the milder penalty.
        assert_eq!(points_of(&conv([40, 40, 40, 30, 30, 30]).score(&s), "fading"), None);
        assert_eq!(points_of(&conv([40, 40, 40, 20, 20, 20]).score(&s), "fading"), Some(-10));
        assert_eq!(points_of(&conv([10, 10, 10, 40, 40, 40]).score(&s), "fading"), None);
        // Fewer than six messages: nothing to compare.
        let five =
            Case::new((0..5).map(|i| msg(900.0 + i as f64, "a", if i < 3 { "long long" } else { "x" })).collect());
        assert_eq!(points_of(&five.score(&s), "fading"), None);
    }

    #[test]
    fn content_rules_read_the_speakers_whole_turn() {
        let s = settings(&[("BOT_TOPICS", "CI")]);
        let mut c = Case::new(vec![
            msg(0.0, "bob", "what?"),
            msg(900.0, "ken", "CI のキャッシュってどこで消せるんだっけ？"),
            msg(920.0, "ken", "急ぎではないです"),
        ]);
        c.silence = Some(3600.0);
        let r = c.score(&s);
        assert_eq!(points_of(&r, "question"), Some(20), "{:?}", r.breakdown);
        assert_eq!(points_of(&r, "bot_topic"), Some(15));
        assert!(r.question);
        // Someone else in between ends the turn: bob's question is not ken's.
        let c = Case::new(vec![msg(900.0, "bob", "CI?"), msg(920.0, "ken", "急ぎではないです")]);
        let r = c.score(&s);
        assert_eq!(points_of(&r, "question"), None);
        assert_eq!(points_of(&r, "bot_topic"), None);
    }

    fn in_thread(mut m: Message, root: f64) -> Message {
        m.thread_root = Some(Ts::from_timestamp(at(root)));
        m
    }

    #[test]
    fn an_open_question_counts_as_unanswered_once_it_has_stood_the_wait() {
        let s = Settings::default();
        let mut c = one("how do I undo my last commit but keep the changes?");
        c.judge_delay = 119.0;
        let young = c.score(&s);
        assert_eq!(points_of(&young, "unanswered_question"), None);
        let pending = young.pending.expect("the rule settles later");
        assert_eq!(pending.at, at(1000.0 + 120.0), "the question's own age, not the judgment's");
        c.judge_delay = 120.0;
        let stood = c.score(&s);
        assert_eq!(points_of(&stood, "unanswered_question"), Some(25));
        assert_eq!(stood.pending, None, "settled: a re-queued judgment decides");
        // question 20 - no_mention 10 + 25: the LLM's band, below the rules-only threshold.
        assert_eq!(stood.score, 35);
        assert_eq!(decide(stood.score, &settings(&[("LLM_JUDGE_ENABLED", "true")]), true), Decision::Llm);
        assert_eq!(decide(stood.score, &s, false), Decision::Skip);
        let s = settings(&[("UNANSWERED_QUESTION_POINTS", "40"), ("UNANSWERED_QUESTION_WAIT_SECONDS", "60")]);
        c.judge_delay = 60.0;
        assert_eq!(points_of(&c.score(&s), "unanswered_question"), Some(40));
    }

    #[test]
    fn a_question_someone_answered_or_that_addressed_kuuki_is_not_unanswered() {
        let s = Settings::default();
        let mut answered = one("lunch?");
        answered.judge_delay = 300.0;
        assert_eq!(points_of(&answered.score(&s), "unanswered_question"), Some(25));
        answered.answered = true;
        let r = answered.score(&s);
        assert_eq!(points_of(&r, "unanswered_question"), None);
        assert_eq!(r.pending, None);
        let mut statement = one("lunch is at noon");
        statement.judge_delay = 300.0;
        assert_eq!(points_of(&statement.score(&s), "unanswered_question"), None);
        assert_eq!(statement.score(&s).pending, None);
        // kuuki was addressed within the last N messages: the conversation is with it.
        let mut with_kuuki =
            Case::new(vec![msg(900.0, "alice", "<@UBOT> deploy day?"), msg(1000.0, "alice", "and who approves?")]);
        with_kuuki.judge_delay = 300.0;
        let r = with_kuuki.score(&s);
        assert_eq!(points_of(&r, "unanswered_question"), None);
        assert_eq!(r.pending, None);
    }

    #[test]
    fn mentions_of_other_people_are_found_in_every_platforms_form() {
        let b = bot();
        assert_eq!(mentioned_others("<@carol> did the invoice go out?", &b), vec!["carol"]);
        assert_eq!(mentioned_others("cc <@U123|ken> and <@!456>", &b), vec!["U123", "456"]);
        assert!(mentioned_others("<@UBOT> hi, and <@!UBOT>", &b).is_empty(), "kuuki is not another person");
        assert!(mentioned_others("<@&789> role ping, <!here>, <@ broken, <@>", &b).is_empty());
        assert!(mentioned_others("a < b and c@d > e", &b).is_empty());
    }

    #[test]
    fn a_turn_that_mentions_someone_else_is_theirs_until_the_wait_is_over() {
        let s = Settings::default();
        let mut c = one("<@carol> did the invoice go out?");
        let r = c.score(&s);
        assert_eq!(points_of(&r, "addressed_to_other"), Some(-60));
        assert_eq!(r.for_other.as_deref(), Some("carol"));
        assert_eq!(points_of(&r, "unanswered_question"), None, "carol's question, not an open one");
        assert_eq!(r.pending.as_ref().map(|p| p.at), Some(at(1000.0 + 3600.0)));
        assert!(r.pending.unwrap().reason.contains("carol"));
        c.judge_delay = 3599.0;
        assert_eq!(points_of(&c.score(&s), "addressed_to_other"), Some(-60));
        // Carol has not answered for the whole wait: the question is open to anyone.
        c.judge_delay = 3600.0;
        let r = c.score(&s);
        assert_eq!(points_of(&r, "addressed_to_other"), None);
        assert_eq!(r.for_other, None);
        assert_eq!(points_of(&r, "unanswered_question"), Some(25));
        assert_eq!(r.pending, None);
        // Not a question: nothing to wait for.
        let thanks = one("thanks <@carol>!");
        let r = thanks.score(&s);
        assert_eq!(points_of(&r, "addressed_to_other"), Some(-60));
        assert_eq!(r.pending, None);
        let s = settings(&[("ADDRESSED_TO_OTHER_POINTS", "-30"), ("ADDRESSED_TO_OTHER_WAIT_MINUTES", "5")]);
        let mut c = one("<@carol> did the invoice go out?");
        assert_eq!(points_of(&c.score(&s), "addressed_to_other"), Some(-30));
        c.judge_delay = 300.0;
        assert_eq!(points_of(&c.score(&s), "addressed_to_other"), None);
    }

    #[test]
    fn a_thread_reply_to_another_persons_question_is_theirs() {
        let s = Settings::default();
        let asked = msg(900.0, "alice", "which region is staging in?");
        let reply = |text: &str| in_thread(msg(1000.0, "bob", text), 900.0);
        let r = Case::new(vec![asked.clone(), reply("do you mean the db or the app?")]).score(&s);
        assert_eq!(points_of(&r, "addressed_to_other"), Some(-60));
        assert_eq!(r.for_other.as_deref(), Some("alice"));
        let r = Case::new(vec![asked.clone(), reply("eu-west-1")]).score(&s);
        assert_eq!(points_of(&r, "addressed_to_other"), Some(-60), "an answer is for the asker too");
        // Not a question before it, the speaker's own question, a bot's, or the top level.
        let said = msg(900.0, "alice", "staging is slow today");
        assert_eq!(points_of(&Case::new(vec![said, reply("why?")]).score(&s), "addressed_to_other"), None);
        let own = Case::new(vec![msg(900.0, "bob", "which region?"), reply("anyone?")]);
        assert_eq!(points_of(&own.score(&s), "addressed_to_other"), None);
        let mut from_bot = asked.clone();
        from_bot.author = Author::OwnBot;
        assert_eq!(points_of(&Case::new(vec![from_bot, reply("the db")]).score(&s), "addressed_to_other"), None);
        let top_level = Case::new(vec![asked, msg(1000.0, "bob", "eu-west-1?")]);
        assert_eq!(points_of(&top_level.score(&s), "addressed_to_other"), None);
    }

    #[test]
    fn a_conversation_shorter_than_the_minimum_costs_40_unless_it_is_an_open_question() {
        let s = Settings::default();
        let remark = |n: usize| {
            Case::new((0..n).map(|i| msg(900.0 + 10.0 * i as f64, ["a", "b", "c"][i % 3], "deploy done")).collect())
        };
        assert_eq!(points_of(&remark(1).score(&s), "short_conversation"), Some(-40));
        assert_eq!(points_of(&remark(2).score(&s), "short_conversation"), Some(-40), "one short of 3");
        assert_eq!(points_of(&remark(3).score(&s), "short_conversation"), None, "exactly the minimum");
        // kuuki's own messages are part of the conversation too.
        let mut with_kuuki = remark(3);
        with_kuuki.conversation[1].author = Author::OwnBot;
        assert_eq!(points_of(&with_kuuki.score(&s), "short_conversation"), None);
        // An open question stands on its own, before and after its wait.
        let mut question = one("how do I undo my last commit?");
        assert_eq!(points_of(&question.score(&s), "short_conversation"), None);
        question.judge_delay = 300.0;
        assert_eq!(points_of(&question.score(&s), "short_conversation"), None);
        // An answered question is no longer open: the minimum applies again.
        question.answered = true;
        assert_eq!(points_of(&question.score(&s), "short_conversation"), Some(-40));
        let s5 = settings(&[("JUDGE_MIN_CONVERSATION_MESSAGES", "5")]);
        assert_eq!(points_of(&remark(4).score(&s5), "short_conversation"), Some(-40));
        assert_eq!(points_of(&remark(5).score(&s5), "short_conversation"), None);
        let off = settings(&[("JUDGE_MIN_CONVERSATION_MESSAGES", "1")]);
        assert_eq!(points_of(&remark(1).score(&off), "short_conversation"), None);
    }

    #[test]
    fn the_ranges_read_as_caseless_do_not_change_when_lowercased() {
        let ranges = [0x3000..=0x9FFF, 0x2000..=0x203F, 0xFF00..=0xFF20, 0xFF3B..=0xFFFF];
        for c in ranges.into_iter().flatten().filter_map(char::from_u32) {
            let text = c.to_string();
            assert!(only_ascii_letters_have_case(text.as_bytes()), "{c:?} U+{:04X}", c as u32);
            assert_eq!(text.to_lowercase(), text, "U+{:04X}", c as u32);
        }
        for text in ["Ａ", "Ｚ", "Ω", "Ⅰ", "É", "ǅ"] {
            assert!(!only_ascii_letters_have_case(text.as_bytes()), "{text}");
        }
    }

    #[test]
    fn a_sentence_asks_by_its_opening_or_its_ending_after_fillers() {
        // Each phrase list read as it is written, one phrase at a time.
        let one_by_one = |sentence: &str| {
            let mut s = sentence.trim_start();
            while let Some(rest) = question_phrases::FILLERS.iter().find_map(|f| s.strip_prefix(f)) {
                s = rest.trim_start();
            }
            let end = s.trim_end_matches(|c: char| !c.is_alphanumeric());
            question_phrases::OPENINGS.iter().any(|o| s.starts_with(o))
                || question_phrases::JA_ENDINGS.iter().any(|e| end.ends_with(e))
        };
        let mut sentences =
            vec!["", "so ok how do i undo", "okay  also is there a way", "dumb questionwhy is it", "どこだっけ!!"];
        for phrase in
            question_phrases::OPENINGS.iter().chain(question_phrases::FILLERS).chain(question_phrases::JA_ENDINGS)
        {
            sentences.push(phrase);
        }
        let variants: Vec<String> = sentences
            .iter()
            .flat_map(|s| [s.to_string(), format!("so {s}"), format!("x{s}"), format!("{s} x"), format!("今日は{s}。")])
            .collect();
        for sentence in &variants {
            assert_eq!(asks(sentence), one_by_one(sentence), "{sentence:?}");
        }
        assert!(asks("ok so how do i undo") && asks("デプロイどうすればいいのかな") && !asks("lunch"));
    }

    #[test]
    fn lowercase_borrows_only_what_is_lowercase_already() {
        use std::borrow::Cow;
        for text in ["おはよう、デプロイは？", "lunch anyone?", "", "ｋｕｕｋｉ", "日本語の café"]
        {
            assert!(matches!(lowercase(text), Cow::Borrowed(t) if t == text), "{text}");
        }
        for (text, lower) in [
            ("Hello", "hello"),
            ("ＫＵＵＫＩ さん", "ｋｕｕｋｉ さん"),
            ("ǅemal", "ǆemal"),
            ("ÉCOLE", "école"),
            ("日本語の Éc", "日本語の éc"),
        ] {
            assert!(matches!(lowercase(text), Cow::Owned(ref t) if t == lower), "{text}");
        }
    }

    #[test]
    fn a_turn_is_the_trailing_run_of_one_author() {
        let conv: Vec<Arc<Message>> =
            [msg(0.0, "a", "1"), msg(1.0, "b", "2"), msg(2.0, "a", "3"), msg(3.0, "a", "4")].map(Arc::new).into();
        let t: Vec<&str> = turn(&conv).iter().map(|m| m.text.as_str()).collect();
        assert_eq!(t, vec!["3", "4"]);
        assert_eq!(turn(&conv[..1]).len(), 1);
        assert!(turn(&[]).is_empty());
    }

    #[test]
    fn the_score_is_clamped_to_0_100() {
        let s = settings(&[
            ("JUDGE_KEYWORDS", "deploy"),
            ("BOT_TOPICS", "rust"),
            ("ENGAGEMENT_BOOST", "100"),
            ("COOLDOWN_SECONDS", "0"),
        ]);
        let mut high = one("rust deploy?");
        high.last_response = Some(990.0);
        high.judge_delay = 20.0;
        let r = high.score(&s);
        assert!(r.breakdown.total() > 100, "{:?}", r.breakdown);
        assert_eq!(r.score, 100);
        let mut low = Case::new(vec![msg(990.0, "a", "xxxxxxxxxx"), msg(1000.0, "b", "x")]);
        low.last_response = Some(1000.0 - 1000.0);
        low.judge_delay = 0.0;
        let s = settings(&[("ENGAGEMENT_DURATION_SECONDS", "10"), ("COOLDOWN_SECONDS", "2000")]);
        let r = low.score(&s);
        assert!(r.breakdown.total() < 0, "{:?}", r.breakdown);
        assert_eq!(r.score, 0);
    }

    #[test]
    fn thresholds_without_the_llm_judge() {
        let s = Settings::default();
        assert_eq!(decide(60, &s, false), Decision::Respond);
        assert_eq!(decide(59, &s, false), Decision::Skip);
        let s = settings(&[("JUDGE_SCORE_THRESHOLD", "30")]);
        assert_eq!(decide(30, &s, false), Decision::Respond);
        // An LLM judge that is enabled but not available falls back to the threshold.
        let s = settings(&[("LLM_JUDGE_ENABLED", "true")]);
        assert_eq!(decide(50, &s, false), Decision::Skip);
    }

    #[test]
    fn thresholds_with_the_llm_judge() {
        let s = settings(&[("LLM_JUDGE_ENABLED", "true")]);
        assert_eq!(decide(80, &s, true), Decision::Respond);
        assert_eq!(decide(79, &s, true), Decision::Llm);
        assert_eq!(decide(21, &s, true), Decision::Llm);
        assert_eq!(decide(20, &s, true), Decision::Skip);
        let off = settings(&[("LLM_PROVIDER", "openai"), ("LLM_JUDGE_ENABLED", "false")]);
        assert_eq!(decide(79, &off, true), Decision::Respond);
    }

    #[test]
    fn the_response_ladder() {
        let s = Settings::default();
        assert_eq!(response_type(59, false, false, &s), ResponseType::ReactOnly);
        assert_eq!(response_type(60, false, false, &s), ResponseType::ShortAck);
        assert_eq!(response_type(79, false, false, &s), ResponseType::ShortAck);
        assert_eq!(response_type(60, true, false, &s), ResponseType::FullResponse);
        assert_eq!(response_type(80, false, false, &s), ResponseType::FullResponse);
        assert_eq!(response_type(30, false, true, &s), ResponseType::FullResponse);
        let flat = settings(&[("RESPONSE_DIVERSITY_ENABLED", "false")]);
        assert_eq!(response_type(10, false, false, &flat), ResponseType::FullResponse);
    }

    #[test]
    fn emoji_follow_the_message() {
        assert_eq!(pick_emoji("どうする？"), "thinking_face");
        assert_eq!(pick_emoji("ありがとう"), "pray");
        assert_eq!(pick_emoji("deploy done"), "tada");
        assert_eq!(pick_emoji("草"), "joy");
        assert_eq!(pick_emoji("ふむ"), "eyes");
    }
}
