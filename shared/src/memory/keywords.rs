//! Keywords of a text, for fact search. Japanese has no spaces, so a sentence is cut
//! where the kind of script changes: kanji runs (今日), katakana runs (デプロイ) and
//! latin words (deploy) are kept; hiragana runs (の, は, どうなった) are the grammar
//! between them and are left out. 「今日のデプロイはどうなった」 → 今日, デプロイ.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Script {
    Kanji,
    Katakana,
    Hiragana,
    Latin,
    Other,
}

fn script(c: char) -> Script {
    match c {
        '\u{3041}'..='\u{309F}' => Script::Hiragana,
        '\u{30A0}'..='\u{30FF}' | '\u{31F0}'..='\u{31FF}' | '\u{FF66}'..='\u{FF9F}' => Script::Katakana,
        '\u{4E00}'..='\u{9FFF}' | '\u{3400}'..='\u{4DBF}' | '々' => Script::Kanji,
        c if c.is_alphanumeric() => Script::Latin,
        _ => Script::Other,
    }
}

/// English words too common to say what a text is about.
const STOPWORDS: &[&str] = &[
    "the", "a", "an", "is", "are", "was", "were", "be", "been", "to", "of", "and", "or", "in", "on", "at", "for", "it",
    "this", "that", "i", "you", "we", "they", "he", "she", "my", "your", "our", "with", "as", "by", "do", "does",
    "did", "not", "no", "yes", "so", "but", "if", "then", "what", "how", "who", "can", "will", "just", "about", "have",
    "has", "had", "me", "us", "them", "its", "there", "here", "from", "up", "out", "any", "all",
];

/// The distinct keywords of `text`, lowercased, in order of appearance.
pub fn keywords(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut kind = Script::Other;
    let flush = |word: &mut String, kind: Script, out: &mut Vec<String>| {
        let w = word.to_lowercase();
        let keep = match kind {
            Script::Kanji => !w.is_empty(),
            Script::Katakana => w.chars().count() >= 2 && w != "ー",
            Script::Latin => {
                w.chars().count() >= 2 && !STOPWORDS.contains(&w.as_str()) && !w.chars().all(|c| c.is_ascii_digit())
            }
            Script::Hiragana | Script::Other => false,
        };
        if keep && !out.contains(&w) {
            out.push(w);
        }
        word.clear();
    };
    for c in text.chars() {
        // The long vowel mark belongs to the katakana word it follows.
        let k = if c == 'ー' && kind == Script::Katakana { Script::Katakana } else { script(c) };
        if k != kind {
            flush(&mut current, kind, &mut out);
            kind = k;
        }
        current.push(c);
    }
    flush(&mut current, kind, &mut out);
    out
}

/// |a ∩ b| / |a ∪ b| of two keyword sets; 0 when both are empty.
pub fn jaccard(a: &[String], b: &[String]) -> f64 {
    let common = a.iter().filter(|k| b.contains(k)).count();
    let union = a.len() + b.len() - common;
    if union == 0 { 0.0 } else { common as f64 / union as f64 }
}

/// Whether `phrase` occurs in `text` as whole words ("stop", not "stopped"; "Sam", not
/// "Samsung"); Japanese has no spaces, so a phrase in it counts anywhere.
pub fn contains_phrase(text: &str, phrase: &str) -> bool {
    if phrase.is_empty() {
        return false;
    }
    if !phrase.is_ascii() {
        return text.contains(phrase);
    }
    let is_word = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
    text.match_indices(phrase)
        .any(|(i, _)| !is_word(text[..i].chars().next_back()) && !is_word(text[i + phrase.len()..].chars().next()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phrases_match_whole_words() {
        assert!(contains_phrase("ask sam about it", "sam"));
        assert!(contains_phrase("Sam's notes", "Sam"));
        assert!(!contains_phrase("the samsung phone", "sam"));
        assert!(!contains_phrase("anything", ""));
        assert!(contains_phrase("田中さんの猫", "田中"));
    }

    #[test]
    fn japanese_without_spaces_yields_its_content_words() {
        assert_eq!(keywords("今日のデプロイはどうなった"), vec!["今日", "デプロイ"]);
        assert_eq!(keywords("CI のキャッシュってどこで消せる？"), vec!["ci", "キャッシュ", "消"]);
        assert_eq!(keywords("サーバーのログ"), vec!["サーバー", "ログ"]);
    }

    #[test]
    fn english_is_lowercased_without_stopwords_and_deduplicated() {
        assert_eq!(
            keywords("The Deploy of the deploy failed on Staging, 2 times"),
            vec!["deploy", "failed", "staging", "times"]
        );
        assert!(keywords("!!! ... ").is_empty());
    }

    #[test]
    fn jaccard_of_keyword_sets() {
        let a = vec!["deploy".to_string(), "ci".to_string()];
        let b = vec!["deploy".to_string(), "lunch".to_string()];
        assert!((jaccard(&a, &b) - 1.0 / 3.0).abs() < 1e-9);
        assert_eq!(jaccard(&a, &a), 1.0);
        assert_eq!(jaccard(&[], &[]), 0.0);
    }
}
