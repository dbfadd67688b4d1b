//! The talkativeness settings (docs/design.md §7.6): parsed by their own function from
//! the same variables as the rest, held as one field of `Settings`.

use std::collections::HashMap;
use std::time::Duration;

use super::ConfigError;
use super::reader::Reader;
use crate::domain::talkativeness::TalkativenessLimits;

/// How kuuki learns from the way a channel takes what it says unasked.
#[derive(Debug, Clone, PartialEq)]
pub struct TalkativenessSettings {
    /// Signals move each channel's offset and the offset is added to unasked scores.
    pub enabled: bool,
    pub limits: TalkativenessLimits,
    /// Reactions on kuuki's posts that welcome it: Slack's names (`+1`) or the emoji
    /// itself (Discord, transcripts), colons left out.
    pub positive_reactions: Vec<String>,
    /// Reactions on kuuki's posts that turn it away.
    pub negative_reactions: Vec<String>,
}

impl Default for TalkativenessSettings {
    fn default() -> Self {
        parse(&HashMap::new()).expect("the defaults are valid")
    }
}

const DEFAULT_POSITIVE: &str =
    "+1,thumbsup,heart,pray,tada,smile,smiley,grinning,white_check_mark,raised_hands,clap,👍,❤️,🙏,🎉,😄,😃,✅,🙌,👏";
const DEFAULT_NEGATIVE: &str =
    "-1,thumbsdown,face_with_rolling_eyes,unamused,shushing_face,no_good,zipper_mouth_face,👎,🙄,😒,🤫,🙅,🙅‍♂️,🙅‍♀️,🤐";

/// Reads the `TALKATIVENESS_*` and `FEEDBACK_*` settings from `vars`, through the
/// [`Reader`] every group parses with.
pub fn parse(vars: &HashMap<String, String>) -> Result<TalkativenessSettings, ConfigError> {
    let r = Reader { vars };
    let enabled = r.bool("TALKATIVENESS_ENABLED", true)?;
    let min = r.float("TALKATIVENESS_MIN", -40.0, -100.0, 0.0)?;
    let max = r.float("TALKATIVENESS_MAX", 20.0, 0.0, 100.0)?;
    let half_life_days = r.float("TALKATIVENESS_HALF_LIFE_DAYS", 7.0, 0.01, 365.0)?;
    // Emoji names with or without their colons; an empty value keeps the defaults.
    let list = |name: &'static str, default: &str| -> Vec<String> {
        r.raw(name)
            .unwrap_or(default)
            .split(',')
            .map(|e| e.trim().trim_matches(':').to_owned())
            .filter(|e| !e.is_empty())
            .collect()
    };
    Ok(TalkativenessSettings {
        enabled,
        limits: TalkativenessLimits { min, max, half_life: Duration::from_secs_f64(half_life_days * 86_400.0) },
        positive_reactions: list("FEEDBACK_POSITIVE_REACTIONS", DEFAULT_POSITIVE),
        negative_reactions: list("FEEDBACK_NEGATIVE_REACTIONS", DEFAULT_NEGATIVE),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn the_defaults_are_those_the_issue_gives() {
        let s = TalkativenessSettings::default();
        assert!(s.enabled);
        assert_eq!((s.limits.min, s.limits.max), (-40.0, 20.0));
        assert_eq!(s.limits.half_life, Duration::from_secs(7 * 86_400));
        for e in ["+1", "👍", "❤️", "🙏", "🎉", "😄", "✅"] {
            assert!(s.positive_reactions.iter().any(|p| p == e), "{e}");
        }
        for e in ["-1", "👎", "🙄", "😒", "🤫", "🙅"] {
            assert!(s.negative_reactions.iter().any(|p| p == e), "{e}");
        }
        // The settings page shows the same defaults.
        let doc = |name| super::super::SETTINGS.iter().find(|s| s.name == name).unwrap().default;
        assert_eq!(doc("FEEDBACK_POSITIVE_REACTIONS"), DEFAULT_POSITIVE);
        assert_eq!(doc("FEEDBACK_NEGATIVE_REACTIONS"), DEFAULT_NEGATIVE);
    }

    #[test]
    fn a_bad_value_is_refused_with_its_name() {
        for (name, value) in [
            ("TALKATIVENESS_MIN", "5"),
            ("TALKATIVENESS_MAX", "-1"),
            ("TALKATIVENESS_HALF_LIFE_DAYS", "0"),
            ("TALKATIVENESS_ENABLED", "maybe"),
        ] {
            let error = parse(&vars(&[(name, value)])).unwrap_err();
            assert!(error.to_string().contains(name), "{error}");
        }
        let s = parse(&vars(&[("FEEDBACK_NEGATIVE_REACTIONS", ":-1:, 💩"), ("TALKATIVENESS_MIN", "-20")])).unwrap();
        assert_eq!(s.negative_reactions, vec!["-1", "💩"]);
        assert_eq!(s.limits.min, -20.0);
    }
}
