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
    /// Any LLM (an HTTP provider against a fake server); wins over `script`.
    pub llm: Option<Arc<dyn Llm>>,
}

impl<'a> Run<'a> {
    pub fn new(transcript: &'a str) -> Self {
        Run { transcript, settings: &[], script: None, seed: 1, persona: None, llm: None }
    }

    pub fn llm(mut self, llm: Arc<dyn Llm>) -> Self {
        self.llm = Some(llm);
        self
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

    /// The decision log as text, exactly as `kuuki replay` prints it. A replay's jobs
    /// never fail (nothing injects faults), so a failed delivery is a bug: it panics.
    pub fn text(&self) -> String {
        let vars: HashMap<String, String> = self.settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let llm: Option<Arc<dyn Llm>> = match (&self.llm, self.script) {
            (Some(llm), _) => Some(llm.clone()),
            (None, Some(s)) => Some(Arc::new(ScriptedLlm::parse(s).expect("a valid script")) as Arc<dyn Llm>),
            (None, None) => None,
        };
        let settings = Settings::from_vars(&vars).expect("valid settings");
        // As `kuuki replay` does: with VECTOR_SEARCH_ENABLED and no provider, the local
        // hashing embedder.
        let embedder = kuuki::adapters::llm::embedder_from_settings(&settings).expect("a valid embedder setting");
        let transcript = replay::parse_transcript(self.transcript).expect("a valid transcript");
        let persona_file = self.persona.map(|t| kuuki::config::PersonaFile::parse(t).expect("a valid persona"));
        let persona = settings.persona(persona_file.as_ref());
        let mut out = Vec::new();
        let mut writer = LogWriter::new(&mut out, false);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let stats = runtime
            .block_on(replay::replay(
                &transcript,
                ReplayOptions { settings, persona, llm, embedder, seed: self.seed },
                &mut writer,
            ))
            .expect("the replay runs");
        drop(writer);
        let text = String::from_utf8(out).expect("utf-8");
        assert_eq!(stats.failed_deliveries, 0, "failed deliveries in the replay; the decision log:\n{text}");
        text
    }

    /// The decision log, one JSON value a line.
    pub fn log(&self) -> Log {
        Log(self.text().lines().map(|l| serde_json::from_str(l).expect("each line is JSON")).collect())
    }
}

/// Panics unless `failed` deliveries were `expected`, with the decision log so far: a
/// job that failed and was retried would otherwise pass unseen.
fn expect_failed_deliveries(
    failed: u32,
    expected: u32,
    when: &str,
    events: impl FnOnce() -> Vec<kuuki::domain::Event>,
) {
    if failed != expected {
        let events: Vec<String> = events().iter().map(|e| format!("{e:?}")).collect();
        panic!("{failed} failed deliveries {when}, expected {expected}; the decision log:\n{}", events.join("\n"));
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

    use kuuki::adapters::memory::{
        InProcess, MemoryLog, MemoryQueue, MemoryStore, RecordingChat, TsMint, VirtualClock,
    };
    use kuuki::config::Settings;
    use kuuki::deps::Deps;
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
            Self::with_llm(settings, None)
        }

        pub fn with_llm(settings: &[(&str, &str)], llm: Option<Arc<dyn kuuki::ports::Llm>>) -> Self {
            let vars: HashMap<String, String> = settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            let settings = Settings::from_vars(&vars).unwrap();
            let clock = Arc::new(VirtualClock::new(REPLAY_EPOCH));
            let mint = Arc::new(TsMint::default());
            let parts = InProcess::new(clock.clone());
            let (store, queue) = (parts.store.clone(), parts.queue.clone());
            let chat = Arc::new(RecordingChat::new(clock.clone(), mint.clone()));
            let log = Arc::new(MemoryLog::default());
            let persona = settings.persona(None);
            let deps =
                Deps::new(settings, persona, UserId("UBOT".into()), parts.adapters(chat.clone(), llm, log.clone()), 1);
            Harness { clock, mint, store, queue, chat, log, deps }
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
                replies_to: None,
                in_dm: false,
                private_channel: false,
                at,
            }
        }

        pub async fn ingest(&self, incoming: Incoming) -> IngestOutcome {
            ingest(&self.deps, incoming).await.unwrap()
        }

        /// Runs the queue up to `secs`; every delivery must succeed.
        pub async fn run_until(&self, secs: f64) {
            self.run_until_expecting(secs, 0).await;
        }

        /// Runs the queue up to `secs`, expecting exactly `failures` failed deliveries
        /// (for tests about retries and dead letters).
        pub async fn run_until_expecting(&self, secs: f64, failures: u32) {
            let clock = self.clock.clone();
            let failed = run_due(&self.deps, &*self.queue, self.at(secs), move |t| clock.advance_to(t)).await;
            self.clock.advance_to(self.at(secs));
            super::expect_failed_deliveries(failed, failures, &format!("up to {secs} s"), || self.log.take());
        }

        pub fn events(&self) -> Vec<Event> {
            self.log.take()
        }

        pub async fn stored(&self, ts: &Ts) -> Option<std::sync::Arc<Message>> {
            self.store.get_message(&ChannelId("general".into()), ts).await.unwrap()
        }

        pub fn now(&self) -> Timestamp {
            self.clock.now()
        }
    }
}

/// kuuki's ingress served over real HTTP on 127.0.0.1, a fake Slack Web API
/// (wiremock) recording every call, and the workers driven on a virtual clock.
pub mod slack_world {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::time::Duration;

    use kuuki::adapters::memory::{InProcess, MemoryLog, MemoryQueue, MemoryStore, VirtualClock};
    use kuuki::adapters::slack::workspaces::SlackWorkspaces;
    use kuuki::adapters::slack::{SigningSecret, SlackClient, SlackIdentity};
    use kuuki::config::Settings;
    use kuuki::deps::Deps;
    use kuuki::domain::{Event, Timestamp, UserId};
    use kuuki::ports::Clock;
    use kuuki::replay::REPLAY_EPOCH;
    use kuuki::worker::run_due;
    use kuuki::workspaces::Workspaces;
    use kuuki_ingress::{Ingress, SlackIngress, app};
    use serde_json::{Value, json};
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

    pub const SECRET: &str = "test-signing-secret";
    pub const BOT_USER: &str = "UKUUKI";
    pub const BOT_ID: &str = "BKUUKI";
    pub const TEAM: &str = "T0TEAM";

    /// Answers chat.postMessage like Slack: ok, with a new ts each time. The tests'
    /// messages are written at whole seconds from the world's start; kuuki's posts get
    /// ts half a second after the start, so they sort after a first mention at 0 s
    /// and before anything written a second later.
    struct PostMessage {
        next: AtomicU64,
    }

    impl Respond for PostMessage {
        fn respond(&self, request: &Request) -> ResponseTemplate {
            let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
            let n = self.next.fetch_add(1, Ordering::SeqCst);
            ResponseTemplate::new(200).set_body_json(json!({
                "ok": true,
                "channel": body["channel"],
                "ts": format!("{}.{:06}", REPLAY_EPOCH.as_micros() / 1_000_000, 500_000 + n),
                "message": {"text": body["text"], "user": BOT_USER, "bot_id": BOT_ID},
            }))
        }
    }

    pub struct SlackWorld {
        pub slack_api: MockServer,
        pub base_url: String,
        pub http: reqwest::Client,
        pub clock: Arc<VirtualClock>,
        pub store: Arc<MemoryStore>,
        pub queue: Arc<MemoryQueue>,
        pub log: Arc<MemoryLog>,
        pub deps: Arc<Deps>,
        pub secret: SigningSecret,
    }

    impl SlackWorld {
        /// `mount_defaults: false` leaves the fake API empty, for tests that mount their own.
        pub async fn start(settings: &[(&str, &str)], mount_defaults: bool) -> SlackWorld {
            Self::start_with(settings, mount_defaults, None).await
        }

        /// With an LLM behind the judge and the writer.
        pub async fn start_with(
            settings: &[(&str, &str)],
            mount_defaults: bool,
            llm: Option<Arc<dyn kuuki::ports::Llm>>,
        ) -> SlackWorld {
            Self::start_adapted(settings, mount_defaults, llm, |_| {}).await
        }

        /// Like [`SlackWorld::start_with`], with the adapters changed by `adapt` first
        /// (to wrap a port in one that injects faults).
        pub async fn start_adapted(
            settings: &[(&str, &str)],
            mount_defaults: bool,
            llm: Option<Arc<dyn kuuki::ports::Llm>>,
            adapt: impl FnOnce(&mut kuuki::deps::Adapters),
        ) -> SlackWorld {
            Self::start_serving(settings, mount_defaults, llm, adapt, false).await.0
        }

        /// A deployment serving many Slack workspaces (issue 45), none installed yet:
        /// each call to Slack is made with the token of the channel's workspace, from
        /// the installations in the world's store ([`SlackWorld::installed`]).
        pub async fn start_many(
            settings: &[(&str, &str)],
            llm: Option<Arc<dyn kuuki::ports::Llm>>,
        ) -> (SlackWorld, Arc<Workspaces>) {
            let (world, workspaces) = Self::start_serving(settings, true, llm, |_| {}, true).await;
            (world, workspaces.expect("serving many"))
        }

        /// Installs kuuki in `team` as Slack would grant it: bot `bot`, token `token`.
        pub async fn installed(workspaces: &Workspaces, team: &str, bot: &str, token: &str) {
            Self::installed_at(workspaces, team, bot, token, REPLAY_EPOCH).await
        }

        /// [`SlackWorld::installed`] at `at`.
        pub async fn installed_at(workspaces: &Workspaces, team: &str, bot: &str, token: &str, at: Timestamp) {
            let grant = kuuki::ports::SlackGrant {
                key: kuuki::ports::InstallationKey::team(team),
                app_id: "A0KUUKI".into(),
                team_name: format!("Team {team}"),
                enterprise_name: None,
                installer: UserId("UADMIN".into()),
                bot_token: token.into(),
                bot_user_id: UserId(bot.into()),
                bot_id: format!("B{bot}"),
                bot_scopes: vec!["chat:write".into()],
                refresh_token: None,
                expires_in_seconds: None,
            };
            workspaces.install(&grant, at).await.expect("installed");
        }

        async fn start_serving(
            settings: &[(&str, &str)],
            mount_defaults: bool,
            llm: Option<Arc<dyn kuuki::ports::Llm>>,
            adapt: impl FnOnce(&mut kuuki::deps::Adapters),
            many: bool,
        ) -> (SlackWorld, Option<Arc<Workspaces>>) {
            let slack_api = MockServer::start().await;
            if mount_defaults {
                Self::mount_default_api(&slack_api).await;
            }
            let mut vars: std::collections::HashMap<String, String> =
                settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            vars.insert("SLACK_SIGNING_SECRET".into(), SECRET.into());
            let settings = Settings::from_vars(&vars).unwrap();
            let clock = Arc::new(VirtualClock::new(REPLAY_EPOCH));
            let parts = InProcess::new(clock.clone());
            let (store, queue) = (parts.store.clone(), parts.queue.clone());
            let log = Arc::new(MemoryLog::default());
            let client = SlackClient::new(&slack_api.uri(), "xoxb-test").with_timeout(settings.budget.chat_timeout);
            let workspaces = many.then(|| {
                let sealer = Arc::new(kuuki::adapters::contract::test_sealer());
                Arc::new(Workspaces::new(store.clone(), sealer, clock.clone()))
            });
            let chat: Arc<dyn kuuki::ports::Chat> = match &workspaces {
                Some(workspaces) => Arc::new(SlackWorkspaces::new(client, workspaces.clone())),
                None => Arc::new(client),
            };
            let persona = settings.persona(None);
            let mut adapters = parts.adapters(chat, llm, log.clone());
            adapt(&mut adapters);
            let deps = Deps::new(settings, persona, UserId(BOT_USER.into()), adapters, 7);
            let (deps, slack) = match &workspaces {
                Some(workspaces) => {
                    let access = kuuki::ingest::slack::SlackAccess::Many(workspaces.clone());
                    let slack = SlackIngress { secret: SigningSecret::new(SECRET), access, install: None };
                    (Arc::new(deps.with_workspaces(workspaces.clone())), slack)
                }
                None => {
                    let me = SlackIdentity { user_id: BOT_USER.into(), bot_id: Some(BOT_ID.into()) };
                    (Arc::new(deps), SlackIngress::one(SigningSecret::new(SECRET), me))
                }
            };
            let ingress =
                Arc::new(Ingress { deps: deps.clone(), slack: Some(slack), discord: None, metrics_for: None });
            let base_url = serve_ingress(ingress).await;
            let world = SlackWorld {
                slack_api,
                base_url,
                http: reqwest::Client::new(),
                clock,
                store,
                queue,
                log,
                deps,
                secret: SigningSecret::new(SECRET),
            };
            (world, workspaces)
        }

        pub async fn mount_default_api(server: &MockServer) {
            Mock::given(method("POST"))
                .and(path("/chat.postMessage"))
                .respond_with(PostMessage { next: AtomicU64::new(1) })
                .mount(server)
                .await;
            for (api, answer) in [
                ("/reactions.add", json!({"ok": true})),
                ("/auth.test", json!({"ok": true, "user_id": BOT_USER, "bot_id": BOT_ID, "team_id": TEAM})),
                ("/users.info", json!({"ok": true, "user": {"name": "alice", "profile": {"display_name": "Alice"}}})),
            ] {
                Mock::given(method("POST"))
                    .and(path(api))
                    .respond_with(ResponseTemplate::new(200).set_body_json(answer))
                    .mount(server)
                    .await;
            }
        }

        /// Seconds since the world began, as Slack's request timestamp.
        pub fn now_secs(&self) -> i64 {
            self.clock.now().as_micros() / Timestamp::MICROS_PER_SECOND
        }

        /// A Slack ts `secs` seconds after the world began (unique per `n`).
        pub fn ts(&self, secs: u64, n: u32) -> String {
            format!("{}.{:06}", REPLAY_EPOCH.as_micros() / 1_000_000 + secs as i64, n)
        }

        pub async fn post_signed(&self, route: &str, body: &str, extra: &[(&str, &str)]) -> reqwest::Response {
            let timestamp = self.now_secs().to_string();
            let signature = self.secret.sign(&timestamp, body.as_bytes());
            let mut headers =
                vec![("x-slack-request-timestamp", timestamp.as_str()), ("x-slack-signature", signature.as_str())];
            headers.extend_from_slice(extra);
            self.post_raw(route, body, &headers).await
        }

        pub async fn post_raw(&self, route: &str, body: &str, headers: &[(&str, &str)]) -> reqwest::Response {
            let content_type =
                if route.ends_with("commands") { "application/x-www-form-urlencoded" } else { "application/json" };
            let mut request = self
                .http
                .post(format!("{}{route}", self.base_url))
                .header("content-type", content_type)
                .body(body.to_owned());
            for (name, value) in headers {
                request = request.header(*name, *value);
            }
            request.send().await.unwrap()
        }

        /// Sends an Events API envelope around `event`, as Slack does.
        pub async fn send_event(&self, event: Value, extra: &[(&str, &str)]) -> reqwest::Response {
            self.post_signed("/slack/events", &envelope(event).to_string(), extra).await
        }

        /// Moves the virtual clock `secs` on and runs every job due by then; every
        /// delivery must succeed.
        pub async fn run_for(&self, secs: f64) {
            let failed = self.run_for_counting(secs).await;
            super::expect_failed_deliveries(failed, 0, &format!("in {secs} s"), || self.log.take());
        }

        /// Like [`SlackWorld::run_for`] for tests that expect failures: returns how many
        /// deliveries failed.
        pub async fn run_for_counting(&self, secs: f64) -> u32 {
            let until = self.clock.now() + Duration::from_secs_f64(secs);
            let clock = self.clock.clone();
            let failures = run_due(&self.deps, &*self.queue, until, move |t| clock.advance_to(t)).await;
            self.clock.advance_to(until);
            failures
        }

        /// The bodies of the calls made to one Web API method, in order.
        pub async fn calls(&self, api: &str) -> Vec<Value> {
            self.slack_api
                .received_requests()
                .await
                .unwrap_or_default()
                .into_iter()
                .filter(|r| r.url.path() == format!("/{api}"))
                .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
                .collect()
        }

        pub fn events(&self) -> Vec<Event> {
            self.log.take()
        }
    }

    /// Serves the ingress router on a free local port; returns its base URL.
    pub async fn serve_ingress(ingress: Arc<Ingress>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app(ingress)).await.unwrap() });
        base_url
    }

    /// An Events API envelope as Slack sends it.
    pub fn envelope(event: Value) -> Value {
        json!({
            "token": "legacy-verification-token",
            "team_id": TEAM,
            "context_team_id": TEAM,
            "api_app_id": "A0KUUKI",
            "event": event,
            "type": "event_callback",
            "event_id": format!("Ev{}", event["ts"].as_str().unwrap_or("0").replace('.', "")),
            "event_time": 1767603600,
            "authorizations": [{"enterprise_id": null, "team_id": TEAM, "user_id": BOT_USER, "is_bot": true, "is_enterprise_install": false}],
            "is_ext_shared_channel": false,
            "event_context": "4-eyJldCI6Im1lc3NhZ2UiLCJ0aWQiOiJUMFRFQU0ifQ",
        })
    }

    /// A plain `message` event from a person, with the rich-text blocks Slack adds.
    pub fn message(channel: &str, user: &str, text: &str, ts: &str) -> Value {
        json!({
            "type": "message",
            "channel": channel,
            "user": user,
            "text": text,
            "ts": ts,
            "event_ts": ts,
            "client_msg_id": format!("{ts}-client"),
            "team": TEAM,
            "channel_type": "channel",
            "blocks": [{"type": "rich_text", "block_id": "b1", "elements": [{"type": "rich_text_section", "elements": [{"type": "text", "text": text}]}]}],
        })
    }
}

/// An LLM that answers from a script and keeps every request it was sent.
pub struct RecordingLlm {
    inner: kuuki::adapters::llm::ScriptedLlm,
    pub requests: std::sync::Mutex<Vec<kuuki::ports::LlmRequest>>,
}

impl RecordingLlm {
    pub fn new(script: &str) -> Arc<Self> {
        Arc::new(RecordingLlm {
            inner: ScriptedLlm::parse(script).expect("a valid script"),
            requests: Default::default(),
        })
    }

    pub fn requests(&self) -> Vec<kuuki::ports::LlmRequest> {
        self.requests.lock().unwrap().clone()
    }
}

#[async_trait::async_trait]
impl Llm for RecordingLlm {
    async fn complete(
        &self,
        request: kuuki::ports::LlmRequest,
    ) -> Result<kuuki::ports::LlmResponse, kuuki::ports::LlmError> {
        self.requests.lock().unwrap().push(request.clone());
        self.inner.complete(request).await
    }
}

/// A model that never answers and honours no timeout: a bug the time budget cannot see,
/// for tests of the worker's own deadline.
pub struct NeverAnswers;

#[async_trait::async_trait]
impl kuuki::ports::Llm for NeverAnswers {
    async fn complete(
        &self,
        _request: kuuki::ports::LlmRequest,
    ) -> Result<kuuki::ports::LlmResponse, kuuki::ports::LlmError> {
        std::future::pending().await
    }
}
