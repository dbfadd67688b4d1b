//! Helpers for the end-to-end tests: replay a transcript in-process exactly as
//! `kuuki replay` does and hand back the decision log.

use std::collections::HashMap;
use std::sync::Arc;

use kuuki::adapters::llm::ScriptedLlm;
use kuuki::config::Settings;
use kuuki::ports::Llm;
use kuuki::replay::{self, LogWriter, ReplayOptions};
use serde_json::Value;

pub struct Run<'a> {
    pub transcript: &'a str,
    pub settings: &'a [(&'a str, &'a str)],
    /// An LLM script (JSON lines), or `None` for rules only.
    pub script: Option<&'a str>,
    pub seed: u64,
    /// A persona file's TOML text.
    pub persona: Option<&'a str>,
}

impl<'a> Run<'a> {
    pub fn new(transcript: &'a str) -> Self {
        Run {
            transcript,
            settings: &[],
            script: None,
            seed: 1,
            persona: None,
        }
    }

    pub fn persona(mut self, toml: &'a str) -> Self {
        self.persona = Some(toml);
        self
    }

    pub fn settings(mut self, settings: &'a [(&'a str, &'a str)]) -> Self {
        self.settings = settings;
        self
    }

    pub fn script(mut self, script: &'a str) -> Self {
        self.script = Some(script);
        self
    }

    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The decision log as text, exactly as `kuuki replay` prints it.
    pub fn text(&self) -> String {
        let mut vars: HashMap<String, String> =
            self.settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let llm: Option<Arc<dyn Llm>> = self.script.map(|s| {
            vars.insert("LLM_PROVIDER".into(), "script".into());
            Arc::new(ScriptedLlm::parse(s).expect("a valid script")) as Arc<dyn Llm>
        });
        let settings = Settings::from_vars(&vars).expect("valid settings");
        let transcript = replay::parse_transcript(self.transcript).expect("a valid transcript");
        let persona_file = self
            .persona
            .map(|t| kuuki::config::PersonaFile::parse(t).expect("a valid persona"));
        let persona = settings.persona(persona_file.as_ref());
        let mut out = Vec::new();
        let mut writer = LogWriter::new(&mut out, false);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime
            .block_on(replay::replay(
                &transcript,
                ReplayOptions {
                    settings,
                    persona,
                    llm,
                    seed: self.seed,
                },
                &mut writer,
            ))
            .expect("the replay runs");
        drop(writer);
        String::from_utf8(out).expect("utf-8")
    }

    /// The decision log, one JSON value a line.
    pub fn log(&self) -> Log {
        Log(self
            .text()
            .lines()
            .map(|l| serde_json::from_str(l).expect("each line is JSON"))
            .collect())
    }
}

/// A decision log with a few ways to look into it.
pub struct Log(pub Vec<Value>);

impl Log {
    pub fn kind(&self, kind: &str) -> Vec<&Value> {
        self.0.iter().filter(|v| v["kind"] == kind).collect()
    }

    /// Lines of `kind` about the message written at `msg_t`.
    pub fn about(&self, kind: &str, msg_t: f64) -> Vec<&Value> {
        self.kind(kind).into_iter().filter(|v| v["msg_t"] == msg_t).collect()
    }

    pub fn stats(&self) -> &Value {
        self.0.last().filter(|v| v["kind"] == "stats").expect("a stats line ends the log")
    }
}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for line in &self.0 {
            writeln!(f, "{line}")?;
        }
        Ok(())
    }
}

/// The pipeline on in-process adapters, driven step by step (for what a transcript
/// cannot express: redeliveries, platform retries, edits, deletes).
pub mod harness {
    use std::collections::HashMap;
    use std::sync::Arc;
    use std::time::Duration;

    use kuuki::adapters::memory::{MemoryLog, MemoryQueue, MemoryStore, RecordingChat, TsMint, VirtualClock};
    use kuuki::config::Settings;
    use kuuki::deps::{Adapters, Deps};
    use kuuki::domain::{Author, ChannelId, Event, Message, Timestamp, Ts, UserId};
    use kuuki::ingest::{Incoming, IngestOutcome, ingest};
    use kuuki::ports::{Clock, MessageStore};
    use kuuki::replay::REPLAY_EPOCH;
    use kuuki::worker::run_due;

    pub struct Harness {
        pub clock: Arc<VirtualClock>,
        pub mint: Arc<TsMint>,
        pub store: Arc<MemoryStore>,
        pub queue: Arc<MemoryQueue>,
        pub chat: Arc<RecordingChat>,
        pub log: Arc<MemoryLog>,
        pub deps: Deps,
    }

    impl Harness {
        pub fn new(settings: &[(&str, &str)]) -> Self {
            let vars: HashMap<String, String> = settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            let settings = Settings::from_vars(&vars).unwrap();
            let clock = Arc::new(VirtualClock::new(REPLAY_EPOCH));
            let mint = Arc::new(TsMint::default());
            let store = Arc::new(MemoryStore::new());
            let queue = Arc::new(MemoryQueue::new(clock.clone()));
            let chat = Arc::new(RecordingChat::new(clock.clone(), mint.clone()));
            let log = Arc::new(MemoryLog::default());
let persona = settings.persona(None);
            let deps = Deps::new(
                settings,
                persona,
                UserId("UBOT".into()),
                Adapters {
                    messages: store.clone(),
                    channels: store.clone(),
                    ledger: store.clone(),
                    queue: queue.clone(),
                    scheduler: queue.clone(),
                    llm: None,
                    chat: chat.clone(),
                    clock: clock.clone(),
                    log: log.clone(),
                },
                1,
            );
            Harness {
                clock,
                mint,
                store,
                queue,
                chat,
                log,
                deps,
            }
        }

        pub fn at(&self, secs: f64) -> Timestamp {
            REPLAY_EPOCH + Duration::from_secs_f64(secs)
        }

        /// A message written at `secs` (the clock moves there first).
        pub fn message(&self, secs: f64, user: &str, text: &str, thread_root: Option<&Ts>) -> Message {
            let at = self.at(secs);
            self.clock.advance_to(at);
            Message {
                channel: ChannelId("general".into()),
                ts: self.mint.mint(at),
                thread_root: thread_root.cloned(),
                user: UserId(user.into()),
                user_name: user.into(),
                text: text.into(),
                author: Author::Human,
                replies_to_bot: false,
                in_dm: false,
                at,
            }
        }

        pub async fn ingest(&self, incoming: Incoming) -> IngestOutcome {
            ingest(&self.deps, incoming).await.unwrap()
        }

        /// Runs the queue up to `secs`.
        pub async fn run_until(&self, secs: f64) -> u32 {
            let clock = self.clock.clone();
            let failures = run_due(&self.deps, &self.queue, self.at(secs), move |t| clock.advance_to(t)).await;
            self.clock.advance_to(self.at(secs));
            failures
        }

        pub fn events(&self) -> Vec<Event> {
            self.log.take()
        }

        pub async fn stored(&self, ts: &Ts) -> Option<Message> {
            self.store.get_message(&ChannelId("general".into()), ts).await.unwrap()
        }

        pub fn now(&self) -> Timestamp {
            self.clock.now()
        }
    }
}
