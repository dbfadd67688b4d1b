//! The rule-based judge (docs/design.md §7.2, spec 000 and 001): pure functions over a message,
//! its conversation and the channel's state. No I/O, no clock.

use std::sync::Arc;

use super::naming;
pub use super::naming::KnownPeople;
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
/// person it mentions or calls by name (`nick: …` on any of its lines, a known person
/// of `people` or of the conversation), or, in a thread, the person whose question the
/// turn replies to (the turn just before it, another human's, asked something).
pub fn addressee(conversation: &[Arc<Message>], bot: &BotIdentity, people: &KnownPeople) -> Option<String> {
    let turn = turn(conversation);
    let speaker = turn.last()?;
    if let Some(id) = turn.iter().find_map(|m| mentioned_others(&m.text, bot).first().copied()) {
        return Some(id.to_owned());
    }
    if let Some(name) = called_by_name(&turn[0], conversation, bot, people) {
        return Some(name);
    }
    if let Some(nick) = naming::called_by_nick(turn, people) {
        return Some(nick);
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
fn called_by_name(
    message: &Message,
    conversation: &[Arc<Message>],
    bot: &BotIdentity,
    people: &KnownPeople,
) -> Option<String> {
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
        people.named(word, &message.user).is_some()
            || conversation.iter().any(|m| {
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
    /// The channel's people kuuki can tell by name (for `nick: …`), besides the
    /// conversation's own.
    pub people: &'a KnownPeople,
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
        after >= 0.0 && after <= settings.judge.engagement_duration.as_secs_f64()
    });
    if engaged {
        breakdown.add("engagement", settings.judge.engagement_boost);
    }
    let question = turn.iter().any(|m| is_question(&m.text));
    if question {
        breakdown.add("question", points::QUESTION);
    }
    if mentions_any(&settings.judge.keywords) {
        breakdown.add("keyword", points::KEYWORD);
    }
    let in_cooldown =
        input.last_response_at.is_some_and(|at| input.now.seconds_since(at) <= settings.judge.cooldown.as_secs_f64());
    if in_cooldown {
        breakdown.add("cooldown", points::COOLDOWN);
    }

    let window = recent_window(input.conversation, settings.judge.recent_messages);
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
    // The judged turn's own: a name call earlier in the window made that turn kuuki's,
    // not every question after it.
    let kuuki_addressed = addressed_to_kuuki(conversation, input.bot);
    if !kuuki_addressed {
        breakdown.add("no_mention", points::NO_MENTION);
    }
    if is_busy(&humans, settings.judge.busy_messages_per_minute) {
        breakdown.add("busy", points::BUSY);
    }
    if mentions_any(&settings.bot.topics) {
        breakdown.add("bot_topic", points::BOT_TOPIC);
    }
    let after_silence = match input.previous_in_channel {
        None => true,
        Some(prev) => turn[0].at.seconds_since(prev) >= settings.judge.silence.as_secs_f64(),
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
    // Names matter only to a turn that opens a line with `nick:` or `nick,` (a name
    // call without one is checked against the conversation by `called_by_name` itself),
    // so most judgments build no list of names.
    let calls_by_nick = turn.iter().any(|m| naming::line_openings(&m.text).next().is_some());
    let people = if calls_by_nick {
        let mut people = KnownPeople::of_messages(conversation);
        people.extend(input.people.clone());
        people
    } else {
        KnownPeople::default()
    };
    let addressee = addressee(conversation, input.bot, &people);
    let other_wait = settings.judge.addressed_to_other_wait.as_secs_f64();
    let for_other = addressee.filter(|_| age < other_wait);
    let mut pending = None;
    if let Some(who) = &for_other {
        breakdown.add("addressed_to_other", settings.judge.addressed_to_other_points);
        if question && !input.answered {
            pending = Some(Pending {
                at: message.at + settings.judge.addressed_to_other_wait,
                reason: format!(
                    "the question is for {who}: judged again after {} min unless someone answers",
                    settings.judge.addressed_to_other_wait.as_secs() / 60
                ),
                picked_up: false,
            });
        }
    }
    let open_question = question && !input.answered && !kuuki_addressed && for_other.is_none();
    if open_question {
        let wait = settings.judge.unanswered_question_wait;
        if age >= wait.as_secs_f64() {
            breakdown.add("unanswered_question", settings.judge.unanswered_question_points);
        } else {
            pending = Some(Pending {
                at: message.at + wait,
                reason: format!(
                    "the question has stood {age:.0} s: its pick-up judges it at {} s unless it is answered",
                    wait.as_secs()
                ),
                picked_up: true,
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
    if messages < settings.judge.min_conversation_messages && !open_question {
        breakdown.add("short_conversation", points::SHORT_CONVERSATION);
    }

    RuleScore { score: breakdown.total().clamp(0, 100), breakdown, engaged, question, for_other, pending }
}

/// Whether the last turn of `conversation` is kuuki's to answer: it mentions, names or
/// replies to kuuki, or follows kuuki's answer to the same person.
pub fn addressed_to_kuuki(conversation: &[Arc<Message>], bot: &BotIdentity) -> bool {
    let turn = turn(conversation);
    turn.iter().any(|m| direct_trigger(m, bot).is_some()) || answers_kuuki(conversation, turn.len())
}

/// Whether the last turn (its `turn_len` messages) follows kuuki's answer to the same
/// person, nobody in between: their follow-up is a reply to kuuki, as if they had
/// used the platform's reply. Anyone else's line after kuuki's answer is not.
fn answers_kuuki(conversation: &[Arc<Message>], turn_len: usize) -> bool {
    let before = &conversation[..conversation.len() - turn_len];
    let Some(speaker) = conversation.last() else {
        return false;
    };
    let Some(kuuki_at) = before.iter().rposition(|m| m.author != Author::OwnBot).map(|i| i + 1) else {
        return false;
    };
    kuuki_at < before.len() && {
        let answered = &before[kuuki_at - 1];
        answered.author == Author::Human && answered.user == speaker.user
    }
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

/// What the thresholds say about a score (docs/design.md §7.2).
pub fn decide(score: i32, settings: &Settings, llm_judge_available: bool) -> Decision {
    if settings.judge.llm_enabled && llm_judge_available {
        if score >= settings.judge.llm_threshold_high {
            Decision::Respond
        } else if score <= settings.judge.llm_threshold_low {
            Decision::Skip
        } else {
            Decision::Llm
        }
    } else if score >= settings.judge.score_threshold {
        Decision::Respond
    } else {
        Decision::Skip
    }
}

/// The response ladder: react below 60, a short acknowledgement from 60 to 79 outside
/// engagement, a full response at 80 and above or on a clear trigger.
pub fn response_type(score: i32, engaged: bool, clear_trigger: bool, settings: &Settings) -> ResponseType {
    if !settings.judge.response_diversity_enabled || clear_trigger || score >= 80 {
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
mod tests;
