//! The `bot` group: kuuki's name, aliases, topics and language, and the persona file
//! (`PERSONA_FILE`/`PERSONA_TOML`) that may replace them.

use std::collections::HashMap;

use super::ConfigError;
#[cfg(test)]
use super::Settings;
use super::reader::Reader;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptLanguage {
    Ja,
    En,
}

#[derive(Debug, Clone)]
pub struct BotSettings {
    /// `BOT_NAME`.
    pub name: String,
    /// `BOT_ALIASES`.
    pub aliases: Vec<String>,
    /// `BOT_TOPICS`.
    pub topics: Vec<String>,
    pub persona_file: Option<String>,
    pub prompt_language: PromptLanguage,
}

impl BotSettings {
    pub(super) fn parse(r: &Reader) -> Result<BotSettings, ConfigError> {
        let prompt_language = match r.raw("PROMPT_LANGUAGE").unwrap_or("ja") {
            "ja" => PromptLanguage::Ja,
            "en" => PromptLanguage::En,
            other => return Err(Reader::invalid("PROMPT_LANGUAGE", other, "expected ja or en")),
        };
        Ok(BotSettings {
            name: r.string("BOT_NAME", "kuuki"),
            aliases: r.list("BOT_ALIASES", "くうき"),
            topics: r.list("BOT_TOPICS", ""),
            persona_file: r.raw("PERSONA_FILE").map(str::to_owned),
            prompt_language,
        })
    }

    /// The persona: the file's fields where given, the settings otherwise.
    pub fn persona(&self, file: Option<&PersonaFile>) -> crate::domain::Persona {
        let file = file.cloned().unwrap_or_default();
        let default_prompt = match self.prompt_language {
            PromptLanguage::Ja => format!(
                "あなたは「{}」。チームのチャンネルにいる、空気を読める気さくな同僚です。短く自然な日本語で話します。",
                file.name.as_deref().unwrap_or(&self.name)
            ),
            PromptLanguage::En => format!(
                "You are {}, a friendly colleague in the team's channel who reads the room. You speak briefly and naturally.",
                file.name.as_deref().unwrap_or(&self.name)
            ),
        };
        crate::domain::Persona {
            name: file.name.unwrap_or_else(|| self.name.clone()),
            system_prompt: file.system_prompt.unwrap_or(default_prompt),
            aliases: file.aliases.unwrap_or_else(|| self.aliases.clone()),
            topics: file.topics.unwrap_or_else(|| self.topics.clone()),
        }
    }
}

/// The persona file (`PERSONA_FILE`, `--persona`): TOML with `name`, `system_prompt`,
/// and optionally `aliases` and `topics`, which replace BOT_NAME, BOT_ALIASES and
/// BOT_TOPICS.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PersonaFile {
    pub name: Option<String>,
    pub system_prompt: Option<String>,
    pub aliases: Option<Vec<String>>,
    pub topics: Option<Vec<String>>,
}

impl PersonaFile {
    pub fn parse(text: &str) -> Result<Self, toml::de::Error> {
        toml::from_str(text)
    }
}

/// The persona a Lambda is given: `PERSONA_TOML` (the TOML itself, from the template's
/// `PersonaToml` parameter, since a Lambda has no file of its own to point at), else the
/// file `PERSONA_FILE` names, else none (the built-in persona). An error names the
/// variable.
pub fn persona_from_vars(vars: &HashMap<String, String>) -> Result<Option<PersonaFile>, PersonaError> {
    let set = |name: &str| vars.get(name).filter(|v| !v.trim().is_empty());
    if let Some(text) = set("PERSONA_TOML") {
        return PersonaFile::parse(text).map(Some).map_err(PersonaError::Toml);
    }
    if let Some(path) = set("PERSONA_FILE") {
        let unreadable = |e: std::io::Error| PersonaError::File { path: path.clone(), reason: e.to_string() };
        let text = std::fs::read_to_string(path).map_err(unreadable)?;
        return PersonaFile::parse(&text)
            .map(Some)
            .map_err(|e| PersonaError::File { path: path.clone(), reason: e.to_string() });
    }
    Ok(None)
}

/// A persona that could not be read; the text names the variable.
#[derive(Debug, thiserror::Error)]
pub enum PersonaError {
    #[error("PERSONA_TOML: {0}")]
    Toml(toml::de::Error),
    #[error("PERSONA_FILE {path}: {reason}")]
    File { path: String, reason: String },
}

#[cfg(test)]
mod persona_from_vars_tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn persona_toml_text_becomes_the_persona() {
        let text = include_str!("../../../examples/persona.toml");
        let file = persona_from_vars(&vars(&[("PERSONA_TOML", text), ("PERSONA_FILE", "/nowhere/persona.toml")]))
            .unwrap()
            .expect("PERSONA_TOML is set");
        let persona = Settings::from_vars(&HashMap::new()).unwrap().persona(Some(&file));
        assert_eq!(persona.name, "kuuki");
        assert!(persona.system_prompt.contains("開発チーム"), "{}", persona.system_prompt);
        assert_eq!(persona.aliases, vec!["くうき"]);
        assert!(persona.topics.contains(&"staging".to_owned()), "{:?}", persona.topics);
    }

    #[test]
    fn bad_persona_toml_names_the_variable() {
        let error = persona_from_vars(&vars(&[("PERSONA_TOML", "name = \"unterminated")])).unwrap_err().to_string();
        assert!(error.starts_with("PERSONA_TOML"), "{error}");
        let error = persona_from_vars(&vars(&[("PERSONA_TOML", "nickname = \"kuu\"")])).unwrap_err().to_string();
        assert!(error.starts_with("PERSONA_TOML"), "an unknown field is an error too: {error}");
    }

    #[test]
    fn persona_file_is_read_when_there_is_no_persona_toml() {
        let dir = std::env::temp_dir().join(format!("kuuki-persona-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("persona.toml");
        std::fs::write(&path, "name = \"sora\"").unwrap();
        let path = path.to_str().unwrap();
        let file = persona_from_vars(&vars(&[("PERSONA_TOML", " "), ("PERSONA_FILE", path)])).unwrap();
        assert_eq!(file.and_then(|f| f.name).as_deref(), Some("sora"));
        std::fs::remove_dir_all(&dir).unwrap();
        let error = persona_from_vars(&vars(&[("PERSONA_FILE", path)])).unwrap_err().to_string();
        assert!(error.starts_with("PERSONA_FILE"), "{error}");
    }

    #[test]
    fn neither_variable_means_the_built_in_persona() {
        assert!(persona_from_vars(&vars(&[("PERSONA_TOML", "")])).unwrap().is_none());
    }
}
