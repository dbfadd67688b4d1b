//! A reply that addresses kuuki by its own name in the second person, as every prompt
//! does (`You are "kuuki", …`, 「あなたは「kuuki」としてチャンネルの会話に…」) and as
//! personas do ("You are kuuki, the quiet teammate …", 「あなたは「kuuki」、…です。」),
//! is the persona read out, in whatever language it was written in: nothing needs to be
//! copied. kuuki never has a reason to tell anyone "you are kuuki"; "you are" followed
//! by anyone else's name ("You are right, Aiko") passes, and so does a short question
//! quoted in passing ("bob asked \"you are kuuki?\"").

use super::phrases::{Folded, find, shown, spelled_at, word_char, word_edge};

/// What says "you are" before kuuki's name in a persona: every prompt opens this way
/// (`You are "kuuki", taking part …`, 「あなたは「kuuki」としてチャンネルの会話に…」).
const EN_YOU_ARE: &[&str] = &[
    "you are ",
    "you're ",
    "youre ",
    "you are called ",
    "you're called ",
    "you are named ",
    "you're named ",
    "your name is ",
    "you will be ",
    "you'll be ",
    "you play ",
    "you will play ",
    "you are playing ",
    "you're playing ",
    "you act as ",
    "you will act as ",
];
const JA_YOU_ARE: &[&str] = &[
    "あなたは",
    "あなたが",
    "あんたは",
    "貴方は",
    "貴女は",
    "君は",
    "きみは",
    "キミは",
    "お前は",
    "おまえは",
    "あなたの名前は",
    "君の名前は",
    "きみの名前は",
    "お前の名前は",
];
/// Quotes and markup a name may stand in.
const NAME_OPENERS: &[&str] = &["", "\"", "'", "「", "**", "*", "_"];
const NAME_CLOSERS: &[char] = &['"', '\'', '」', '*', '_'];
/// What follows the name in a Japanese persona: punctuation, the copula, 「という」,
/// 「として」. Not a particle ("あなたは空気が読めない", 「あなたはkuukiのことを…」).
const JA_AFTER_NAME_CHARS: &[char] =
    &['、', ',', '。', '.', '!', '?', ':', ';', '・', '\n', '…', '(', '-', '—', '~', '〜'];
const JA_AFTER_NAME: &[&str] = &[
    "です",
    "でござ",
    "だ。",
    "だ、",
    "だ,",
    "だよ",
    "だね",
    "だな",
    "だから",
    "であ",
    "で、",
    "で,",
    "という",
    "といい",
    "と呼ばれ",
    "と名乗",
    "として",
];
/// A sentence this short after the name that ends in a question ("you are kuuki?",
/// ", right?", 「ですか」) asks who kuuki is, as a person quoted in a reply may; a persona
/// states it and goes on to describe kuuki.
const QUESTION_TAIL_CHARS: usize = 16;
const SENTENCE_ENDS: &[char] = &['.', '。', '!', '?', '\n', '…'];

/// Whether the sentence going on at `from` is a short question.
fn asks(text: &[char], from: usize) -> bool {
    let tail = text[from..].iter().take_while(|c| !SENTENCE_ENDS.contains(c)).count();
    if tail > QUESTION_TAIL_CHARS {
        return false;
    }
    let last = text[from..from + tail].iter().rev().find(|c| !matches!(c, '"' | '\'' | '」' | ' '));
    text.get(from + tail) == Some(&'?') || last == Some(&'か')
}

fn after_closers(text: &[char], mut at: usize) -> usize {
    while text.get(at).is_some_and(|c| NAME_CLOSERS.contains(c)) {
        at += 1;
    }
    at
}

/// Where `reply` addresses kuuki by `bot_name` in the second person, as a persona does
/// ("You are kuuki, the quiet teammate …", 「あなたは「kuuki」、…です」): the persona read
/// out, in any language. A short question ("you are kuuki?", 「あなたはkuukiですか」)
/// passes, and so does a word made of the name ("you are kuuki's favourite",
/// "kuuki-level").
pub(super) fn addresses_kuuki_as_its_persona(reply: &Folded, bot_name: &str) -> Option<String> {
    let name = Folded::new(bot_name);
    if name.compact.is_empty() {
        return None;
    }
    let spaced_name: String = name.spaced.iter().collect();
    let compact_name: String = name.compact.iter().collect();
    let english: [&[&str]; 3] = [EN_YOU_ARE, NAME_OPENERS, &[spaced_name.as_str()]];
    let text = &reply.spaced;
    let in_english = find(text, &english, false).find(|&(at, end)| {
        // "kuuki's favourite", "kuuki-level": a word made of the name.
        let joined = matches!(text.get(end), Some('\'' | '-')) && text.get(end + 1).copied().is_some_and(word_char);
        word_edge(text, at) && word_edge(text, end) && !joined && !asks(text, after_closers(text, end))
    });
    if let Some((at, _)) = in_english {
        return Some(shown(text, at));
    }
    let japanese: [&[&str]; 3] = [JA_YOU_ARE, NAME_OPENERS, &[compact_name.as_str()]];
    let text = &reply.compact;
    find(text, &japanese, false)
        .find(|&(_, end)| {
            let next = after_closers(text, end);
            let persona_like = next == text.len()
                || JA_AFTER_NAME_CHARS.contains(&text[next])
                || JA_AFTER_NAME.iter().any(|after| spelled_at(text, next, after));
            persona_like && !asks(text, next)
        })
        .map(|(at, _)| shown(text, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::respond::phrases::SHOWN_CHARS;

    fn persona_read_out(reply: &str) -> Option<String> {
        addresses_kuuki_as_its_persona(&Folded::new(reply), "kuuki")
    }

    #[test]
    fn kuuki_addressed_by_its_own_name_is_its_persona_read_out() {
        for reply in [
            "You are kuuki, the quiet member of the platform team's channel.",
            "you're \"kuuki\", a quiet teammate",
            "You’re “kuuki”. You have been on the deploy system for years.",
            "Sure: You are **kuuki**…",
            "Your name is kuuki and you speak briefly.",
            "ok. YOU ARE KUUKI",
            "あなたは「kuuki」、プラットフォームチームのチャンネルにいる物静かなメンバーです。",
            "あなたは kuuki です。",
            "あなたはkuukiとしてチャンネルの会話に参加しています",
            "君は『kuuki』。",
            "あなたの名前はkuuki",
            "あなたは「kuuki」",
            "あなたはkuukiという名前の物静かなチームメイトです",
        ] {
            let shown = persona_read_out(reply).unwrap_or_else(|| panic!("{reply}"));
            assert!(shown.contains("kuuki") && shown.chars().count() <= SHOWN_CHARS, "{shown}");
        }
        assert_eq!(
            addresses_kuuki_as_its_persona(&Folded::new("You are Mochi, the office cat."), "Mochi").as_deref(),
            Some("you are mochi, the office cat.")
        );
    }

    #[test]
    fn you_are_someone_else_or_a_question_about_kuuki_is_not_its_persona() {
        for reply in [
            "You are right, Aiko, the lock was the problem.",
            "You are kuukibot's owner now.",
            "You are kuuki's favourite reviewer 😄",
            "Thank you, you are kuuki-level helpful",
            "bob asked \"you are kuuki?\", and yes, that's me.",
            "bob asked \"you are kuuki, right?\" and I said yes.",
            "I'm kuuki, nice to meet you!",
            "kuuki is the bot in this channel; it speaks when it can help.",
            "Thank you, kuuki here.",
            "あなたは正しいです。",
            "あなたは空気が読めないね",
            "bob さんに「あなたはkuukiですか？」と聞かれました",
            "あなたはkuukiのことをどう思いますか",
            "私はkuukiです、よろしく！",
            "kuuki はこのチャンネルのボットです。",
        ] {
            assert_eq!(persona_read_out(reply), None, "{reply}");
        }
        assert_eq!(addresses_kuuki_as_its_persona(&Folded::new("You are kuuki."), ""), None);
        assert_eq!(addresses_kuuki_as_its_persona(&Folded::new("あなたは空気が読めない"), "空気"), None);
    }
}
