//! Prompt templates (minijinja), embedded in the binary. Japanese by default, English
//! with `PROMPT_LANGUAGE=en`.

use minijinja::Environment;
use serde::Serialize;

use crate::config::PromptLanguage;

const TEMPLATES: &[(&str, &str)] = &[
    ("judge.ja", include_str!("judge.ja.md.j2")),
    ("judge.en", include_str!("judge.en.md.j2")),
    ("generate.ja", include_str!("generate.ja.md.j2")),
    ("generate.en", include_str!("generate.en.md.j2")),
];

/// The compiled templates for one language; built once at start-up.
pub struct Prompts {
    env: Environment<'static>,
    suffix: &'static str,
}

impl Prompts {
    pub fn new(language: PromptLanguage) -> Self {
        let mut env = Environment::new();
        // Messages are data: no HTML escaping, and keep the text exactly as written.
        env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
        env.set_keep_trailing_newline(true);
        for (name, source) in TEMPLATES {
            env.add_template(name, source).expect("embedded templates parse");
        }
        let suffix = match language {
            PromptLanguage::Ja => "ja",
            PromptLanguage::En => "en",
        };
        Self { env, suffix }
    }

    fn render(&self, template: &str, context: impl Serialize) -> String {
        let name = format!("{template}.{}", self.suffix);
        self.env
            .get_template(&name)
            .and_then(|t| t.render(context))
            .expect("embedded templates render with their context")
    }

    pub fn judge(&self, context: impl Serialize) -> String {
        self.render("judge", context)
    }

    pub fn generate(&self, context: impl Serialize) -> String {
        self.render("generate", context)
    }
}
