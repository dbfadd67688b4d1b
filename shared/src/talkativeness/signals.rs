//! The signals kuuki reads from a channel: reactions on its posts, words to it, and how
//! each unasked post was taken (replied to, or passed by).

use crate::conversation::Window;
use crate::deps::Deps;
use crate::domain::talkativeness::{FeedbackChange, IGNORED_AFTER_MESSAGES, SETTLE_WINDOW, SignalKind, Talkativeness};
use crate::domain::{Author, BotIdentity, ChannelId, Message, Ts, UserId};
use crate::judge::rules::{direct_trigger, is_question, is_thanks};
use crate::ports::{ChannelState, PortResult};

use super::{About, apply};

/// How long after a post's window a judgment still settles the post: past the longest
/// a judgment waits (`UNANSWERED_QUESTION_WAIT_SECONDS`, 120 s, with the judge's jitter),
/// with room to spare.
const SETTLE_AFTER_WINDOW: std::time::Duration = std::time::Duration::from_secs(600);

/// How far back a judgment looks for unasked posts still to settle.
const SETTLE_LOOKBACK: std::time::Duration = std::time::Duration::from_secs(3600);

/// Words that ask kuuki to be quiet when said to it ("shh kuuki", "kuuki, stop",
/// 「くうき静かに」).
const HUSH_TO_KUUKI: &[&str] = &[
    "shh",
    "shush",
    "hush",
    "not now",
    "stop",
    "be quiet",
    "quiet please",
    "静かに",
    "しずかに",
    "黙って",
    "だまって",
    "今はいい",
    "いまはいい",
    "うるさい",
    "やめて",
];
/// Words that turn kuuki away without naming it, right after it spoke unasked
/// (「今はいいよ」, "not now").
const HUSH_AFTER_POST: &[&str] = &["shh", "not now", "今はいい", "いまはいい", "静かに", "黙って"];
/// What a hush may carry besides its words and kuuki's name ("please", 「よ、ありがとう」),
/// in letters: a longer message says something else ("kuuki, stop the deploy at five").
const HUSH_SLACK_CHARS: usize = 10;

/// Whether `text` asks kuuki to be quiet: one of the hush words, and little else once
/// kuuki's names and mentions are left out; any of them when it is said to kuuki
/// (`to_kuuki`), only the unmistakable ones otherwise. Not a question.
pub fn is_hush(text: &str, to_kuuki: bool, bot: &BotIdentity) -> bool {
    // "kuuki, how do I stop the server?" asks something; it does not hush.
    if is_question(text) {
        return false;
    }
    let mut rest = text.to_lowercase();
    for name in bot.names_lowercase() {
        rest = rest.replace(name.as_str(), "");
    }
    // Mentions (`<@U…>`, `<@!…>`) are kuuki's or someone's: not what the words say.
    while let (Some(open), Some(close)) = (rest.find("<@"), rest.find('>')) {
        if close < open {
            break;
        }
        rest.replace_range(open..=close, "");
    }
    let letters = rest.chars().filter(|c| c.is_alphanumeric()).count();
    let words = if to_kuuki { HUSH_TO_KUUKI } else { HUSH_AFTER_POST };
    words.iter().any(|w| {
        let own = w.chars().filter(|c| c.is_alphanumeric()).count();
        rest.contains(w) && letters <= own + HUSH_SLACK_CHARS
    })
}

/// A reaction on a message of `channel` (`removed`: taken off). Counts only on kuuki's
/// own posts and only someone else's: a welcoming or turning-away emoji by its weight,
/// any other as no weight (but noticed: the post was not ignored). A removal undoes the
/// reaction's signal. Safe to repeat.
pub async fn reaction(
    deps: &Deps,
    channel: &ChannelId,
    post: &Ts,
    user: &UserId,
    emoji: &str,
    removed: bool,
) -> PortResult<()> {
    if !deps.settings.talkativeness.enabled || deps.bot_in(channel).is_me(user.as_str()) {
        return Ok(());
    }
    let Some(message) = deps.messages.get_message(channel, post).await? else { return Ok(()) };
    if message.author != Author::OwnBot {
        return Ok(());
    }
    let emoji = emoji.trim_matches(':');
    let settings = &deps.settings.talkativeness;
    let kind = if settings.negative_reactions.iter().any(|e| e == emoji) {
        SignalKind::NegativeReaction
    } else if settings.positive_reactions.iter().any(|e| e == emoji) {
        SignalKind::PositiveReaction
    } else {
        SignalKind::OtherReaction
    };
    let id = format!("reaction:{post}:{user}:{emoji}");
    let about =
        || About { channel, thread_root: message.thread_root.clone(), ts: post.clone(), user: Some(user.clone()) };
    if removed {
        apply(deps, about(), FeedbackChange::Undo { id }).await?;
        return Ok(());
    }
    apply(deps, about(), FeedbackChange::Count { id, kind, post: Some(post.clone()) }).await?;
    // Someone reacted in time: the post was not passed by after all.
    if deps.clock.now().seconds_since(message.at) <= SETTLE_WINDOW.as_secs_f64() {
        apply(deps, about(), FeedbackChange::Undo { id: ignored_id(post) }).await?;
    }
    Ok(())
}

/// What a participant's message says about kuuki's talkativeness, read by the worker
/// that handles it (the judge, or the answer to a direct trigger): thanks or a hush said
/// to kuuki, and how kuuki's recent unasked posts in the channel were taken. Each
/// signal counts once, however often this runs. Failures are the caller's to log.
pub async fn notice(deps: &Deps, window: &Window, state: &ChannelState, target: &Message) -> PortResult<()> {
    if !deps.settings.talkativeness.enabled || target.author != Author::Human {
        return Ok(());
    }
    let talk = &state.talkativeness;
    let to_kuuki = direct_trigger(target, &deps.bot_in(&target.channel)).is_some();
    let about = || About {
        channel: &target.channel,
        thread_root: target.thread_root.clone(),
        ts: target.ts.clone(),
        user: Some(target.user.clone()),
    };
    let after_post = just_after_unasked_post(state, target);
    // Cheapest test first: a hush counts only to kuuki or right after its post.
    if (to_kuuki || after_post.is_some()) && is_hush(&target.text, to_kuuki, &deps.bot_in(&target.channel)) {
        let id = format!("hush:{}", target.ts);
        if !talk.counts(&id) {
            apply(deps, about(), FeedbackChange::Count { id, kind: SignalKind::Hushed, post: after_post }).await?;
        }
    } else if to_kuuki && is_thanks(&target.text) {
        let id = format!("thanks:{}", target.ts);
        if !talk.counts(&id) {
            apply(deps, about(), FeedbackChange::Count { id, kind: SignalKind::Thanked, post: after_post }).await?;
        }
    }
    settle(deps, window, state, target).await
}

/// kuuki's unasked post in `target`'s conversation (or the thread under it) that
/// `target` came within [`SETTLE_WINDOW`] of, if any.
fn just_after_unasked_post(state: &ChannelState, target: &Message) -> Option<Ts> {
    state
        .interventions
        .iter()
        .rev()
        .filter(|i| {
            i.thread.root == target.thread_root
                || (target.thread_root.is_some() && target.thread_root == i.unasked_post)
        })
        .filter(|i| {
            let since = target.at.seconds_since(i.at);
            (0.0..=SETTLE_WINDOW.as_secs_f64()).contains(&since)
        })
        .find_map(|i| i.unasked_post.clone())
}

fn ignored_id(post: &Ts) -> String {
    format!("ignored:{post}")
}

fn engaged_id(post: &Ts) -> String {
    format!("engaged:{post}")
}

/// Someone reacted to `post` (any reaction that still stands).
fn reacted(talk: &Talkativeness, post: &Ts) -> bool {
    talk.signals.iter().any(|s| {
        !s.undone
            && s.post.as_ref() == Some(post)
            && matches!(s.kind, SignalKind::PositiveReaction | SignalKind::NegativeReaction | SignalKind::OtherReaction)
    })
}

/// How each unasked post of the last hour was taken, from the messages after it within
/// [`SETTLE_WINDOW`]: one that replies in its thread, replies to kuuki or mentions it
/// makes it `engaged` (and takes back an `ignored` counted before); otherwise
/// [`IGNORED_AFTER_MESSAGES`] people's messages with no reaction on it make it
/// `ignored`.
async fn settle(deps: &Deps, window: &Window, state: &ChannelState, target: &Message) -> PortResult<()> {
    let talk = &state.talkativeness;
    let now = deps.clock.now();
    for intervention in &state.interventions {
        let Some(post_ts) = &intervention.unasked_post else { continue };
        if now.seconds_since(intervention.at) > SETTLE_LOOKBACK.as_secs_f64() || talk.counts(&engaged_id(post_ts)) {
            continue;
        }
        // Only a message from the post's window can be counted; one from after it
        // settles the post only when it superseded the judgment of the window's last
        // message, which happens within a judgment's wait. Later messages read nothing
        // (two store reads saved each, for the rest of the hour).
        if target.at.seconds_since(intervention.at) > (SETTLE_WINDOW + SETTLE_AFTER_WINDOW).as_secs_f64() {
            continue;
        }
        let Some(post) = window.get_message(deps, &target.channel, post_ts).await? else { continue };
        let until = post.at + SETTLE_WINDOW;
        let mut after = window.messages_after(deps, &post).await?;
        // A question's pick-up posts in a thread under it: the question's conversation
        // going on past the post counts too. With the answered model on (a help
        // channel's setting) only the asker can pass it by: kuuki took up a question it
        // believes nobody answered, for them; everyone else talks on about their own.
        let mut answered_asker = None;
        if intervention.thread.root != post.thread_root
            && let Some(root) = &post.thread_root
            && let Some(question) = window.get_message(deps, &target.channel, root).await?
        {
            let talk_on = window.messages_after(deps, &question).await?;
            after.extend(talk_on.into_iter().filter(|m| m.ts > post.ts && m.thread_root != post.thread_root));
            answered_asker = Some(question.user.clone());
        } else if intervention.pick_up
            && let Some(answered) = &post.replies_to
            && let Some(question) = window.get_message(deps, &target.channel, answered).await?
        {
            // On Discord the answer replies to the question, in the channel's flow.
            answered_asker = Some(question.user.clone());
        }
        let answered_asker = answered_asker.filter(|_| deps.settings.judge.reply_model_threshold.is_some());
        let mut people: Vec<&Message> =
            after.iter().map(|m| &**m).filter(|m| m.author == Author::Human && m.at <= until).collect();
        people.sort_by(|a, b| a.ts.cmp(&b.ts));
        let replies_in_thread = |m: &Message| match &post.thread_root {
            Some(root) => m.thread_root.as_ref() == Some(root),
            None => m.thread_root.as_ref() == Some(&post.ts),
        };
        let about = |by: Option<&Message>| About {
            channel: &target.channel,
            thread_root: post.thread_root.clone(),
            ts: post.ts.clone(),
            user: by.map(|m| m.user.clone()),
        };
        // Telling kuuki to hush answers it, but does not take its words up.
        let takes_up = |m: &Message| {
            (replies_in_thread(m) || direct_trigger(m, &deps.bot_in(&m.channel)).is_some())
                && !is_hush(&m.text, true, &deps.bot_in(&m.channel))
        };
        if let Some(reply) = people.iter().find(|m| takes_up(m)) {
            let change = FeedbackChange::Count {
                id: engaged_id(post_ts),
                kind: SignalKind::Engaged,
                post: Some(post_ts.clone()),
            };
            apply(deps, about(Some(reply)), change).await?;
            if talk.counts(&ignored_id(post_ts)) {
                apply(deps, about(Some(reply)), FeedbackChange::Undo { id: ignored_id(post_ts) }).await?;
            }
        } else if people.iter().filter(|m| answered_asker.as_ref().is_none_or(|asker| m.user == *asker)).count()
            >= IGNORED_AFTER_MESSAGES
            && !reacted(talk, post_ts)
            && talk.signal(&ignored_id(post_ts)).is_none()
        {
            let change = FeedbackChange::Count {
                id: ignored_id(post_ts),
                kind: SignalKind::Ignored,
                post: Some(post_ts.clone()),
            };
            apply(deps, about(None), change).await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hush_words_count_when_said_to_kuuki_and_only_the_clear_ones_otherwise() {
        let bot = BotIdentity::new(UserId("UKUUKI".into()), "kuuki", &["くうき".to_owned()]);
        for text in [
            "shh kuuki",
            "not now kuuki",
            "kuuki, stop",
            "くうき静かに",
            "今はいいよ",
            "<@UKUUKI> shh!",
            "not now kuuki, thanks",
        ] {
            assert!(is_hush(text, true, &bot), "{text}");
        }
        for text in ["shh", "not now please", "今はいいよ", "今はいいよ、ありがとう"] {
            assert!(is_hush(text, false, &bot), "{text}");
        }
        for text in [
            "stop the deploy at 5",
            "that's enough coffee",
            "what's the quiet period?",
            "ちょっと静かにしてくれる人いる？",
        ] {
            assert!(!is_hush(text, false, &bot), "{text}");
        }
        for text in [
            "thanks kuuki!",
            "kuuki, how do I stop the server?",
            "kuuki stop the deploy at five please",
            "kuuki is quiet today",
            "kuuki, enough about the build, what about lunch",
        ] {
            assert!(!is_hush(text, true, &bot), "{text}");
        }
    }
}
