//! Message text inside a prompt's fences: normalised (NFKC, invisible and reordering
//! characters stripped) and with anything that reads as a fence tag defused, so no
//! message can close its fence. Every prompt that quotes chat uses it (generation and
//! judgment, summaries, reflection); the reply check in `respond::guard` reads tags
//! the same way.

use unicode_normalization::UnicodeNormalization;

use super::FENCE_NAME;

/// How `<` and `>` may be spelled so that a model reads a tag: the characters, and the
/// HTML entities Slack sends them as.
const TAG_OPENERS: &[&str] = &["<", "&lt;", "&#60;", "&#x3c;"];
const TAG_CLOSERS: &[&str] = &[">", "&gt;", "&#62;", "&#x3e;"];
/// Look-alikes that take their place in a defused tag: no model reads them as a tag.
pub(crate) const DEFUSED_OPENER: char = '‹';
pub(crate) const DEFUSED_CLOSER: char = '›';
/// How far past the fence name a defused tag's `>` is looked for (a guessed suffix,
/// attributes).
const TAG_TAIL_CHARS: usize = 64;
/// A message's text as it may stand inside a fence: normalised, fence tags defused.
pub fn fence_safe(text: &str) -> String {
    defuse_fence_tags(&normalize(text))
}

/// Characters that show as nothing or reorder the text around them: stripped, so they
/// can neither hide a tag from [`defuse_fence_tags`] nor disguise a copied line.
fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{200B}'..='\u{200D}'
            | '\u{2060}'
            | '\u{FEFF}'
            | '\u{00AD}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2066}'..='\u{2069}'
            | '\u{200E}'
            | '\u{200F}'
            | '\u{061C}'
    )
}

/// NFKC (fullwidth and other compatibility forms become the plain ones: `＜` is `<`)
/// without invisible characters.
pub(crate) fn normalize(text: &str) -> String {
    text.chars().filter(|c| !is_invisible(*c)).nfkc().collect()
}

/// How many characters of `chars` from `at` spell one of `spellings`, ignoring ASCII case.
fn spelled_at(chars: &[char], at: usize, spellings: &[&str]) -> Option<usize> {
    spellings.iter().find_map(|spelling| {
        let len = spelling.chars().count();
        let candidate = chars.get(at..at + len)?;
        candidate.iter().zip(spelling.chars()).all(|(c, s)| c.to_ascii_lowercase() == s).then_some(len)
    })
}

/// Where the fence name ends if the tag opened just before `at` is a fence tag: slashes
/// (also `\/`) and whitespace anywhere, then [`FENCE_NAME`] in any case, whitespace
/// allowed between its letters.
fn fence_name_end(chars: &[char], at: usize) -> Option<usize> {
    let mut i = at;
    while chars.get(i).is_some_and(|c| c.is_whitespace() || *c == '/' || *c == '\\') {
        i += 1;
    }
    for expected in FENCE_NAME.chars() {
        while chars.get(i).is_some_and(|c| c.is_whitespace()) {
            i += 1;
        }
        if chars.get(i)?.to_ascii_lowercase() != expected {
            return None;
        }
        i += 1;
    }
    Some(i)
}

/// `text` with the brackets of every tag that starts with [`FENCE_NAME`] (`<conversation>`,
/// `</ conversation >`, `</conversation-guess>`, `&lt;/conversation&gt;`…) replaced by
/// look-alikes; `text` is expected normalised, so fullwidth brackets are plain already.
pub(crate) fn defuse_fence_tags(text: &str) -> String {
    if !text.contains(['<', '&']) {
        return text.to_owned();
    }
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let tag =
            spelled_at(&chars, i, TAG_OPENERS).and_then(|opener| Some((opener, fence_name_end(&chars, i + opener)?)));
        let Some((opener, name_end)) = tag else {
            out.push(chars[i]);
            i += 1;
            continue;
        };
        let inner_start = i + opener;
        let mut j = name_end;
        let closer = loop {
            if j >= chars.len() || j > name_end + TAG_TAIL_CHARS || spelled_at(&chars, j, TAG_OPENERS).is_some() {
                break None;
            }
            if let Some(closer) = spelled_at(&chars, j, TAG_CLOSERS) {
                break Some(closer);
            }
            j += 1;
        };
        out.push(DEFUSED_OPENER);
        match closer {
            Some(closer) => {
                out.extend(&chars[inner_start..j]);
                out.push(DEFUSED_CLOSER);
                i = j + closer;
            }
            None => i = inner_start,
        }
    }
    out
}

/// Whether `text` holds anything that reads as a fence tag, once normalised.
pub(crate) fn has_fence_tag(text: &str) -> bool {
    let normalized = normalize(text);
    defuse_fence_tags(&normalized) != normalized
}
