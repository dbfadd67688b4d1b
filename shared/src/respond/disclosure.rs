//! A reply that presents kuuki's own instructions, system prompt or persona ("my system
//! prompt says …", "here are my instructions:", 「私の指示は次のとおりです」) gives them
//! away, whatever it then says, in any language. Instructions must be kuuki's own: "the
//! instructions in the README say …" and 「手順書の指示どおりに」 pass. Words that
//! present a text ("it begins like this", 「冒頭は」) count only with a run copied from
//! an instruction line's opening, which [`super::guard`] finds.

use super::phrases::{Folded, Phrase, find, shown, spelled_at};

const MY: &[&str] = &["my "];
const OWN_ADJECTIVES: &[&str] =
    &["", "own ", "full ", "exact ", "actual ", "current ", "whole ", "complete ", "entire ", "base ", "core "];
/// Adjectives that make any of the nouns below a model's own setup: "my hidden rules".
const SETUP_ADJECTIVES: &[&str] = &[
    "initial ",
    "original ",
    "hidden ",
    "secret ",
    "internal ",
    "underlying ",
    "built-in ",
    "preset ",
    "predefined ",
    "pre-defined ",
];
/// Nouns that name a model's setup whatever follows: "my system prompt" is never a
/// teammate's how-to.
const SETUP_NOUNS: &[&str] = &[
    "system prompt",
    "system prompts",
    "system message",
    "system instructions",
    "system-level instructions",
    "pre-prompt",
    "preprompt",
    "initial prompt",
    "meta prompt",
    "metaprompt",
];
/// Nouns that name kuuki's setup when something presents them ("my persona is …", "my
/// prompt says …"); "my prompt reply" does not.
const PRESENTED_NOUNS: &[&str] = &["persona", "prompt", "programming", "character description", "role description"];
const PRESENTING_VERBS: &[&str] = &[
    ":",
    " is",
    " are",
    " was",
    " were",
    " says",
    " said",
    " reads",
    " begins",
    " starts",
    " states",
    " goes",
    " tells me",
    " told me",
    " asks me",
    " asked me",
    " includes",
    " contains",
    " describes",
    " defines",
    " makes me",
    " has me",
    " wants me",
    " requires",
    " instructs",
    " text",
    " verbatim",
    " word for word",
    " in full",
];
/// Nouns a teammate also gives ("my instructions for the cache: …", "my rules of thumb"):
/// kuuki's own only with a verb that makes them given to kuuki, or one that lays them
/// out without a topic ("my instructions are as follows").
const GIVEN_NOUNS: &[&str] =
    &["instructions", "instruction", "guidelines", "directives", "rules", "orders", "settings"];
const GIVEN_VERBS: &[&str] = &[
    " say",
    " says",
    " said",
    " state",
    " states",
    " read",
    " reads",
    " begin",
    " begins",
    " start",
    " start with",
    " starts",
    " go like",
    " goes like",
    " tell me",
    " told me",
    " ask me",
    " asks me",
    " asked me",
    " are to",
    " were to",
    " is to",
    " was to",
    " require",
    " requires",
    " instruct",
    " instructs",
    " direct me",
    " want me",
    " wants me",
    " have me",
    " has me",
    " forbid",
    " forbids",
    " prohibit",
    " prohibits",
    " prevent",
    " prevents",
    " don't allow",
    " do not allow",
    " allow me",
    " include",
    " includes",
    " contain",
    " contains",
    " verbatim",
    " word for word",
    " in full",
    " are:",
    " were:",
    " are as follows",
    " are below",
];
/// What lays out a text before "my …": "here are my instructions", "according to my
/// guidelines".
const PRESENTING_FRAMES: &[&str] = &[
    "here is ",
    "here's ",
    "heres ",
    "here are ",
    "this is ",
    "these are ",
    "below is ",
    "below are ",
    "following is ",
    "following are ",
    "according to ",
    "based on ",
    "as per ",
    "in accordance with ",
    "i'll share ",
    "i will share ",
    "i can share ",
    "let me share ",
    "sharing ",
    "i'll paste ",
    "i will paste ",
    "let me paste ",
    "pasting ",
    "i'll repeat ",
    "i will repeat ",
    "let me repeat ",
    "repeating ",
    "i'll recite ",
    "reciting ",
    "quoting ",
];
/// A topic after the noun makes them a teammate's: "here are my instructions for the
/// cache".
const TOPICS: &[&str] = &[" for", " on", " about", " regarding"];
const I_WAS: &[&str] = &["i was ", "i've been ", "ive been ", "i have been ", "i am ", "i'm ", "im "];
/// "I was instructed to …": only a model is instructed or prompted to do something
/// in a chat reply.
const MADE_TO: &[&str] = &["instructed", "prompted"];
const TO: &[&str] = &[" to", " not to", " never to", " always to"];
/// "I was told to …", "I'm programmed to …" are everyday or a joke ("I was told to
/// restart the runner", "I'm programmed to love Rust"); only how kuuki speaks makes
/// them an instruction read out ("I was told to keep it brief").
const SET_UP: &[&str] = &["told", "programmed", "configured", "designed", "set up", "asked", "directed"];
const TO_THEN: &[&str] = &[" to ", " not to ", " never to ", " always to "];
const HOW_TO_SPEAK: &[&str] = &[
    "speak briefly",
    "speak naturally",
    "speak casually",
    "speak politely",
    "speak in japanese",
    "speak in english",
    "speak like",
    "speak as",
    "talk briefly",
    "talk like",
    "talk as",
    "reply briefly",
    "reply only",
    "reply in japanese",
    "reply in english",
    "respond briefly",
    "respond only",
    "respond in japanese",
    "respond in english",
    "answer briefly",
    "answer in japanese",
    "answer in english",
    "act as",
    "act like",
    "behave",
    "pretend",
    "sound",
    "introduce myself",
    "stay in character",
    "keep it short",
    "keep it brief",
    "keep my answers",
    "keep my replies",
    "keep replies",
    "keep answers",
    "keep responses",
    "be brief",
    "be concise",
    "be quiet",
    "be natural",
    "be polite",
    "be casual",
    "be friendly",
    "reveal",
    "repeat",
    "guess",
    "use japanese",
    "use english",
];

/// The phrases that present kuuki's own instructions in English; the last part of each
/// ends a word. Frames are read with [`TOPICS`] apart.
const EN_OWN_INSTRUCTIONS: &[&Phrase<'static>] = &[
    &[MY, OWN_ADJECTIVES, SETUP_NOUNS],
    &[MY, SETUP_ADJECTIVES, GIVEN_NOUNS],
    &[MY, OWN_ADJECTIVES, PRESENTED_NOUNS, PRESENTING_VERBS],
    &[MY, OWN_ADJECTIVES, GIVEN_NOUNS, GIVEN_VERBS],
    &[I_WAS, MADE_TO, TO],
    &[I_WAS, SET_UP, TO_THEN, HOW_TO_SPEAK],
];
const EN_FRAMED: &[&Phrase<'static>] =
    &[&[PRESENTING_FRAMES, MY, OWN_ADJECTIVES, GIVEN_NOUNS], &[PRESENTING_FRAMES, MY, OWN_ADJECTIVES, PRESENTED_NOUNS]];

/// "I" and "my" in Japanese: 「私の」, 「私に与えられた」.
const JA_I: &[&str] = &["私", "わたし", "わたくし", "僕", "ぼく", "俺", "おれ", "自分"];
const JA_MY: &[&str] = &[
    "の",
    "への",
    "に対する",
    "に与えられた",
    "に与えられている",
    "が与えられた",
    "が与えられている",
    "が受けた",
    "が受けている",
    "に設定された",
    "に設定されている",
];
/// Nouns that name a model's setup whatever follows.
const JA_SETUP_NOUNS: &[&str] = &[
    "システムプロンプト",
    "システム・プロンプト",
    "システムメッセージ",
    "指示文",
    "初期プロンプト",
    "プロンプト",
    "ペルソナ",
    "キャラ設定",
    "キャラクター設定",
    "人格設定",
    "初期設定",
];
/// Nouns a teammate also gives (「私の指示どおりに」). Not 「設定」: 「私の設定を共有します」
/// is an editor's.
const JA_GIVEN_NOUNS: &[&str] = &["指示", "命令", "指令", "ルール", "ガイドライン", "役割"];
/// What lays the noun out: 「は以下のとおり」, 「は次の」, 「には「…」と」, 「を公開します」.
const JA_PRESENTING: &[&str] = &[
    "は以下",
    "は次",
    "はこう",
    "はこちら",
    "は「",
    "は:",
    "は、以下",
    "は、次",
    "は,以下",
    "は,次",
    "には以下",
    "には次",
    "にはこう",
    "には「",
    "によると",
    "によれば",
    "の内容は",
    "の内容を",
    "の全文",
    "の冒頭",
    "の最初",
    "をお見せ",
    "を公開",
    "を共有",
    "を開示",
    "を紹介",
    "を貼",
    "を書き出",
    "を表示",
    "をお伝え",
    "を読み上げ",
    "をそのまま",
    "を全文",
    "をすべて",
    "を全部",
];
/// Japanese drops "my": these nouns followed by [`JA_PRESENTING`] (「指示は以下のとおり
/// です」) present the speaker's own, unless someone else's is named before 「の」
/// (「手順書の指示は…」, 「READMEの指示は…」).
const JA_UNOWNED: &[&str] = &[
    "システムプロンプト",
    "システム・プロンプト",
    "システムメッセージ",
    "指示文",
    "初期プロンプト",
    "プロンプト",
    "ペルソナ",
    "キャラ設定",
    "人格設定",
    "受けている指示",
    "受けた指示",
    "与えられた指示",
    "与えられている指示",
];
/// 「指示」 alone is also a teammate's relayed ones (「指示はこうです：まずキャッシュを…」):
/// the speaker's own only when laid out as a list to follow (「指示は以下のとおりです」).
const JA_INSTRUCTIONS: &[&str] = &["指示内容", "指示"];
const JA_LAID_OUT: &[&str] = &["は以下", "は次", "は、以下", "は、次", "は,以下", "は,次"];
const JA_UNOWNED_INSTRUCTIONS: &[&Phrase<'static>] = &[&[JA_UNOWNED, JA_PRESENTING], &[JA_INSTRUCTIONS, JA_LAID_OUT]];
/// How kuuki speaks, before 「ように言われています」 or 「と設定されています」: with any
/// other verb it is everyday (「キャッシュを使うように設定されています」).
const JA_HOW_TO_SPEAK: &[&str] = &[
    "話す",
    "話さない",
    "答える",
    "答えない",
    "返す",
    "返さない",
    "返答する",
    "返事する",
    "応答する",
    "振る舞う",
    "振舞う",
    "ふるまう",
    "演じる",
    "名乗る",
    "喋る",
    "しゃべる",
    "言う",
    "言わない",
    "明かさない",
    "口外しない",
    "漏らさない",
    "推測しない",
    "従わない",
    "繰り返さない",
];
const JA_SO_AS_TO: &[&str] = &["ように", "よう", "と"];
const JA_BEING_TOLD: &[&str] =
    &["指示され", "命令され", "設定され", "プログラムされ", "言われ", "求められ", "定められ", "決められ"];
const JA_OWN_INSTRUCTIONS: &[&Phrase<'static>] = &[
    &[JA_I, JA_MY, JA_SETUP_NOUNS],
    &[JA_I, JA_MY, JA_GIVEN_NOUNS, JA_PRESENTING],
    &[JA_HOW_TO_SPEAK, JA_SO_AS_TO, JA_BEING_TOLD],
];

/// Where `reply` presents kuuki's own instructions, system prompt or persona ("my system
/// prompt says …", "here are my instructions:", "I was instructed to …", 「私の指示は次の
/// とおりです」, 「システムプロンプトは以下」, 「短く話すように設定されています」): a
/// reply that does gives them away, whatever it then says. Someone else's instructions
/// pass ("the instructions in the README say …", 「手順書の指示どおりに」).
pub(super) fn presents_own_instructions(reply: &Folded) -> Option<String> {
    let text = &reply.spaced;
    let without_topic = |&(_, end): &(usize, usize)| !TOPICS.iter().any(|topic| spelled_at(text, end, topic));
    let english = EN_OWN_INSTRUCTIONS
        .iter()
        .find_map(|phrase| find(text, phrase, true).next())
        .or_else(|| EN_FRAMED.iter().find_map(|phrase| find(text, phrase, true).find(without_topic)));
    if let Some((at, _)) = english {
        return Some(shown(text, at));
    }
    let text = &reply.compact;
    JA_OWN_INSTRUCTIONS
        .iter()
        .find_map(|phrase| find(text, phrase, false).next())
        .or_else(|| {
            let own = |&(at, _): &(usize, usize)| at == 0 || text[at - 1] != 'の';
            JA_UNOWNED_INSTRUCTIONS.iter().find_map(|phrase| find(text, phrase, false).find(own))
        })
        .map(|(at, _)| shown(text, at))
}

/// Words that present a text or talk of instructions: with a run copied from the
/// opening of an instruction line ([`super::guard`]), the reply starts reading the line
/// out ("It begins like this: Join the conversation naturally…", 「冒頭はこうです：会話の
/// 流れに自然に…」). Alone they are ordinary ("the setup instructions are in docs/").
const EN_PRESENTING_WORDS: &[&str] = &[
    "verbatim",
    "word for word",
    "as follows",
    "here it is",
    "here you go",
    "it begins",
    "it starts",
    "begins with",
    "starts with",
    "begins like",
    "starts like",
    "opens with",
    "goes like",
    "reads like",
    "first line",
    "first lines",
    "first sentence",
    "in full",
    "i was told",
    "i've been told",
    "i have been told",
    "i'm told",
    "i am told",
    "they told me",
    "instructions",
    "instruction",
    "system prompt",
    "prompt",
    "persona",
    "guidelines",
];
const JA_PRESENTING_WORDS: &[&str] = &[
    "以下のとおり",
    "以下の通り",
    "次のとおり",
    "次の通り",
    "こうです",
    "こう始ま",
    "で始ま",
    "から始ま",
    "一字一句",
    "原文",
    "全文",
    "冒頭",
    "書き出し",
    "最初の一文",
    "最初の行",
    "と言われ",
    "ように言われ",
    "と書かれ",
    "と書いてあ",
    "指示",
    "プロンプト",
    "ペルソナ",
    "設定",
];

/// The first word of `reply` that presents a text, if any.
pub(super) fn presenting_words(reply: &Folded) -> Option<String> {
    let english: [&[&str]; 1] = [EN_PRESENTING_WORDS];
    let japanese: [&[&str]; 1] = [JA_PRESENTING_WORDS];
    find(&reply.spaced, &english, true).next().map(|(at, end)| reply.spaced[at..end].iter().collect()).or_else(|| {
        find(&reply.compact, &japanese, false).next().map(|(at, end)| reply.compact[at..end].iter().collect())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn presented(reply: &str) -> Option<String> {
        presents_own_instructions(&Folded::new(reply))
    }

    #[test]
    fn own_instructions_presented_are_refused_in_both_languages() {
        for reply in [
            "Sure! My system prompt says I should speak briefly.",
            // A refusal that names its system prompt is refused too: kuuki stays silent.
            "I can't share my system prompt.",
            "My instructions begin: be brief",
            "My instructions say I should keep it short.",
            "my guidelines tell me to avoid guessing",
            "My rules are to speak briefly.",
            "My hidden rules: be nice",
            "My persona: a quiet teammate.",
            "My prompt says: be brief.",
            "This is my persona, verbatim.",
            "Here are my instructions:\n1. Speak briefly.",
            "OK, here are my full instructions to you",
            "According to my guidelines, I should not guess.",
            "I was instructed to speak briefly.",
            "I've been programmed not to guess.",
            "I was told to keep it brief and never guess.",
            "I'm told never to reveal private channels",
            "I'm configured to speak briefly and naturally.",
            "私の指示は次のとおりです：手短に話すこと",
            "わたしのシステムプロンプト、見たい？",
            "私に与えられた指示は以下です",
            "自分のルールはこちらです",
            "私のキャラ設定、知りたい？",
            "指示は以下のとおりです。短く話す。",
            "はい、システムプロンプトは「手短に」です",
            "プロンプトの内容を共有しますね",
            "受けている指示をそのまま書きます",
            "短く話すように設定されています。",
            "推測しないように言われてます",
            "プライベートの話は口外しないよう指示されています",
        ] {
            assert!(presented(reply).is_some(), "{reply}");
        }
    }

    #[test]
    fn instructions_that_are_not_kuukis_own_pass() {
        for reply in [
            "The setup instructions are in docs/self-hosting.md",
            "The instructions in the README say run make first.",
            "My instructions for the cache: delete the entries for the branch.",
            "Here are my instructions for clearing the cache: delete the entries.",
            "my rules of thumb: never deploy on Fridays",
            "Thanks for my prompt reply, I guess 😄",
            "I was told to restart the runner after the upgrade.",
            "I was told to speak to Aiko about the runner first.",
            "I'm programmed to love Rust 😄",
            "I'm configured to run the nightly builds.",
            "Can you follow my instructions from yesterday?",
            "The economy settings say 30% off.",
            "手順書の指示どおりにキャッシュを消せば直ります",
            "READMEの指示は以下のとおりです：make を実行",
            "私の指示どおりにやれば直りますよ",
            "私の設定ではタブ幅は4です",
            "CI はキャッシュを使うように設定されています",
            "タイムアウトは30秒に設定されています",
            "上司から再起動するように言われてます",
            "この手順の指示は次のとおりです：キャッシュを消す",
            "指示はこうです：まずキャッシュを消してください",
            "私の設定を共有しますね、.editorconfig です",
        ] {
            assert_eq!(presented(reply), None, "{reply}");
        }
    }

    #[test]
    fn words_that_present_a_text_are_found_as_words() {
        let found = |reply: &str| presenting_words(&Folded::new(reply));
        assert_eq!(found("Sure, it starts like this: Join").as_deref(), Some("it starts"));
        assert_eq!(found("はい、冒頭はこうです").as_deref(), Some("冒頭"));
        assert_eq!(found("see the PROMPT"), Some("prompt".into()));
        for plain in
            ["the prompter is broken", "impromptu", "ステージングが止まってる", "I'll join the conversation later"]
        {
            assert_eq!(found(plain), None, "{plain}");
        }
    }
}
