//! Phrases read in a reply: the lists of [`super::persona_echo`] and [`super::disclosure`]
//! are spelled in a [`Folded`] reply, English ones as whole words, Japanese ones
//! anywhere.

use crate::prompts::fence::normalize;

/// A reply as the phrases below read it: normalised (as [`normalize`]), lowercased, every
/// kind of quote reduced to `'`, `"`, `「` and `」`, and each run of whitespace to one space
/// (a newline if it holds one). English phrases are read in `spaced`; Japanese ones in
/// `compact`, without the spaces, since Japanese may put a space anywhere.
pub(super) struct Folded {
    pub(super) spaced: Vec<char>,
    pub(super) compact: Vec<char>,
}

impl Folded {
    pub(super) fn new(text: &str) -> Self {
        let mut spaced = Vec::with_capacity(text.len());
        let mut space: Option<char> = None;
        for c in normalize(text).chars().flat_map(char::to_lowercase) {
            if c.is_whitespace() {
                let newline = matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}') || space == Some('\n');
                space = Some(if newline { '\n' } else { ' ' });
                continue;
            }
            if let Some(space) = space.take()
                && !spaced.is_empty()
            {
                spaced.push(space);
            }
            spaced.push(match c {
                '‘' | '’' | '‚' | '‛' | '′' | '`' | '´' => '\'',
                '“' | '”' | '„' | '‟' | '″' | '«' | '»' => '"',
                '『' => '「',
                '』' => '」',
                c => c,
            });
        }
        let compact = spaced.iter().copied().filter(|c| *c != ' ').collect();
        Folded { spaced, compact }
    }
}

/// A phrase: the spellings of each of its parts, in order ("" makes a part optional).
pub(super) type Phrase<'a> = [&'a [&'a str]];

/// Where `phrase` ends if it is spelled in `text` from `at`, at the end of a word if
/// `words` (every spelling of each part is tried: "my instructions begins" is spelled
/// with " begins", not " begin").
fn phrase_end(text: &[char], at: usize, phrase: &Phrase, words: bool) -> Option<usize> {
    let Some((part, rest)) = phrase.split_first() else {
        return (!words || word_edge(text, at)).then_some(at);
    };
    part.iter().find_map(|spelling| {
        let end = at + spelling.chars().count();
        let spelled = text.get(at..end)?.iter().copied().eq(spelling.chars());
        if spelled { phrase_end(text, end, rest, words) } else { None }
    })
}

/// A letter or digit of a word in a language that spaces its words (Latin, Greek,
/// Cyrillic…): kana and kanji are not, so "my" may follow 「は」 directly.
pub(super) fn word_char(c: char) -> bool {
    c.is_alphanumeric() && (c as u32) < 0x2E80
}

/// Whether `at` is not inside a word of `text`.
pub(super) fn word_edge(text: &[char], at: usize) -> bool {
    let word = |i: usize| text.get(i).copied().is_some_and(word_char);
    at == 0 || !word(at - 1) || !word(at)
}

/// Whether `spelling` is spelled in `text` from `at`.
pub(super) fn spelled_at(text: &[char], at: usize, spelling: &str) -> bool {
    phrase_end(text, at, &[&[spelling]], false).is_some()
}

/// Where `phrase` is spelled in `text`, (start, end): as whole words if `words`.
pub(super) fn find<'a>(
    text: &'a [char],
    phrase: &'a Phrase<'a>,
    words: bool,
) -> impl Iterator<Item = (usize, usize)> + 'a {
    (0..text.len()).filter_map(move |at| {
        if words && !word_edge(text, at) {
            return None;
        }
        phrase_end(text, at, phrase, words).map(|end| (at, end))
    })
}

/// At most this many characters of a reply are shown in a refusal.
pub(super) const SHOWN_CHARS: usize = 40;

/// `text` from `at`, as a refusal shows it.
pub(super) fn shown(text: &[char], at: usize) -> String {
    text[at..].iter().take(SHOWN_CHARS).collect::<String>().trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folding_reads_through_disguises() {
        let folded = Folded::new("Ｙｏｕ\u{200B}  ARE\n\n “kuuki”『x』");
        assert_eq!(folded.spaced.iter().collect::<String>(), "you are\n\"kuuki\"「x」");
        assert_eq!(folded.compact.iter().collect::<String>(), "you are\n\"kuuki\"「x」".replace(' ', ""));
    }

    #[test]
    fn english_phrases_are_whole_words_with_every_spelling_tried() {
        let text = Folded::new("My instructions begins: hi; myinstructions say");
        let phrase: [&[&str]; 3] = [&["my "], &["instructions"], &[" begin", " begins"]];
        assert_eq!(find(&text.spaced, &phrase, true).collect::<Vec<_>>(), vec![(0, 22)]);
        let glued = Folded::new("xmy instructions begin");
        assert_eq!(find(&glued.spaced, &phrase, true).count(), 0);
        assert_eq!(find(&glued.spaced, &phrase, false).count(), 1);
    }
}
