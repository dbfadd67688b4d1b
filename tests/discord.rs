//! kuuki as a Discord app over real HTTP: signed interactions and relayed Gateway
//! dispatches in, the REST calls out (to a fake Discord API that records them).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use ed25519_dalek::{Signer, SigningKey};
use kuuki::adapters::discord::{DiscordClient, DiscordIdentity, DiscordPublicKey, snowflake_at};
use kuuki::adapters::llm::ScriptedLlm;
use kuuki::adapters::memory::{InProcess, MemoryLog, MemoryQueue, MemoryStore, VirtualClock};
use kuuki::adapters::platforms::PlatformChat;
use kuuki::adapters::slack::SigningSecret;
use kuuki::config::Settings;
use kuuki::deps::Deps;
use kuuki::domain::talkativeness::SignalKind;
use kuuki::domain::{ChannelId, EventKind, Timestamp, Ts, UserId, Workspace};
use kuuki::ports::{Clock, MessageStore};
use kuuki::replay::REPLAY_EPOCH;
use kuuki::worker::run_due;
use kuuki_e2e::slack_world::serve_ingress;
use kuuki_ingress::{DiscordIngress, Ingress, RELAY};
use serde_json::{Value, json};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const BOT: &str = "900000000000000001";
const ALICE: &str = "80351110224678912";
const GUILD: &str = "41771983423143937";
const CHANNEL: &str = "41771983423143938";
const RELAY_SECRET: &str = "relay-secret";
/// kuuki's managed role in the guild.
const ROLE: &str = "41771983423143999";
const ANSWER: &str = "git rebase --onto main old-base feature";

/// Answers a create-message call like Discord: a new snowflake each time, half a
/// second after the world's start plus n.
struct CreateMessage {
    next: AtomicU64,
}

impl Respond for CreateMessage {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let id = snowflake_at(REPLAY_EPOCH + Duration::from_millis(500)) + n;
        ResponseTemplate::new(200).set_body_json(json!({
            "id": id.to_string(), "channel_id": CHANNEL, "content": body["content"],
            "author": {"id": BOT, "username": "kuuki", "bot": true},
        }))
    }
}

struct World {
    api: MockServer,
    base_url: String,
    http: reqwest::Client,
    clock: Arc<VirtualClock>,
    store: Arc<MemoryStore>,
    queue: Arc<MemoryQueue>,
    log: Arc<MemoryLog>,
    deps: Arc<Deps>,
    signing: SigningKey,
    relay: SigningSecret,
    next_id: AtomicU64,
}

impl World {
    async fn start(generate: &str) -> World {
        Self::start_with_script(&format!(r#"{{"role": "generate", "reply": {}, "repeat": true}}"#, json!(generate)))
            .await
    }

    /// A world whose model follows `script` (judge and generate lines).
    async fn start_with_script(script: &str) -> World {
        Self::start_with(script, &[]).await
    }

    /// As [`World::start_with_script`], with settings.
    async fn start_with(script: &str, vars: &[(&str, &str)]) -> World {
        let api = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path(format!("/channels/{CHANNEL}/messages")))
            .respond_with(CreateMessage { next: AtomicU64::new(1) })
            .mount(&api)
            .await;
        Mock::given(method("PUT"))
            .and(path_regex(r"^/channels/\d+/messages/\d+/reactions/.+/@me$"))
            .respond_with(ResponseTemplate::new(204))
            .mount(&api)
            .await;
        Mock::given(method("PATCH"))
            .and(path_regex(r"^/webhooks/\d+/[^/]+/messages/@original$"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!({
                "id": snowflake_at(REPLAY_EPOCH + Duration::from_millis(900)).to_string(), "channel_id": CHANNEL,
                "author": {"id": BOT, "bot": true},
            })))
            .mount(&api)
            .await;
        Mock::given(method("GET"))
            .and(path("/users/@me"))
            .respond_with(
                ResponseTemplate::new(200).set_body_json(json!({"id": BOT, "username": "kuuki", "bot": true})),
            )
            .mount(&api)
            .await;
        Mock::given(method("GET"))
            .and(path("/users/@me/guilds"))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!([{"id": GUILD, "name": "team"}])))
            .mount(&api)
            .await;
        Mock::given(method("GET"))
            .and(path(format!("/guilds/{GUILD}/roles")))
            .respond_with(ResponseTemplate::new(200).set_body_json(json!([
                {"id": GUILD, "name": "@everyone"},
                {"id": ROLE, "name": "kuuki", "managed": true, "tags": {"bot_id": BOT}},
                {"id": "600", "name": "other bot", "managed": true, "tags": {"bot_id": "12345"}},
            ])))
            .mount(&api)
            .await;
        let vars = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let settings = Settings::from_vars(&vars).unwrap();
        let clock = Arc::new(VirtualClock::new(REPLAY_EPOCH));
        let parts = InProcess::new(clock.clone());
        let (store, queue) = (parts.store.clone(), parts.queue.clone());
        let log = Arc::new(MemoryLog::default());
        let discord = Arc::new(DiscordClient::new(&api.uri(), "bot-token").with_timeout(settings.budget.chat_timeout));
        let me = discord.identify_with_roles().await.unwrap();
        assert_eq!(me, DiscordIdentity { user_id: BOT.into(), managed_roles: vec![ROLE.into()] });
        let chat = Arc::new(PlatformChat { slack: None, discord: Some(discord) });
        let llm: Arc<dyn kuuki::ports::Llm> = Arc::new(ScriptedLlm::parse(script).unwrap());
        let persona = settings.persona(None);
        let deps =
            Arc::new(Deps::new(settings, persona, UserId(BOT.into()), parts.adapters(chat, Some(llm), log.clone()), 7));
        let signing = SigningKey::from_bytes(&[42u8; 32]);
        let public_key = DiscordPublicKey::from_hex(&hex::encode(signing.verifying_key().as_bytes())).unwrap();
        let ingress = Arc::new(Ingress {
            deps: deps.clone(),
            slack: None,
            discord: Some(DiscordIngress {
                public_key: Some(public_key),
                relay_secret: Some(SigningSecret::new(RELAY_SECRET)),
                identity: me,
            }),
            metrics_for: None,
        });
        let base_url = serve_ingress(ingress).await;
        World {
            api,
            base_url,
            http: reqwest::Client::new(),
            clock,
            store,
            queue,
            log,
            deps,
            signing,
            relay: SigningSecret::new(RELAY_SECRET),
            next_id: AtomicU64::new(1),
        }
    }

    /// A snowflake for a message written now (unique per call).
    fn id_now(&self) -> String {
        (snowflake_at(self.clock.now()) + self.next_id.fetch_add(1, Ordering::SeqCst)).to_string()
    }

    async fn post(&self, route: &str, body: &str, headers: &[(&str, String)]) -> reqwest::Response {
        let mut request =
            self.http.post(format!("{}{route}", self.base_url)).header("content-type", "application/json");
        for (name, value) in headers {
            request = request.header(*name, value);
        }
        request.body(body.to_owned()).send().await.unwrap()
    }

    async fn interaction(&self, body: &Value) -> reqwest::Response {
        self.interaction_at("/discord/interactions", body).await
    }

    async fn interaction_at(&self, route: &str, body: &Value) -> reqwest::Response {
        let body = body.to_string();
        let timestamp = "1767603600".to_owned();
        let mut signed = timestamp.as_bytes().to_vec();
        signed.extend_from_slice(body.as_bytes());
        let signature = hex::encode(self.signing.sign(&signed).to_bytes());
        self.post(route, &body, &[("x-signature-ed25519", signature), ("x-signature-timestamp", timestamp)]).await
    }

    async fn relay(&self, t: &str, d: Value, extra: &[(&str, String)]) -> reqwest::Response {
        let body = json!({"op": 0, "s": 1, "t": t, "d": d}).to_string();
        let timestamp = (self.clock.now().as_micros() / Timestamp::MICROS_PER_SECOND).to_string();
        let signature = self.relay.sign(&timestamp, body.as_bytes());
        let mut headers = vec![(RELAY.timestamp_header, timestamp), (RELAY.signature_header, signature)];
        headers.extend(extra.iter().cloned());
        self.post("/discord/events", &body, &headers).await
    }

    /// Moves the virtual clock on and runs every job due; every delivery must succeed.
    async fn run_for(&self, secs: f64) {
        let until = self.clock.now() + Duration::from_secs_f64(secs);
        let clock = self.clock.clone();
        let failed = run_due(&self.deps, &*self.queue, until, move |t| clock.advance_to(t)).await;
        self.clock.advance_to(until);
        assert_eq!(failed, 0, "failed deliveries; the log: {:?}", self.log.take());
    }

    /// The create-message bodies sent to the fake API, in order.
    async fn posts(&self) -> Vec<Value> {
        self.requests("POST", &format!("/channels/{CHANNEL}/messages"))
            .await
            .into_iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect()
    }

    async fn requests(&self, verb: &str, route: &str) -> Vec<Request> {
        self.api
            .received_requests()
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.method.as_str() == verb && r.url.path() == route)
            .collect()
    }
}

fn message(id: &str, author: &str, content: &str) -> Value {
    json!({
        "id": id, "channel_id": CHANNEL, "guild_id": GUILD, "type": 0, "content": content,
        "author": {"id": author, "username": "alice", "global_name": "Alice"},
        "member": {"nick": null}, "mentions": [], "mention_roles": [], "attachments": [], "embeds": [],
        "timestamp": "2026-01-05T09:00:00.000000+00:00", "tts": false, "mention_everyone": false, "pinned": false,
    })
}

fn command(sub: &str, options: Value) -> Value {
    command_with_permissions(sub, options, "0")
}

/// The interaction as sent in the caller's DM with kuuki: no member, no server.
fn sent_in_dm(mut interaction: Value) -> Value {
    let user = interaction["member"]["user"].take();
    let fields = interaction.as_object_mut().unwrap();
    fields.remove("member");
    fields.remove("guild_id");
    interaction["user"] = user;
    interaction["context"] = json!(1);
    interaction
}

/// Discord's MANAGE_CHANNELS permission bit, as the member's permissions carry it.
const MANAGE_CHANNELS: &str = "16";

/// The command from a member whose channel permissions are `permissions` (a decimal bit set).
fn command_with_permissions(sub: &str, options: Value, permissions: &str) -> Value {
    json!({
        "type": 2, "id": "1323456789012345678", "application_id": "1", "token": "interaction-token", "version": 1,
        "channel_id": CHANNEL, "guild_id": GUILD,
        "member": {"user": {"id": ALICE, "username": "alice", "global_name": "Alice"}, "nick": null, "permissions": permissions},
        "data": {"id": "2", "name": "kuuki", "type": 1, "options": [{"name": sub, "type": 1, "options": options}]},
    })
}

#[tokio::test]
async fn a_ping_pongs_and_anything_unsigned_is_refused_before_it_is_read() {
    let w = World::start(ANSWER).await;
    let ping = json!({"type": 1, "id": "1", "application_id": "1", "token": "t", "version": 1});
    let answer = w.interaction(&ping).await;
    assert_eq!(answer.status(), 200);
    assert_eq!(answer.json::<Value>().await.unwrap(), json!({"type": 1}));
    // The Function URL ends in "/": the URL pasted with /discord/interactions after it.
    let answer = w.interaction_at("//discord/interactions", &ping).await;
    assert_eq!(answer.status(), 200, "a doubled leading slash reaches the route");
    assert_eq!(answer.json::<Value>().await.unwrap(), json!({"type": 1}));

    let body = ping.to_string();
    let forger = SigningKey::from_bytes(&[1u8; 32]);
    let mut signed = b"1767603600".to_vec();
    signed.extend_from_slice(body.as_bytes());
    let forged = hex::encode(forger.sign(&signed).to_bytes());
    let good = {
        let s = w.signing.sign(&signed);
        hex::encode(s.to_bytes())
    };
    let cases: Vec<(String, Vec<(&str, String)>)> = vec![
        (body.clone(), vec![]),
        (body.clone(), vec![("x-signature-timestamp", "1767603600".into())]),
        (body.clone(), vec![("x-signature-ed25519", forged), ("x-signature-timestamp", "1767603600".into())]),
        (
            body.replace("\"type\":1", "\"type\":2"),
            vec![("x-signature-ed25519", good.clone()), ("x-signature-timestamp", "1767603600".into())],
        ),
        ("not json at all".into(), vec![("x-signature-ed25519", good), ("x-signature-timestamp", "1767603600".into())]),
    ];
    for (body, headers) in cases {
        let refused = w.post("/discord/interactions", &body, &headers).await;
        assert_eq!(refused.status(), 401, "{body} {headers:?}");
    }
    // Slack is not served by this process.
    assert_eq!(w.post("/slack/events", "{}", &[]).await.status(), 404);
}

#[tokio::test]
async fn each_kuuki_subcommand_answers_the_caller_within_the_request() {
    let w = World::start(ANSWER).await;
    let channel = ChannelId(CHANNEL.into());
    let content = |v: Value| {
        assert_eq!(v["type"], 4, "{v}");
        assert_eq!(v["data"]["flags"], 64, "only the caller sees it: {v}");
        v["data"]["content"].as_str().unwrap().to_owned()
    };
    let status = content(w.interaction(&command("status", json!([]))).await.json().await.unwrap());
    assert!(status.starts_with("kuuki here"), "{status}");
    let why = content(w.interaction(&command("why", json!([]))).await.json().await.unwrap());
    assert!(!why.is_empty());

    // `minutes` as registered before durations took units, from a channel manager.
    let manager = |sub: &str, options: Value| command_with_permissions(sub, options, MANAGE_CHANNELS);
    let mute = content(
        w.interaction(&manager("mute", json!([{"name": "minutes", "type": 4, "value": 30}])))
            .await
            .json()
            .await
            .unwrap(),
    );
    assert!(mute.starts_with("Muted here until"), "{mute}");
    let until = w.deps.channels.channel_state(&channel).await.unwrap().muted_until.unwrap();
    assert_eq!(until.seconds_since(w.clock.now()), 1800.0);
    let unmute = content(w.interaction(&manager("unmute", json!([]))).await.json().await.unwrap());
    assert!(unmute.starts_with("Unmuted"), "{unmute}");
    assert_eq!(w.deps.channels.channel_state(&channel).await.unwrap().muted_until, None);

    let shadow = content(
        w.interaction(&manager("shadow", json!([{"name": "state", "type": 3, "value": "on"}])))
            .await
            .json()
            .await
            .unwrap(),
    );
    assert!(shadow.starts_with("Shadow mode on"), "{shadow}");
    assert!(w.deps.channels.channel_state(&channel).await.unwrap().shadow.is_some());
    w.interaction(&manager("shadow", json!([{"name": "state", "type": 3, "value": "off"}]))).await;
    assert_eq!(w.deps.channels.channel_state(&channel).await.unwrap().shadow, None);
    let announced = w.posts().await.len();
    assert_eq!(announced, 4, "each change announced in the channel: {:?}", w.posts().await);

    // ask: deferred ("thinking…"), the question goes to kuuki as the caller's message,
    // and the answer completes the interaction instead of a new channel message.
    let question = json!([{"name": "question", "type": 3, "value": "how do I rebase onto main?"}]);
    let deferred: Value = w.interaction(&command("ask", question.clone())).await.json().await.unwrap();
    assert_eq!(deferred, json!({"type": 5}));
    w.run_for(5.0).await;
    assert_eq!(w.posts().await.len(), announced, "no new channel message: {:?}", w.posts().await);
    let completed = w.requests("PATCH", "/webhooks/1/interaction-token/messages/@original").await;
    assert_eq!(completed.len(), 1);
    let body: Value = serde_json::from_slice(&completed[0].body).unwrap();
    assert_eq!(body["content"], ANSWER);
    assert_eq!(body["allowed_mentions"]["parse"], json!([]));
    assert!(body.get("message_reference").is_none() && body.get("nonce").is_none());
    let stored = w.store.get_message(&channel, &Ts::new("1323456789012345678")).await.unwrap().unwrap();
    assert_eq!((stored.user.as_str(), stored.user_name.as_str()), (ALICE, "Alice"));
    // The same interaction delivered again asks once.
    w.interaction(&command("ask", question)).await;
    w.run_for(5.0).await;
    assert_eq!(w.requests("PATCH", "/webhooks/1/interaction-token/messages/@original").await.len(), 1);

    let other = json!({"type": 2, "id": "5", "channel_id": CHANNEL, "member": {"user": {"id": ALICE}}, "data": {"name": "weather"}});
    let unknown = content(w.interaction(&other).await.json().await.unwrap());
    assert!(unknown.contains("/weather"), "{unknown}");
}

#[tokio::test]
async fn only_members_who_manage_the_channel_may_mute_or_shadow_kuuki() {
    let w = World::start(ANSWER).await;
    let channel = ChannelId(CHANNEL.into());
    let content = |v: Value| v["data"]["content"].as_str().unwrap().to_owned();
    let two_hours = json!([{"name": "duration", "type": 3, "value": "2h"}]);

    // Send Messages and the like, but not Manage Channels: a polite no, and nothing changes.
    for (sub, options) in
        [("mute", two_hours.clone()), ("shadow", json!([{"name": "state", "type": 3, "value": "all"}]))]
    {
        let refused =
            content(w.interaction(&command_with_permissions(sub, options, "3072")).await.json().await.unwrap());
        assert!(refused.starts_with("Sorry, only members with the Manage Channels permission"), "{refused}");
        assert!(refused.contains("nothing changed"), "{refused}");
    }
    let state = w.deps.channels.channel_state(&channel).await.unwrap();
    assert_eq!((state.muted_until, state.shadow), (None, None), "refused, so unchanged");
    assert!(w.posts().await.is_empty(), "nothing announced");

    // Manage Channels: applied for the duration given, and announced once.
    let muted = content(
        w.interaction(&command_with_permissions("mute", two_hours.clone(), MANAGE_CHANNELS))
            .await
            .json()
            .await
            .unwrap(),
    );
    assert!(muted.starts_with("Muted here until 2026-01-05 11:00 UTC"), "{muted}");
    let until = w.deps.channels.channel_state(&channel).await.unwrap().muted_until.unwrap();
    assert_eq!(until.seconds_since(w.clock.now()), 7200.0);
    let posts = w.posts().await;
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(
        posts[0]["content"],
        format!(
            "kuuki is muted here until 2026-01-05 11:00 UTC (set by <@{ALICE}>): it will not join in unasked, and still answers mentions."
        )
    );
    // Administrator implies it; the same change again is not announced again.
    let admin = command_with_permissions("mute", two_hours, &(1u64 << 3 | 1 << 11).to_string());
    let again = content(w.interaction(&admin).await.json().await.unwrap());
    assert!(again.starts_with("Muted here until"), "{again}");
    assert_eq!(w.posts().await.len(), 1, "announced once");

    // In a DM with kuuki (no member) its one person manages it.
    let mut in_dm = sent_in_dm(command("shadow", json!([{"name": "duration", "type": 3, "value": "30m"}])));
    let shadowed = content(w.interaction(&in_dm).await.json().await.unwrap());
    assert!(shadowed.starts_with("Shadow mode on until 2026-01-05 09:30 UTC"), "{shadowed}");
    // In a group DM nobody does (but COMMAND_MANAGERS).
    in_dm["context"] = json!(2);
    in_dm["data"]["options"][0]["options"] = json!([{"name": "state", "type": 3, "value": "off"}]);
    let refused = content(w.interaction(&in_dm).await.json().await.unwrap());
    assert!(refused.starts_with("Sorry, only"), "{refused}");
    assert!(w.deps.channels.channel_state(&channel).await.unwrap().shadow.is_some(), "still in shadow mode");
}

#[tokio::test]
async fn a_mention_relayed_three_times_is_answered_once_as_a_reply_that_pings_nobody_else() {
    let w = World::start("<@&123> @everyone done").await;
    let id = w.id_now();
    let mention = message(&id, ALICE, &format!("<@{BOT}> can you rebase this?"));
    for extra in [vec![], vec![], vec![("x-kuuki-relay-retry", "1".to_owned())]] {
        let answer = w.relay("MESSAGE_CREATE", mention.clone(), &extra).await;
        assert_eq!(answer.status(), 200);
    }
    w.run_for(10.0).await;
    let posts = w.posts().await;
    assert_eq!(posts.len(), 1, "{posts:?}");
    let post = &posts[0];
    assert_eq!(post["message_reference"]["message_id"], id.as_str(), "a direct answer is a reply");
    assert_eq!(post["allowed_mentions"]["parse"], json!([]), "quoted roles and @everyone never ping");
    assert_eq!(post["nonce"].as_str().unwrap().len(), 25);
    assert_eq!(post["enforce_nonce"], true);
    let auth = &w.requests("POST", &format!("/channels/{CHANNEL}/messages")).await[0];
    assert_eq!(auth.headers["authorization"], "Bot bot-token");
}

/// A question left open is picked up (docs/design.md §7.7) and answered as a reply to
/// it: Discord's threads are channels of their own, so kuuki does not open one.
#[tokio::test]
async fn a_question_left_open_is_answered_as_a_reply_to_it() {
    let w = World::start_with_script(
        r#"{"role": "judge", "reply": {"should_respond": true, "reason": "open question", "confidence": 0.9, "delay_seconds": 0, "conversation_state": "active"}, "repeat": true}
{"role": "generate", "reply": "git reset --soft HEAD~1", "repeat": true}"#,
    )
    .await;
    let id = w.id_now();
    let asked =
        w.relay("MESSAGE_CREATE", message(&id, ALICE, "how do I undo the last commit but keep the changes"), &[]);
    assert_eq!(asked.await.status(), 200);
    w.run_for(200.0).await;
    let posts = w.posts().await;
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0]["message_reference"]["message_id"], id.as_str(), "a reply to the question: {}", posts[0]);
    assert_eq!(posts[0]["content"], "git reset --soft HEAD~1");

    // Answered by someone's reply to it (no name, no thread): kuuki stays out.
    let w = World::start_with_script(
        r#"{"role": "judge", "reply": {"should_respond": true, "reason": "open question", "confidence": 0.9, "delay_seconds": 0, "conversation_state": "active"}, "repeat": true}
{"role": "generate", "reply": "git reset --soft HEAD~1", "repeat": true}"#,
    )
    .await;
    // Two others talk among themselves first: the next line is not taken for an answer.
    let (carol, dave) = ("80351110224678914", "80351110224678915");
    let side = message(&w.id_now(), carol, &format!("<@{dave}> lunch at noon?"));
    assert_eq!(w.relay("MESSAGE_CREATE", side, &[]).await.status(), 200);
    w.run_for(5.0).await;
    let side = message(&w.id_now(), dave, &format!("<@{carol}> ok"));
    assert_eq!(w.relay("MESSAGE_CREATE", side, &[]).await.status(), 200);
    w.run_for(5.0).await;
    let id = w.id_now();
    let asked =
        w.relay("MESSAGE_CREATE", message(&id, ALICE, "how do I undo the last commit but keep the changes"), &[]);
    assert_eq!(asked.await.status(), 200);
    w.run_for(20.0).await;
    let mut reply = message(&w.id_now(), "80351110224678913", "pretty sure that's in the wiki");
    reply["message_reference"] = json!({"message_id": id, "channel_id": CHANNEL});
    reply["referenced_message"] = json!({"id": id, "author": {"id": ALICE}});
    assert_eq!(w.relay("MESSAGE_CREATE", reply, &[]).await.status(), 200);
    w.run_for(200.0).await;
    assert!(w.posts().await.is_empty(), "{:?}", w.posts().await);
}

/// With the answered model on (a help channel's setting), kuuki's answer to a question
/// it picked up (a reply to it) is passed by only by the asker: the others talking on
/// about their own count nothing; the asker's three lines past it count it ignored.
#[tokio::test]
async fn in_a_help_channel_only_the_asker_passes_a_picked_up_answer_by() {
    let w = World::start_with(
        r#"{"role": "judge", "reply": {"should_respond": true, "reason": "open question", "confidence": 0.9, "delay_seconds": 0, "conversation_state": "active"}, "repeat": true}
{"role": "generate", "reply": "git reset --soft HEAD~1", "repeat": true}"#,
        &[("REPLY_MODEL_THRESHOLD", "0.25"), ("UNANSWERED_QUESTION_WAIT_SECONDS", "180")],
    )
    .await;
    let others = ["80351110224678914", "80351110224678915", "80351110224678916", "80351110224678917"];
    let chatter = ["deploy status?", "canary at 50%", "lunch at noon?", "sure", "ramen?", "booked"];
    let talk =
        |i: usize| message(&w.id_now(), others[i % 4], &format!("<@{}> {}", others[(i + 1) % 4], chatter[i % 6]));
    for i in 0..6 {
        assert_eq!(w.relay("MESSAGE_CREATE", talk(i), &[]).await.status(), 200);
        w.run_for(10.0).await;
    }
    let asked = message(&w.id_now(), ALICE, "how do I undo the last commit but keep the changes");
    let question = asked["id"].as_str().unwrap().to_owned();
    assert_eq!(w.relay("MESSAGE_CREATE", asked, &[]).await.status(), 200);
    for i in 6..18 {
        w.run_for(15.0).await;
        assert_eq!(w.relay("MESSAGE_CREATE", talk(i), &[]).await.status(), 200);
    }
    w.run_for(30.0).await;
    let posts = w.posts().await;
    assert_eq!(posts.len(), 1, "picked up: {posts:?}; {:?}", w.log.take());
    assert_eq!(posts[0]["message_reference"]["message_id"], question.as_str(), "a reply to the question");
    let ignored = |events: Vec<kuuki::domain::Event>| {
        events.iter().filter(|e| matches!(&e.kind, EventKind::Feedback { signal: SignalKind::Ignored, .. })).count()
    };
    w.log.take();
    for i in 18..24 {
        assert_eq!(w.relay("MESSAGE_CREATE", talk(i), &[]).await.status(), 200);
        w.run_for(10.0).await;
    }
    // Their judgments, which settle the post, come after their wait.
    w.run_for(90.0).await;
    let events = w.log.take();
    assert!(events.iter().any(|e| matches!(e.kind, EventKind::Judge { .. })), "judged since: {events:?}");
    assert_eq!(ignored(events), 0, "the others talking on pass nothing by");
    for text in ["hmm", "still looking", "any ideas?"] {
        assert_eq!(w.relay("MESSAGE_CREATE", message(&w.id_now(), ALICE, text), &[]).await.status(), 200);
        w.run_for(10.0).await;
    }
    w.run_for(60.0).await;
    assert_eq!(ignored(w.log.take()), 1, "the asker talked past the answer");
}

#[tokio::test]
async fn a_reply_to_kuuki_is_answered_and_another_bots_mention_is_not() {
    let w = World::start(ANSWER).await;
    let mut reply = message(&w.id_now(), ALICE, "and for a merge commit?");
    reply["type"] = json!(19);
    reply["message_reference"] = json!({"message_id": "1", "channel_id": CHANNEL});
    reply["referenced_message"] = json!({"id": "1", "author": {"id": BOT, "bot": true}});
    assert_eq!(w.relay("MESSAGE_CREATE", reply, &[]).await.status(), 200);
    let mut bot = message(&w.id_now(), "777", &format!("<@{BOT}> beep"));
    bot["author"]["bot"] = json!(true);
    assert_eq!(w.relay("MESSAGE_CREATE", bot, &[]).await.status(), 200);
    w.run_for(10.0).await;
    let posts = w.posts().await;
    assert_eq!(posts.len(), 1, "only the person's reply is answered: {posts:?}");
    assert_eq!(
        w.store.messages_after(&ChannelId(CHANNEL.into()), None, 10).await.unwrap().len(),
        3,
        "both stored, and the answer"
    );
}

#[tokio::test]
async fn a_mention_of_kuukis_role_is_answered() {
    let w = World::start(ANSWER).await;
    let mut m = message(&w.id_now(), ALICE, &format!("<@&{ROLE}> where are the deploy logs?"));
    m["mention_roles"] = json!([ROLE]);
    w.relay("MESSAGE_CREATE", m, &[]).await;
    w.run_for(5.0).await;
    assert_eq!(w.posts().await.len(), 1, "answered at once, as a mention");
}

#[tokio::test]
async fn relayed_events_with_a_bad_signature_are_refused_and_change_nothing() {
    let w = World::start(ANSWER).await;
    let body =
        json!({"op": 0, "t": "MESSAGE_CREATE", "d": message(&w.id_now(), ALICE, &format!("<@{BOT}> hi"))}).to_string();
    let now = (w.clock.now().as_micros() / Timestamp::MICROS_PER_SECOND).to_string();
    let stale = (w.clock.now().as_micros() / Timestamp::MICROS_PER_SECOND - 301).to_string();
    let wrong = SigningSecret::new("not the relay secret").sign(&now, body.as_bytes());
    let cases = [
        vec![],
        vec![(RELAY.timestamp_header, now.clone())],
        vec![(RELAY.timestamp_header, now.clone()), (RELAY.signature_header, wrong)],
        vec![(RELAY.timestamp_header, stale.clone()), (RELAY.signature_header, w.relay.sign(&stale, body.as_bytes()))],
    ];
    for headers in cases {
        let refused = w.post("/discord/events", &body, &headers).await;
        assert_eq!(refused.status(), 401, "{headers:?}");
    }
    w.run_for(10.0).await;
    assert!(w.store.messages_after(&ChannelId(CHANNEL.into()), None, 10).await.unwrap().is_empty());
    assert!(w.posts().await.is_empty());
    // A signed body that is not a dispatch is a 400, and stores nothing either.
    let garbage = "{\"op\": 0}";
    let signature = w.relay.sign(&now, garbage.as_bytes());
    let bad =
        w.post("/discord/events", garbage, &[(RELAY.timestamp_header, now), (RELAY.signature_header, signature)]).await;
    assert_eq!(bad.status(), 400);
}

#[tokio::test]
async fn edits_and_deletes_change_the_stored_message() {
    let w = World::start(ANSWER).await;
    let id = w.id_now();
    let channel = ChannelId(CHANNEL.into());
    w.relay("MESSAGE_CREATE", message(&id, ALICE, "deploy at 5"), &[]).await;
    w.relay(
        "MESSAGE_UPDATE",
        json!({"id": id, "channel_id": CHANNEL, "guild_id": GUILD, "content": "deploy at 6"}),
        &[],
    )
    .await;
    let stored = w.store.get_message(&channel, &Ts::new(&id)).await.unwrap().unwrap();
    assert_eq!(stored.text, "deploy at 6");
    w.relay("MESSAGE_DELETE", json!({"id": id, "channel_id": CHANNEL, "guild_id": GUILD}), &[]).await;
    assert_eq!(w.store.get_message(&channel, &Ts::new(&id)).await.unwrap(), None);
}

#[tokio::test]
async fn a_long_answer_is_split_at_2000_characters_and_only_the_first_part_replies() {
    let long: String = (0..450).map(|i| format!("word{i:04} ")).collect();
    assert!(long.chars().count() > 4000);
    let w = World::start(&long).await;
    w.relay("MESSAGE_CREATE", message(&w.id_now(), ALICE, &format!("<@{BOT}> explain")), &[]).await;
    w.run_for(10.0).await;
    let posts = w.posts().await;
    assert_eq!(posts.len(), 3, "{}", posts.len());
    assert!(posts.iter().all(|p| p["content"].as_str().unwrap().chars().count() <= 2000));
    assert!(posts[0].get("message_reference").is_some());
    assert!(posts[1].get("message_reference").is_none() && posts[2].get("message_reference").is_none());
    assert!(posts[0].get("nonce").is_some() && posts[1].get("nonce").is_none(), "the head carries the claim's tag");
}

#[tokio::test]
async fn a_429_is_waited_out_and_an_exhausted_bucket_is_not_called() {
    let api = MockServer::start().await;
    let channel = ChannelId(CHANNEL.into());
    Mock::given(method("PUT"))
        .and(path_regex(r"/reactions/"))
        .respond_with(
            ResponseTemplate::new(429)
                .set_body_json(json!({"message": "slow down", "retry_after": 0.05, "global": false})),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&api)
        .await;
    Mock::given(method("PUT"))
        .and(path_regex(r"/reactions/"))
        .respond_with(
            ResponseTemplate::new(204)
                .insert_header("x-ratelimit-remaining", "0")
                .insert_header("x-ratelimit-reset-after", "60.0")
                .insert_header("x-ratelimit-bucket", "abc"),
        )
        .mount(&api)
        .await;
    let client = DiscordClient::new(&api.uri(), "t").with_timeout(Duration::from_secs(2));
    use kuuki::ports::Chat;
    client.add_reaction(&channel, &Ts::new("5"), "tada").await.unwrap();
    let calls = api.received_requests().await.unwrap();
    assert_eq!(calls.len(), 2, "the 429, then the reaction");
    assert_eq!(calls[1].url.path(), format!("/channels/{CHANNEL}/messages/5/reactions/%F0%9F%8E%89/@me"));
    // The bucket is empty for a minute, longer than the call's budget: fail now, no call.
    let refused = client.add_reaction(&channel, &Ts::new("6"), "tada").await.unwrap_err();
    assert!(refused.to_string().contains("rate limited"), "{refused}");
    assert_eq!(api.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_global_429_holds_every_route() {
    let api = MockServer::start().await;
    Mock::given(method("PUT"))
        .and(path_regex(r"/reactions/"))
        .respond_with(
            ResponseTemplate::new(429).set_body_json(json!({"message": "global", "retry_after": 60.0, "global": true})),
        )
        .mount(&api)
        .await;
    let client = DiscordClient::new(&api.uri(), "t").with_timeout(Duration::from_secs(2));
    use kuuki::ports::Chat;
    let limited = client.add_reaction(&ChannelId(CHANNEL.into()), &Ts::new("5"), "tada").await.unwrap_err();
    assert!(limited.to_string().contains("rate limited"), "{limited}");
    // Another route, another channel: held too, without a call.
    let post = kuuki::ports::Post {
        channel: ChannelId("12345".into()),
        thread_root: None,
        text: "hi".into(),
        tag: None,
        reply_to: None,
        completes: None,
    };
    let held = client.post_message(&post).await.unwrap_err();
    assert!(held.to_string().contains("rate limited"), "{held}");
    assert_eq!(api.received_requests().await.unwrap().len(), 1);
}

#[tokio::test]
async fn workers_sign_in_without_reading_every_servers_roles() {
    let w = World::start(ANSWER).await;
    let before = w.api.received_requests().await.unwrap().len();
    let worker = DiscordClient::new(&w.api.uri(), "bot-token");
    assert_eq!(worker.identify().await.unwrap(), DiscordIdentity { user_id: BOT.into(), managed_roles: vec![] });
    let calls = w.api.received_requests().await.unwrap();
    let paths: Vec<&str> = calls[before..].iter().map(|r| r.url.path()).collect();
    assert_eq!(paths, ["/users/@me"], "one call at a worker's cold start");
}

#[tokio::test]
async fn a_signed_interaction_kuuki_cannot_read_is_a_400_that_stores_nothing() {
    let w = World::start(ANSWER).await;
    let no_channel = json!({"type": 2, "id": "1323456789012345678", "application_id": "1", "token": "t",
        "member": {"user": {"id": ALICE}}, "data": {"name": "kuuki", "options": [{"name": "status", "type": 1}]}});
    let not_an_interaction = json!({"hello": "world"});
    let ask_without_token = {
        let mut c = command("ask", json!([{"name": "question", "type": 3, "value": "why?"}]));
        c.as_object_mut().unwrap().remove("token");
        c
    };
    for body in [no_channel, not_an_interaction, ask_without_token] {
        let answer = w.interaction(&body).await;
        assert_eq!(answer.status(), 400, "{body}");
        assert!(answer.text().await.unwrap().contains("malformed interaction"), "{body}");
    }
    w.run_for(5.0).await;
    assert!(w.store.messages_after(&ChannelId(CHANNEL.into()), None, 10).await.unwrap().is_empty());
    assert!(w.posts().await.is_empty());
}

/// A forget request whose way back has expired (Discord refuses the edit) is still
/// carried out, and the job ends there instead of failing until the dead-letter queue.
#[tokio::test]
async fn a_forget_whose_interaction_expired_is_done_without_an_answer() {
    let w = World::start(ANSWER).await;
    Mock::given(method("PATCH"))
        .and(path("/webhooks/1/expired-token/messages/@original"))
        .respond_with(ResponseTemplate::new(404).set_body_json(json!({"message": "Unknown Webhook", "code": 10015})))
        .with_priority(1)
        .mount(&w.api)
        .await;
    assert_eq!(w.relay("MESSAGE_CREATE", message(&w.id_now(), ALICE, "my cat is Miso"), &[]).await.status(), 200);
    let mut forget_me = command("forget-me", json!([]));
    forget_me["token"] = json!("expired-token");
    let ack = w.interaction(&forget_me).await.json::<Value>().await.unwrap();
    assert!(ack["data"]["content"].as_str().unwrap().starts_with("kuuki is forgetting you"), "{ack}");
    w.run_for(1.0).await;
    assert_eq!(w.requests("PATCH", "/webhooks/1/expired-token/messages/@original").await.len(), 1, "tried once");
    assert_eq!(
        w.deps.facts.profile(Workspace::Shared, &UserId(ALICE.into())).await.unwrap(),
        None,
        "forgotten all the same"
    );
    w.run_for(3600.0).await;
    assert_eq!(w.requests("PATCH", "/webhooks/1/expired-token/messages/@original").await.len(), 1, "not again");
}

#[tokio::test]
async fn forget_someone_is_for_members_who_manage_the_channel_and_forget_me_for_everyone() {
    let w = World::start(ANSWER).await;
    let content = |v: Value| v["data"]["content"].as_str().unwrap().to_owned();
    let someone = "1111111111111111111";
    assert_eq!(
        w.relay("MESSAGE_CREATE", message(&w.id_now(), someone, "my cat is called Miso"), &[]).await.status(),
        200
    );
    assert_eq!(
        w.deps.facts.profile(Workspace::Shared, &UserId(someone.into())).await.unwrap().map(|p| p.interactions),
        Some(1)
    );
    let whom = json!([{"name": "user", "type": 6, "value": someone}]);

    let refused =
        content(w.interaction(&command_with_permissions("forget", whom.clone(), "3072")).await.json().await.unwrap());
    assert!(refused.starts_with("Sorry, only members with the Manage Channels permission"), "{refused}");
    assert!(
        w.deps.facts.profile(Workspace::Shared, &UserId(someone.into())).await.unwrap().is_some(),
        "refused, so nothing forgotten"
    );
    // In a DM with kuuki its one person manages that DM, not the people kuuki knows.
    let in_dm = sent_in_dm(command("forget", whom.clone()));
    let refused = content(w.interaction(&in_dm).await.json().await.unwrap());
    assert!(refused.starts_with("Sorry, only"), "{refused}");
    w.run_for(1.0).await;
    assert!(
        w.deps.facts.profile(Workspace::Shared, &UserId(someone.into())).await.unwrap().is_some(),
        "nothing forgotten from a DM"
    );

    // Answered within Discord's 3 s; a worker forgets, then the answer replaces that
    // first reply (the interaction's @original), once.
    let ack =
        content(w.interaction(&command_with_permissions("forget", whom, MANAGE_CHANNELS)).await.json().await.unwrap());
    assert!(ack.starts_with(&format!("kuuki is forgetting <@{someone}>")), "{ack}");
    assert!(
        w.deps.facts.profile(Workspace::Shared, &UserId(someone.into())).await.unwrap().is_some(),
        "the worker's to do"
    );
    w.run_for(1.0).await;
    let edits = w.requests("PATCH", "/webhooks/1/interaction-token/messages/@original").await;
    assert_eq!(edits.len(), 1, "answered once");
    let body: Value = serde_json::from_slice(&edits[0].body).unwrap();
    let forgotten = body["content"].as_str().unwrap();
    assert!(forgotten.starts_with(&format!("Forgotten <@{someone}>: 1 stored message(s)")), "{forgotten}");
    assert_eq!(body["allowed_mentions"]["parse"], json!([]), "naming them pings no one");
    assert_eq!(w.deps.facts.profile(Workspace::Shared, &UserId(someone.into())).await.unwrap(), None);
    let left = w.deps.messages.messages_after(&ChannelId(CHANNEL.into()), None, 10).await.unwrap();
    assert!(left.iter().all(|m| m.user.0 != someone.into()), "{left:?}");

    // Anyone may have kuuki forget them, and see what it remembers.
    let memory = content(w.interaction(&command("memory", json!([]))).await.json().await.unwrap());
    assert!(memory.contains("About you: 0 message(s) seen"), "{memory}");
    let me = content(w.interaction(&command("forget-me", json!([]))).await.json().await.unwrap());
    assert!(me.starts_with("kuuki is forgetting you"), "{me}");
    w.run_for(1.0).await;
    let edits = w.requests("PATCH", "/webhooks/1/interaction-token/messages/@original").await;
    assert_eq!(edits.len(), 2);
    let body: Value = serde_json::from_slice(&edits[1].body).unwrap();
    assert_eq!(body["content"], "kuuki had nothing stored about you.");
}

/// Managing channels in one server is no right over what someone said in another: a
/// manager's forget reaches that server's channels only (its answer says so, and the
/// profile that lists their other channels stays); a channel Discord no longer shows
/// kuuki is not searched, and the answer counts it; the person's own forget-me reaches
/// every channel.
#[tokio::test]
async fn a_managers_forget_stays_in_their_server_and_forget_me_reaches_everywhere() {
    const OTHER_GUILD: &str = "51771983423143937";
    const OTHER_CHANNEL: &str = "51771983423143938";
    const HIDDEN_CHANNEL: &str = "41771983423143940";
    let w = World::start(ANSWER).await;
    Mock::given(method("GET"))
        .and(path(format!("/channels/{HIDDEN_CHANNEL}")))
        .respond_with(ResponseTemplate::new(403).set_body_json(json!({"code": 50001, "message": "Missing Access"})))
        .mount(&w.api)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("/channels/{OTHER_CHANNEL}")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"id": OTHER_CHANNEL, "guild_id": OTHER_GUILD})))
        .mount(&w.api)
        .await;
    let content = |v: Value| v["data"]["content"].as_str().unwrap().to_owned();
    let someone = "1111111111111111111";
    let said = |channel: &'static str| {
        let w = &w;
        async move {
            let left = w.deps.messages.messages_after(&ChannelId(channel.into()), None, 10).await.unwrap();
            left.iter().filter(|m| m.user.0 == someone.into()).count()
        }
    };
    let here = message(&w.id_now(), someone, "my cat is called Miso");
    let mut elsewhere = message(&w.id_now(), someone, "my dog is called Pochi");
    elsewhere["channel_id"] = json!(OTHER_CHANNEL);
    elsewhere["guild_id"] = json!(OTHER_GUILD);
    let mut hidden = message(&w.id_now(), someone, "my fish is called Kin");
    hidden["channel_id"] = json!(HIDDEN_CHANNEL);
    for event in [here, elsewhere, hidden] {
        assert_eq!(w.relay("MESSAGE_CREATE", event, &[]).await.status(), 200);
    }
    assert_eq!((said(CHANNEL).await, said(OTHER_CHANNEL).await, said(HIDDEN_CHANNEL).await), (1, 1, 1));
    // Said a while before the forget (its second look removes what was posted before).
    w.run_for(60.0).await;

    let whom = json!([{"name": "user", "type": 6, "value": someone}]);
    let ack =
        content(w.interaction(&command_with_permissions("forget", whom, MANAGE_CHANNELS)).await.json().await.unwrap());
    assert!(ack.starts_with(&format!("kuuki is forgetting <@{someone}> in this server")), "{ack}");
    w.run_for(1.0).await;
    assert_eq!((said(CHANNEL).await, said(OTHER_CHANNEL).await), (0, 1), "this server's channel only");
    assert_eq!(said(HIDDEN_CHANNEL).await, 1, "a channel Discord would not place is left");
    let logged: Vec<_> = w
        .log
        .take()
        .into_iter()
        .filter_map(|e| match e.kind {
            kuuki::domain::EventKind::Forget { server, unplaced, messages, .. } => Some((server, unplaced, messages)),
            _ => None,
        })
        .collect();
    assert_eq!(logged, [(Some(GUILD.to_owned()), 1, 1)], "the log says how far it reached");
    assert_eq!(w.requests("GET", &format!("/channels/{OTHER_CHANNEL}")).await.len(), 1, "asked where it is, once");
    let profile = w
        .deps
        .facts
        .profile(Workspace::Shared, &UserId(someone.into()))
        .await
        .unwrap()
        .expect("kept: they wrote elsewhere");
    assert!(profile.channels.contains(&ChannelId(OTHER_CHANNEL.into())), "{profile:?}");
    let edits = w.requests("PATCH", "/webhooks/1/interaction-token/messages/@original").await;
    let body: Value = serde_json::from_slice(&edits[0].body).unwrap();
    let answer = body["content"].as_str().unwrap();
    assert!(answer.starts_with(&format!("Forgotten <@{someone}>: 1 stored message(s)")), "{answer}");
    assert!(answer.contains("the profile (kept: they wrote where this request does not reach)"), "{answer}");
    assert!(
        answer.ends_with(
            "Only this server's channels were searched: what was said elsewhere stays. \
             1 channel(s) Discord no longer shows kuuki could not be placed, so were not searched."
        ),
        "{answer}"
    );
    // Its second look, once work in flight has ended, stays within the server too.
    let lease = w.deps.budget.claim_lease().as_secs_f64();
    w.run_for(2.0 * lease + 610.0).await;
    assert_eq!((said(OTHER_CHANNEL).await, said(HIDDEN_CHANNEL).await), (1, 1), "the second look stays in the server");
    assert!(
        w.deps.facts.profile(Workspace::Shared, &UserId(someone.into())).await.unwrap().is_some(),
        "the profile stays"
    );

    // Their own request, asked in this server, reaches the other one too.
    let mut forget_me = command("forget-me", json!([]));
    forget_me["member"]["user"]["id"] = json!(someone);
    forget_me["token"] = json!("their-token");
    let ack = content(w.interaction(&forget_me).await.json().await.unwrap());
    assert!(ack.starts_with("kuuki is forgetting you;"), "{ack}");
    w.run_for(1.0).await;
    assert_eq!((said(OTHER_CHANNEL).await, said(HIDDEN_CHANNEL).await), (0, 0), "everywhere they wrote");
    assert_eq!(w.deps.facts.profile(Workspace::Shared, &UserId(someone.into())).await.unwrap(), None);
    let edits = w.requests("PATCH", "/webhooks/1/their-token/messages/@original").await;
    let body: Value = serde_json::from_slice(&edits[0].body).unwrap();
    let answer = body["content"].as_str().unwrap();
    assert!(
        answer.starts_with("Forgotten you: 2 stored message(s)") && !answer.contains("Only this server"),
        "{answer}"
    );
}

/// A channel's server, as a forget in one server asks it: a DM has none; a channel
/// Discord no longer shows kuuki (403, 404) cannot be placed (Rejected, asked again
/// next time); any other refusal (a revoked token) is a failure to retry, never taken
/// for "not in this server". The client asks each time: the forget keeps answers in
/// the ledger (`a_channels_server_is_remembered_in_the_ledger_for_every_worker`).
#[tokio::test]
async fn a_channels_server_is_what_discord_says_and_only_a_hidden_channel_is_unplaced() {
    use kuuki::ports::{Chat, PortError};
    let api = MockServer::start().await;
    for (channel, status, body) in [
        ("11", 200, json!({"id": "11", "guild_id": GUILD})),
        ("12", 200, json!({"id": "12", "type": 1})),
        ("13", 403, json!({"code": 50001, "message": "Missing Access"})),
        ("14", 401, json!({"code": 0, "message": "401: Unauthorized"})),
    ] {
        Mock::given(method("GET"))
            .and(path(format!("/channels/{channel}")))
            .respond_with(ResponseTemplate::new(status).set_body_json(body))
            .mount(&api)
            .await;
    }
    let discord = DiscordClient::new(&api.uri(), "bot-token");
    let server_of = |id: &str| {
        let channel = ChannelId(id.into());
        let discord = &discord;
        async move { discord.server_of(&channel).await }
    };
    for _ in 0..2 {
        assert_eq!(server_of("11").await.unwrap(), Some(GUILD.to_owned()));
        assert_eq!(server_of("12").await.unwrap(), None, "a DM");
        assert!(matches!(server_of("13").await, Err(PortError::Rejected { .. })), "hidden");
        assert!(matches!(server_of("14").await, Err(PortError::Backend { .. })), "a bad token is no answer");
    }
    let requests = api.received_requests().await.unwrap_or_default();
    let asked = |id: &str| requests.iter().filter(|r| r.url.path() == format!("/channels/{id}")).count();
    assert_eq!((asked("11"), asked("12"), asked("13")), (2, 2, 2), "asked each time: the ledger keeps answers");
}

/// `nick: text` calls a member by the name Discord shows for them (their server nick),
/// on any line, as a mention would: the question is theirs, not kuuki's (issue 34).
#[tokio::test]
async fn a_line_opening_with_a_members_nick_is_for_that_member() {
    let w = World::start(ANSWER).await;
    let mut nel = message(&w.id_now(), "111", "morning all");
    nel["author"] = json!({"id": "111", "username": "nel_x", "global_name": "Nelson"});
    nel["member"] = json!({"nick": "nel"});
    assert_eq!(w.relay("MESSAGE_CREATE", nel, &[]).await.status(), 200);
    w.run_for(60.0).await;
    let asked = w.id_now();
    assert_eq!(
        w.relay("MESSAGE_CREATE", message(&asked, ALICE, "quick one\nnel: is the deploy done?"), &[]).await.status(),
        200
    );
    w.run_for(60.0).await;
    let judged: Vec<_> = w
        .log
        .take()
        .into_iter()
        .filter_map(|e| match e.kind {
            kuuki::domain::EventKind::Judge { breakdown, reason, .. } if e.ts.as_str() == asked => {
                Some((breakdown, reason))
            }
            _ => None,
        })
        .collect();
    let (breakdown, reason) = judged.first().expect("alice's question is judged");
    assert_eq!(breakdown.get("addressed_to_other"), Some(&-60), "{judged:?}");
    assert!(reason.contains("for nel"), "{reason}");
}

#[tokio::test]
async fn anyone_may_ask_kuuki_to_be_quieter_and_only_a_manager_may_reset_its_talkativeness() {
    let w = World::start(ANSWER).await;
    let channel = ChannelId(CHANNEL.into());
    let content = |v: Value| v["data"]["content"].as_str().unwrap().to_owned();
    let offset = || async {
        let state = w.deps.channels.channel_state(&channel).await.unwrap();
        state.talkativeness.offset_at(w.clock.now(), &w.deps.settings.talkativeness.limits)
    };
    let quieter =
        content(w.interaction(&command_with_permissions("quieter", json!([]), "3072")).await.json().await.unwrap());
    assert!(quieter.contains("less often here"), "{quieter}");
    assert_eq!(offset().await, -10.0);
    let reset = json!([{"name": "action", "type": 3, "value": "reset"}]);
    let refused = content(
        w.interaction(&command_with_permissions("talkativeness", reset.clone(), "3072")).await.json().await.unwrap(),
    );
    assert!(refused.starts_with("Sorry, only members with the Manage Channels permission"), "{refused}");
    assert_eq!(offset().await, -10.0, "refused, so unchanged");
    let shown = content(w.interaction(&command("talkativeness", json!([]))).await.json().await.unwrap());
    assert!(shown.contains("Talkativeness here: -10") && shown.contains("- quieter (-10, "), "{shown}");
    let done = content(
        w.interaction(&command_with_permissions("talkativeness", reset, MANAGE_CHANNELS)).await.json().await.unwrap(),
    );
    assert!(done.starts_with("Talkativeness reset here (it was -10, now 0)"), "{done}");
    assert_eq!(offset().await, 0.0);
    // The registered command offers them.
    let names: Vec<String> = kuuki::ingest::discord::command_definitions()[0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["name"].as_str().unwrap().to_owned())
        .collect();
    for name in ["quieter", "louder", "talkativeness"] {
        assert!(names.iter().any(|n| n == name), "{names:?}");
    }
}

#[tokio::test]
async fn reactions_relayed_from_the_gateway_move_kuukis_talkativeness_once_each() {
    let w = World::start(ANSWER).await;
    let channel = ChannelId(CHANNEL.into());
    w.relay("MESSAGE_CREATE", message(&w.id_now(), ALICE, &format!("<@{BOT}> where is the runbook?")), &[]).await;
    w.run_for(10.0).await;
    let stored = w.deps.messages.messages_after(&channel, None, 10).await.unwrap();
    let own = stored.iter().find(|m| m.author == kuuki::domain::Author::OwnBot).expect("kuuki answered");
    let reaction = |emoji: &str| {
        json!({"user_id": ALICE, "channel_id": CHANNEL, "message_id": own.ts.as_str(), "guild_id": GUILD,
            "emoji": {"id": null, "name": emoji}})
    };
    let offset = || async {
        let state = w.deps.channels.channel_state(&channel).await.unwrap();
        state.talkativeness.offset_at(w.clock.now(), &w.deps.settings.talkativeness.limits)
    };
    let retry = [("x-kuuki-relay-retry", "1".to_owned())];
    for extra in [&[][..], &retry[..]] {
        assert_eq!(w.relay("MESSAGE_REACTION_ADD", reaction("👎"), extra).await.status(), 200);
    }
    assert_eq!(offset().await, -6.0, "a replayed dispatch counts once");
    assert_eq!(w.relay("MESSAGE_REACTION_ADD", reaction("🎉"), &[]).await.status(), 200);
    assert_eq!(offset().await, -3.0);
    assert_eq!(w.relay("MESSAGE_REACTION_REMOVE", reaction("👎"), &[]).await.status(), 200);
    assert_eq!(offset().await, 3.0, "taken off: undone");
    // A dispatch kuuki cannot read is refused (the relay is ours: a bug to see).
    let bad =
        json!({"user_id": ALICE, "channel_id": CHANNEL, "message_id": "not-a-snowflake", "emoji": {"name": "👎"}});
    assert_eq!(w.relay("MESSAGE_REACTION_ADD", bad, &[]).await.status(), 400);
    assert_eq!(offset().await, 3.0);
}
