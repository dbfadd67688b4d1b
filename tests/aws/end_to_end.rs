//! kuuki end to end on the emulators: signed Slack requests over HTTP into the
//! ingress router, jobs through SQS into the judge and respond handlers, posts out
//! to a fake Slack API.

use std::collections::HashMap;
use std::sync::Arc;

use aws_lambda_events::event::sqs::{SqsEvent, SqsMessage};
use kuuki::adapters::aws::AwsAdapters;
use kuuki::adapters::aws::calls::CallCounter;
use kuuki::adapters::aws::dynamo::{TableNames, create_tables};
use kuuki::adapters::memory::MemoryLog;
use kuuki::adapters::slack::{SigningSecret, SlackClient, SlackIdentity};
use kuuki::adapters::system::SystemClock;
use kuuki::budget::JobKind;
use kuuki::config::Settings;
use kuuki::deps::Deps;
use kuuki::domain::{ChannelId, Job, UserId, Workspace};
use kuuki::workspaces::Workspaces;
use kuuki_e2e::slack_world::{BOT_USER, SlackWorld, envelope, message};
use kuuki_lambda::handle_sqs_event;
use serde_json::json;

use super::{emulators, queue_urls, sdk, unique};

pub(crate) struct World {
    pub(super) deps: Arc<Deps>,
    pub(super) sqs: aws_sdk_sqs::Client,
    pub(super) urls: kuuki::adapters::aws::sqs::QueueUrls,
    /// The workers' SQS adapter (counted), which settles failed messages.
    pub(super) queue: Arc<kuuki::adapters::aws::sqs::SqsQueue>,
    pub(super) slack_api: wiremock::MockServer,
    base_url: String,
    pub(super) counter: CallCounter,
    secret: SigningSecret,
    pub(super) tables: TableNames,
    /// The memory jobs (SUMMARIZE, REFLECT) queued (SQS holds a delayed one out of
    /// a test's reach until its delay is over).
    memory_jobs: Arc<RecordingQueue>,
    /// The model, when the cost world has one: its calls are counted (a worker
    /// waits for each, and Lambda bills the wait).
    pub(super) model: Option<Arc<kuuki_e2e::RecordingLlm>>,
    /// Serving many workspaces: the one the cost conversation is in.
    workspace: Option<&'static str>,
}

/// The queue port, passing every job on and keeping each memory job it queued.
struct RecordingQueue {
    inner: Arc<dyn kuuki::ports::Queue>,
    memory_jobs: std::sync::Mutex<Vec<Job>>,
}

#[async_trait::async_trait]
impl kuuki::ports::Queue for RecordingQueue {
    async fn enqueue(&self, job: Job, delay: std::time::Duration) -> kuuki::ports::PortResult<()> {
        let memory = matches!(job, Job::Summarize { .. } | Job::Reflect { .. }).then(|| job.clone());
        self.inner.enqueue(job, delay).await?;
        self.memory_jobs.lock().unwrap().extend(memory);
        Ok(())
    }

    async fn enqueue_all(&self, jobs: Vec<(Job, std::time::Duration)>) -> kuuki::ports::PortResult<()> {
        let memory: Vec<Job> = jobs
            .iter()
            .filter(|(job, _)| matches!(job, Job::Summarize { .. } | Job::Reflect { .. }))
            .map(|(job, _)| job.clone())
            .collect();
        self.inner.enqueue_all(jobs).await?;
        self.memory_jobs.lock().unwrap().extend(memory);
        Ok(())
    }
}

pub(super) async fn world_for_costs(dynamo: &str, moto: &str) -> World {
    world(dynamo, moto, &[("JUDGE_MIN_WAIT_SECONDS", "0")]).await
}

/// The cost world serving many Slack workspaces, the conversation's among them: each
/// message pays for no installation read (it is read once and kept).
pub(super) async fn world_for_costs_serving_many(dynamo: &str, moto: &str) -> World {
    let log = Arc::new(MemoryLog::default());
    let (mut w, workspaces) = world_serving(dynamo, moto, &[("JUDGE_MIN_WAIT_SECONDS", "0")], None, log, true).await;
    let workspaces = workspaces.expect("many workspaces");
    SlackWorld::installed(&workspaces, kuuki_e2e::slack_world::TEAM, BOT_USER, "xoxb-e2e").await;
    SlackWorld::installed(&workspaces, "T0OTHER", "UOTHERBOT", "xoxb-other").await;
    // A warm instance has read the installation already.
    workspaces.installed(kuuki_e2e::slack_world::TEAM).await.unwrap().expect("installed");
    w.workspace = Some(kuuki_e2e::slack_world::TEAM);
    w
}

/// The cost world with the questions' pick-ups in reach: SQS holds a job delayed by
/// `UNANSWERED_QUESTION_WAIT_SECONDS` (120 s) out of a test's reach, so they come at
/// once here (and the JUDGE of a question then decides at once too).
pub(super) async fn world_for_costs_with_pick_ups(dynamo: &str, moto: &str) -> World {
    world(dynamo, moto, &[("JUDGE_MIN_WAIT_SECONDS", "0"), ("UNANSWERED_QUESTION_WAIT_SECONDS", "0")]).await
}

/// The cost world with a model (a script: the judge declines, answers are canned),
/// so the LLM judge and the memory triggers run as they do in production.
pub(super) async fn world_for_costs_with_llm(dynamo: &str, moto: &str) -> World {
    let script = r#"{"role": "judge", "reply": {"should_respond": false, "reason": "no need", "confidence": 0.7, "conversation_state": "active"}, "repeat": true}
{"role": "generate", "reply": "手順は wiki にあります。", "repeat": true}
{"role": "summarize", "match": "workspace", "reply": {"history": "開発チームのワークスペース", "recent_events": "デプロイの準備"}, "repeat": true}
{"role": "summarize", "reply": {"summary": "デプロイの手順を確認し、昼食の相談をした。", "history": "デプロイと日々の相談", "mood": "和やか", "topic_keywords": ["デプロイ", "昼食"], "active_users": ["U0", "U1", "U2"]}, "repeat": true}
{"role": "reflect", "reply": {"facts": [{"content": "デプロイの手順は wiki にある", "keywords": ["デプロイ", "手順", "wiki"], "source_users": ["U1"], "confidence": 0.8, "shareable": true}], "profiles": [{"user": "U1", "tags": ["デプロイ担当"], "summary": "デプロイを見ている"}]}, "repeat": true}"#;
    let model = kuuki_e2e::RecordingLlm::new(script);
    let mut w = world_with(dynamo, moto, &[("JUDGE_MIN_WAIT_SECONDS", "0")], Some(model.clone())).await;
    w.model = Some(model);
    w
}

async fn world(dynamo: &str, moto: &str, settings: &[(&str, &str)]) -> World {
    world_with(dynamo, moto, settings, None).await
}

async fn world_with(
    dynamo: &str,
    moto: &str,
    settings: &[(&str, &str)],
    llm: Option<Arc<dyn kuuki::ports::Llm>>,
) -> World {
    world_logged(dynamo, moto, settings, llm, Arc::new(MemoryLog::default())).await
}

/// Like [`world_with`], with the decision log `log` (a Lambda's `EmfLog`).
pub(super) async fn world_logged(
    dynamo: &str,
    moto: &str,
    settings: &[(&str, &str)],
    llm: Option<Arc<dyn kuuki::ports::Llm>>,
    log: Arc<dyn kuuki::ports::DecisionLog>,
) -> World {
    world_serving(dynamo, moto, settings, llm, log, false).await.0
}

/// The world; `many`: serving many Slack workspaces (issue 45), none installed yet,
/// their installations in the channels table.
pub(super) async fn world_serving(
    dynamo: &str,
    moto: &str,
    settings: &[(&str, &str)],
    llm: Option<Arc<dyn kuuki::ports::Llm>>,
    log: Arc<dyn kuuki::ports::DecisionLog>,
    many: bool,
) -> (World, Option<Arc<Workspaces>>) {
    let tables = TableNames {
        messages: unique("messages"),
        channels: unique("channels"),
        ledger: unique("ledger"),
        facts: unique("facts"),
    };
    create_tables(&aws_sdk_dynamodb::Client::new(&sdk(dynamo).await), &tables).await.unwrap();
    let (sqs, urls) = queue_urls(moto).await;
    let mut vars: HashMap<String, String> = settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    for (k, v) in [
        ("MESSAGES_TABLE", &tables.messages),
        ("CHANNELS_TABLE", &tables.channels),
        ("LEDGER_TABLE", &tables.ledger),
        ("JUDGE_QUEUE_URL", &urls.judge),
        ("RESPOND_QUEUE_URL", &urls.respond),
        ("SUMMARIZE_QUEUE_URL", &urls.summarize),
        ("REFLECT_QUEUE_URL", &urls.reflect),
        ("FORGET_QUEUE_URL", &urls.forget),
        ("FACTS_TABLE", &tables.facts),
    ] {
        vars.insert(k.into(), v.clone());
    }
    vars.insert("SLACK_SIGNING_SECRET".into(), "e2e-secret".into());
    let settings = Settings::from_vars(&vars).unwrap().for_llm(llm.is_some());
    // The stack's schedule group (the template makes it): long delays (a forget's
    // second look) are scheduled there. Made once per moto; a second make is refused.
    let scheduler = aws_sdk_scheduler::Client::new(&sdk(moto).await);
    let _ = scheduler.create_schedule_group().name(&settings.storage.schedule_group).send().await;
    let counter = CallCounter::default();
    let aws = AwsAdapters::build_counted(&settings, Arc::new(SystemClock), Some(&counter)).await;
    let slack_api = wiremock::MockServer::start().await;
    SlackWorld::mount_default_api(&slack_api).await;
    let client = SlackClient::new(&slack_api.uri(), "xoxb-e2e");
    let workspaces = many.then(|| {
        let sealer = Arc::new(kuuki::adapters::contract::test_sealer());
        Arc::new(Workspaces::new(aws.store.clone(), sealer, aws.clock.clone()))
    });
    let chat: Arc<dyn kuuki::ports::Chat> = match &workspaces {
        Some(workspaces) => {
            Arc::new(kuuki::adapters::slack::workspaces::SlackWorkspaces::new(client, workspaces.clone()))
        }
        None => Arc::new(client),
    };
    let persona = settings.persona(None);
    let mut adapters = aws.adapters(chat, llm, log);
    let memory_jobs = Arc::new(RecordingQueue { inner: adapters.queue, memory_jobs: Default::default() });
    adapters.queue = memory_jobs.clone();
    let deps = Deps::new(settings, persona, UserId(BOT_USER.into()), adapters, 3);
    let (deps, slack) = match &workspaces {
        Some(workspaces) => {
            let access = kuuki::ingest::slack::SlackAccess::Many(workspaces.clone());
            let slack = kuuki_ingress::SlackIngress { secret: SigningSecret::new("e2e-secret"), access, install: None };
            (Arc::new(deps.with_workspaces(workspaces.clone())), slack)
        }
        None => {
            let me = SlackIdentity { user_id: BOT_USER.into(), bot_id: None };
            (Arc::new(deps), kuuki_ingress::SlackIngress::one(SigningSecret::new("e2e-secret"), me))
        }
    };
    let ingress =
        Arc::new(kuuki_ingress::Ingress { deps: deps.clone(), slack: Some(slack), discord: None, metrics_for: None });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base_url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, kuuki_ingress::app(ingress)).await.unwrap() });
    let queue = aws.queue.clone();
    let secret = SigningSecret::new("e2e-secret");
    let world = World {
        deps,
        sqs,
        urls,
        queue,
        slack_api,
        base_url,
        counter,
        secret,
        tables,
        memory_jobs,
        model: None,
        workspace: None,
    };
    (world, workspaces)
}

impl World {
    /// The cost conversation's channel as the store keys it.
    pub(super) fn cost_channel(&self) -> ChannelId {
        match self.workspace {
            Some(team) => ChannelId::slack_in(team, "C0COST"),
            None => ChannelId("C0COST".into()),
        }
    }

    pub(super) async fn deliver_text(&self, text: &str, n: u32) -> u16 {
        self.deliver_text_in(text, n, None).await
    }

    /// Like [`World::deliver_text`], as a reply in the thread begun by `root` when given.
    pub(super) async fn deliver_text_in(&self, text: &str, n: u32, root: Option<&str>) -> u16 {
        let mut event = message("C0COST", &format!("U{}", n % 3), text, &now_ts(n + 100));
        if let Some(root) = root {
            event["thread_ts"] = json!(root);
        }
        self.deliver(event, false).await
    }

    async fn deliver(&self, event: serde_json::Value, retry: bool) -> u16 {
        self.deliver_body(envelope(event).to_string(), retry).await
    }

    /// `event` from Slack workspace `team`, delivered for its installation's bot `bot`.
    pub(super) async fn deliver_in(&self, team: &str, bot: &str, event: serde_json::Value) -> u16 {
        let mut body = envelope(event);
        body["team_id"] = json!(team);
        body["authorizations"] =
            json!([{"team_id": team, "user_id": bot, "is_bot": true, "is_enterprise_install": false}]);
        self.deliver_body(body.to_string(), false).await
    }

    async fn deliver_body(&self, body: String, retry: bool) -> u16 {
        let timestamp =
            (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()).to_string();
        let mut request = reqwest::Client::new()
            .post(format!("{}/slack/events", self.base_url))
            .header("content-type", "application/json")
            .header("x-slack-request-timestamp", &timestamp)
            .header("x-slack-signature", self.secret.sign(&timestamp, body.as_bytes()))
            .body(body);
        if retry {
            request = request.header("x-slack-retry-num", "1");
        }
        self.counter.acting_as("IngressFunction");
        let status = request.send().await.unwrap().status().as_u16();
        self.counter.acting_as("");
        status
    }

    /// Fails unless the SAM template's policy of each function allows every
    /// DynamoDB action it was seen to make, on that table (or index): the emulators
    /// check no permissions, AWS does.
    pub(super) fn assert_the_template_allows_what_was_done(&self) {
        let template: serde_yaml::Value = serde_yaml::from_str(
            &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/template.yaml")).unwrap(),
        )
        .unwrap();
        // The template's name for what a call was on, as its policies write it.
        let logical = |resource: &str| match resource {
            t if t == self.tables.messages => "MessagesTable",
            t if t == self.tables.channels => "ChannelsTable",
            t if t == self.tables.ledger => "LedgerTable",
            t if t == self.tables.facts => "FactsTable",
            q if q == self.urls.judge => "JudgeQueue",
            q if q == self.urls.respond => "RespondQueue",
            q if q == self.urls.summarize => "SummarizeQueue",
            q if q == self.urls.reflect => "ReflectQueue",
            q if q == self.urls.forget => "ForgetQueue",
            other => panic!("a table or queue the template does not know: {other}"),
        };
        let accesses = self.counter.accesses();
        assert!(accesses.iter().any(|a| !a.function.is_empty()), "the functions' calls were seen");
        let mut missing = Vec::new();
        for access in accesses.iter().filter(|a| !a.function.is_empty()) {
            // Schedules are named per job; the policy allows the group's.
            let resource = if access.resource == "schedule" {
                "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${ScheduleGroup}/*"
                    .to_owned()
            } else {
                let name = logical(&access.resource);
                match &access.index {
                    Some(index) => format!("${{{name}.Arn}}/index/{index}"),
                    None => format!("{name}.Arn"),
                }
            };
            let statements: Vec<serde_yaml::Value> = template["Resources"][&access.function]["Properties"]["Policies"]
                .as_sequence()
                .unwrap_or_else(|| panic!("{} has policies", access.function))
                .iter()
                .flat_map(|policy| policy["Statement"].as_sequence().cloned().unwrap_or_default())
                .collect();
            let allows = |action: &str, resource: &str| {
                statements.iter().any(|statement| {
                    let listed = |value: &serde_yaml::Value| -> Vec<String> {
                        let one = |v: &serde_yaml::Value| match v {
                            serde_yaml::Value::Tagged(tagged) => tagged.value.as_str().unwrap_or_default().to_owned(),
                            other => other.as_str().unwrap_or_default().to_owned(),
                        };
                        match value.as_sequence() {
                            Some(items) => items.iter().map(one).collect(),
                            None => vec![one(value)],
                        }
                    };
                    statement["Effect"] == "Allow"
                        && listed(&statement["Action"]).iter().any(|a| a == action)
                        && listed(&statement["Resource"]).iter().any(|r| r == resource)
                })
            };
            if !allows(&access.action, &resource) {
                missing.push(format!("{} {} on {resource}", access.function, access.action));
            }
            // A schedule is made with the role it will send as, which takes PassRole.
            if access.action == "scheduler:CreateSchedule" && !allows("iam:PassRole", "SchedulerRole.Arn") {
                missing.push(format!("{} iam:PassRole on SchedulerRole.Arn", access.function));
            }
        }
        assert!(missing.is_empty(), "infra/template.yaml does not allow what the functions do: {missing:#?}");
    }

    /// Makes the cost channel look like one kuuki has lived in for a while, so the
    /// measured capacity units are those of a mature channel, not an empty one
    /// (DynamoDB charges a read and a write by the item's size): a full window of
    /// earlier messages, a channel memory, and the kept interventions, each with a
    /// full excerpt (200 characters of Japanese, 600 bytes).
    pub(super) async fn mature_channel(&self) {
        use kuuki::domain::{
            Author, ChannelId, ChannelMemory, Intervention, Message, ResponseType, ThreadKey, Timestamp, Ts,
        };
        let channel = self.cost_channel();
        let now = self.deps.clock.now();
        let hours_ago = |hours: i64, i: i64| Timestamp(now.0 - hours * 3_600_000_000 + i * 1_000_000);
        let line = "デプロイの手順を確認して、ステージングで動かしてから本番に出します。";
        let mut newest = Ts::new("0.000000");
        for i in 0..self.deps.settings.memory.channel_buffer_size as i64 {
            let at = hours_ago(2, i);
            let message = Message {
                channel: channel.clone(),
                ts: Ts::from_timestamp(at),
                thread_root: None,
                user: UserId(format!("U{}", i % 3).into()),
                user_name: format!("user{}", i % 3),
                text: line.into(),
                author: Author::Human,
                replies_to_bot: false,
                replies_to: None,
                in_dm: false,
                private_channel: false,
                at,
            };
            self.deps.messages.put_message(&Arc::new(message.clone())).await.unwrap();
            newest = message.ts;
        }
        let memory = ChannelMemory {
            summary: line.repeat(12),
            history: line.repeat(12),
            mood: "落ち着いている".into(),
            topic_keywords: (0..10).map(|i| format!("話題{i}")).collect(),
            active_users: (0..5).map(|i| format!("U{i}")).collect(),
            updated_at: Some(hours_ago(2, 60)),
            // Summarized and reflected on up to the newest of them.
            watermark: Some(newest.clone()),
            ..ChannelMemory::default()
        };
        self.deps.channels.set_channel_memory(&channel, memory).await.unwrap();
        self.deps.channels.set_reflection_watermark(&channel, newest).await.unwrap();
        // A workspace of twenty channels, its memory refreshed ten minutes ago (a
        // refresh comes once in four summary periods for the whole workspace: not a
        // cost of this channel's messages), and facts learned here before.
        let workspace = kuuki::domain::WorkspaceMemory {
            history: line.repeat(12),
            recent_events: line.repeat(12),
            updated_at: Some(hours_ago(0, -600)),
            channel_lines: Vec::new(),
        };
        self.deps.channels.set_workspace_memory(Workspace::Shared, workspace).await.unwrap();
        for i in 0..20 {
            let other = ChannelId(format!("C0OTHER{i}").into());
            let other_line = kuuki::domain::ChannelLine {
                channel: other.clone(),
                line: line.chars().cycle().take(120).collect(),
                updated_at: hours_ago(1, i),
            };
            self.deps.channels.set_channel_line(&other, Some(other_line)).await.unwrap();
        }
        for i in 0..20 {
            let fact = kuuki::domain::Fact {
                id: format!("fact-{i}"),
                channel: channel.clone(),
                content: line.chars().cycle().take(60).collect(),
                keywords: (0..5).map(|k| format!("話題{k}")).collect(),
                source_users: vec![format!("U{}", i % 3)],
                confidence: 0.8,
                shareable: true,
                created_at: hours_ago(48, i),
                confirmed_at: hours_ago(48, i),
                strength: 1,
                source_messages: Vec::new(),
                embedding: None,
            };
            self.deps.facts.put_fact(&fact).await.unwrap();
        }
        let excerpt: String = line.chars().cycle().take(200).collect();
        for i in 0..kuuki::ports::ChannelState::KEPT_INTERVENTIONS as i64 {
            let intervention = Intervention {
                at: hours_ago(4, i * 60),
                thread: ThreadKey::top_level(channel.clone()),
                response_type: ResponseType::FullResponse,
                excerpt: excerpt.clone(),
                facts: Vec::new(),
                unasked_post: None,
                pick_up: false,
            };
            self.deps.channels.record_intervention(&channel, intervention).await.unwrap();
        }
    }

    /// A busy channel whose talk is in threads: after [`World::mature_channel`], three
    /// threads begun 25 minutes ago and 60 replies in them over the last 20 minutes,
    /// so the newest `CHANNEL_BUFFER_SIZE` messages are all replies and reach back
    /// less than `CHANNEL_BUFFER_TTL_MINUTES`. Returns the threads' roots.
    pub(super) async fn busy_threads(&self) -> Vec<kuuki::domain::Ts> {
        use kuuki::domain::{Author, Message, Timestamp, Ts};
        let channel = self.cost_channel();
        let now = self.deps.clock.now();
        let minutes_ago = |minutes: i64, i: i64| Timestamp(now.0 - minutes * 60_000_000 + i * 1_000_000);
        let line = "ステージングで確認しました。ログも見ておきます。";
        let put = |at: Timestamp, thread_root: Option<Ts>, i: i64| {
            let message = Message {
                channel: channel.clone(),
                ts: Ts::from_timestamp(at),
                thread_root,
                user: UserId(format!("U{}", i % 3).into()),
                user_name: format!("user{}", i % 3),
                text: line.into(),
                author: Author::Human,
                replies_to_bot: false,
                replies_to: None,
                in_dm: false,
                private_channel: false,
                at,
            };
            async move { self.deps.messages.put_message(&Arc::new(message)).await.unwrap() }
        };
        let roots: Vec<Ts> = (0..3).map(|i| Ts::from_timestamp(minutes_ago(25, i))).collect();
        for i in 0..3 {
            put(minutes_ago(25, i), None, i).await;
        }
        for i in 0..60 {
            put(minutes_ago(20, i * 15), Some(roots[i as usize % 3].clone()), i).await;
        }
        roots
    }

    /// How many messages wait on the queue at `url` for their delay to pass.
    pub(super) async fn delayed(&self, url: &str) -> usize {
        use aws_sdk_sqs::types::QueueAttributeName;
        let out = self
            .sqs
            .get_queue_attributes()
            .queue_url(url)
            .attribute_names(QueueAttributeName::ApproximateNumberOfMessagesDelayed)
            .send()
            .await
            .unwrap();
        let attributes = out.attributes.unwrap_or_default();
        attributes[&QueueAttributeName::ApproximateNumberOfMessagesDelayed].parse().unwrap()
    }

    /// The `kind` jobs queued so far (SUMMARIZE or REFLECT), taken.
    pub(super) fn take_queued(&self, kind: JobKind) -> Vec<Job> {
        let mut jobs = self.memory_jobs.memory_jobs.lock().unwrap();
        let (taken, left) = std::mem::take(&mut *jobs).into_iter().partition(|job| kind.runs(job));
        *jobs = left;
        taken
    }

    /// Runs `job` as the worker of its `kind` runs it. Returns the failed records.
    pub(super) async fn run_as_worker(&self, kind: JobKind, job: Job) -> usize {
        self.counter.acting_as(match kind {
            JobKind::Summarize => "SummarizeFunction",
            JobKind::Reflect => "ReflectFunction",
            _ => unreachable!("memory work only"),
        });
        let response = handle_sqs_event(&self.deps, &self.queue, kind, event_of(&[job]), None).await;
        self.counter.acting_as("");
        response.batch_item_failures.len()
    }

    /// What SQS would hand the Lambda: the queue's visible messages as an event,
    /// visible again at once (so a test can deliver them again when it likes).
    pub(super) async fn receive(&self, url: &str) -> SqsEvent {
        self.receive_for(url, 0).await
    }

    /// Like [`World::receive`], invisible for `visibility` seconds as a Lambda poller
    /// takes them (the queue's visibility timeout).
    pub(super) async fn receive_for(&self, url: &str, visibility: i32) -> SqsEvent {
        use aws_sdk_sqs::types::MessageSystemAttributeName;
        let out = self
            .sqs
            .receive_message()
            .queue_url(url)
            .max_number_of_messages(10)
            .visibility_timeout(visibility)
            .message_system_attribute_names(MessageSystemAttributeName::ApproximateReceiveCount)
            .send()
            .await
            .unwrap();
        let mut event = SqsEvent::default();
        event.records = out
            .messages
            .unwrap_or_default()
            .into_iter()
            .map(|m| {
                let mut record = SqsMessage::default();
                record.message_id = m.message_id;
                record.receipt_handle = m.receipt_handle;
                // As Lambda names the queue a record came from (moto's account and region).
                record.event_source_arn =
                    Some(format!("arn:aws:sqs:us-east-1:123456789012:{}", url.rsplit('/').next().unwrap()));
                record.body = m.body;
                record.attributes = m
                    .attributes
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(name, value)| (name.as_str().to_owned(), value))
                    .collect();
                record
            })
            .collect();
        event
    }

    /// Hands the judge and respond queues' messages to the workers, deleting the
    /// ones that succeeded as Lambda's event source mapping does, until both are
    /// empty (at most `rounds` times). Returns the failed records and the records
    /// handed to the workers.
    pub(super) async fn drain(&self, rounds: usize) -> (usize, usize) {
        let (mut failed, mut jobs) = (0, 0);
        for _ in 0..rounds {
            let mut handled = 0;
            for kind in [JobKind::Judge, JobKind::Respond] {
                let url = self.urls.for_kind(kind);
                let event = self.receive(url).await;
                if event.records.is_empty() {
                    continue;
                }
                handled += event.records.len();
                jobs += event.records.len();
                self.counter.acting_as(match kind {
                    JobKind::Judge => "JudgeFunction",
                    _ => "RespondFunction",
                });
                let response = handle_sqs_event(&self.deps, &self.queue, kind, event.clone(), None).await;
                self.counter.acting_as("");
                failed += response.batch_item_failures.len();
                for record in &event.records {
                    let ok = !response
                        .batch_item_failures
                        .iter()
                        .any(|f| Some(&f.item_identifier) == record.message_id.as_ref());
                    if ok {
                        let handle = record.receipt_handle.as_deref().expect("a receipt handle");
                        self.sqs.delete_message().queue_url(url).receipt_handle(handle).send().await.unwrap();
                    }
                }
            }
            if handled == 0 {
                break;
            }
        }
        (failed, jobs)
    }

    pub(super) async fn slack_calls(&self, api: &str) -> Vec<serde_json::Value> {
        self.slack_api
            .received_requests()
            .await
            .unwrap_or_default()
            .into_iter()
            .filter(|r| r.url.path() == format!("/{api}"))
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect()
    }
}

pub(super) fn now_ts(n: u32) -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    format!("{secs}.{n:06}")
}

/// An SQS event of `jobs`, as Lambda's poller would hand it over.
fn event_of(jobs: &[Job]) -> SqsEvent {
    let mut event = SqsEvent::default();
    event.records = jobs
        .iter()
        .enumerate()
        .map(|(i, job)| {
            let mut record = SqsMessage::default();
            record.message_id = Some(format!("m{i}"));
            record.body = Some(kuuki::adapters::aws::sqs::encode_job(job));
            record
        })
        .collect();
    event
}

/// The memory workers do their work on DynamoDB and SQS, and the template lets each
/// do exactly that (the emulators check no permissions; AWS does).
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn the_memory_workers_run_within_their_policies() {
    let (dynamo, moto) = emulators("the_memory_workers_run_within_their_policies");
    let script = r#"{"role": "judge", "reply": {"should_respond": false, "reason": "no need", "confidence": 0.7, "conversation_state": "active"}, "repeat": true}
{"role": "summarize", "match": "workspace", "reply": {"history": "deploys happen here", "recent_events": "a deploy stalled"}, "repeat": true}
{"role": "summarize", "reply": {"summary": "a deploy stalled on a lock", "history": "deploys", "mood": "calm", "topic_keywords": ["deploy"], "active_users": ["U0", "U1"]}, "repeat": true}
{"role": "reflect", "reply": {"facts": [{"content": "Staging deploys can stall on the migration lock", "keywords": ["staging", "deploy", "lock"], "source_users": ["U0"], "confidence": 0.8, "shareable": true}], "profiles": [{"user": "U1", "tags": ["infra"], "summary": "fixed the lock"}]}, "repeat": true}"#;
    let llm: Arc<dyn kuuki::ports::Llm> = Arc::new(kuuki::adapters::llm::ScriptedLlm::parse(script).unwrap());
    let settings = [("JUDGE_MIN_WAIT_SECONDS", "0"), ("REFLECTION_MIN_MESSAGES", "3")];
    let w = world_with(&dynamo, &moto, &settings, Some(llm)).await;
    for (i, text) in
        ["the staging deploy stalled", "it waits on the migration lock", "fixed, it runs"].iter().enumerate()
    {
        assert_eq!(w.deliver_text(text, i as u32).await, 200);
    }
    let channel = ChannelId("C0COST".into());
    let newest = w.deps.messages.channel_window(&channel, 1).await.unwrap().messages[0].ts.clone();
    for (kind, function, job) in [
        (JobKind::Summarize, "SummarizeFunction", Job::Summarize { channel: channel.clone(), ts: newest.clone() }),
        (JobKind::Reflect, "ReflectFunction", Job::Reflect { channel: channel.clone(), ts: newest.clone() }),
        (JobKind::Reflect, "ReflectFunction", Job::SweepFacts),
    ] {
        w.counter.acting_as(function);
        let response = handle_sqs_event(&w.deps, &w.queue, kind, event_of(std::slice::from_ref(&job)), None).await;
        w.counter.acting_as("");
        assert!(response.batch_item_failures.is_empty(), "{job:?} failed");
    }
    let state = w.deps.channels.channel_state(&channel).await.unwrap();
    assert_eq!(state.memory.summary, "a deploy stalled on a lock", "the summary was stored");
    assert_eq!(w.deps.facts.facts(&channel).await.unwrap().len(), 1, "the reflection's fact was stored");
    w.assert_the_template_allows_what_was_done();
}

/// What a Lambda writes to its log: the decision records (each with its EMF line),
/// and the tracing lines, into one buffer.
#[derive(Clone, Default)]
struct LambdaLog(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LambdaLog {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LambdaLog {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Messages with a known phrase through the ingress and every worker's Lambda handler
/// (the judge's verdict, the answer, the summary, the reflection's fact and note carry
/// it too): the Lambdas' log keeps ids and decisions, never the words. With
/// `LogText::Kept` (LOG_MESSAGE_TEXT=true) the same run logs them.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn the_lambdas_logs_keep_no_words() {
    let (dynamo, moto) = emulators("the_lambdas_logs_keep_no_words");
    const PHRASE: &str = "periwinkle-otter";
    let script = format!(
        r#"{{"role": "judge", "reply": {{"should_respond": true, "reason": "they ask about {PHRASE}", "confidence": 0.9, "conversation_state": "active"}}, "repeat": true}}
{{"role": "generate", "reply": "The {PHRASE} runbook is on the wiki.", "repeat": true}}
{{"role": "summarize", "match": "workspace", "reply": {{"history": "{PHRASE} history", "recent_events": "{PHRASE} events"}}, "repeat": true}}
{{"role": "summarize", "reply": {{"summary": "talked about {PHRASE}", "history": "{PHRASE}", "mood": "{PHRASE}", "topic_keywords": ["{PHRASE}"], "active_users": ["U0", "U1"]}}, "repeat": true}}
{{"role": "reflect", "reply": {{"facts": [{{"content": "{PHRASE} owns the deploys", "keywords": ["{PHRASE}"], "source_users": ["U0"], "confidence": 0.8, "shareable": true}}], "profiles": [{{"user": "U1", "tags": ["{PHRASE}"], "summary": "asks about {PHRASE}"}}]}}, "repeat": true}}"#
    );
    for text in [kuuki::domain::LogText::Withheld, kuuki::domain::LogText::Kept] {
        let log = LambdaLog::default();
        let subscriber = tracing_subscriber::fmt().json().with_writer({
            let log = log.clone();
            move || log.clone()
        });
        let _tracing = tracing::subscriber::set_default(subscriber.finish());
        let llm: Arc<dyn kuuki::ports::Llm> = Arc::new(kuuki::adapters::llm::ScriptedLlm::parse(&script).unwrap());
        let records = Arc::new(kuuki::adapters::aws::emf::EmfLog::new(log.clone(), "kuuki-fn", text));
        let settings = [("JUDGE_MIN_WAIT_SECONDS", "0"), ("REFLECTION_MIN_MESSAGES", "3")];
        let w = world_logged(&dynamo, &moto, &settings, Some(llm), records).await;
        for (i, line) in
            [format!("who owns {PHRASE}?"), format!("I think {PHRASE} does"), format!("<@UKUUKI> is {PHRASE} on call?")]
                .iter()
                .enumerate()
        {
            assert_eq!(w.deliver_text(line, i as u32).await, 200);
        }
        let (failed, _) = w.drain(6).await;
        assert_eq!(failed, 0);
        // A question to the room after the answer: judged by the rules.
        assert_eq!(w.deliver_text(&format!("does {PHRASE} page anyone?"), 3).await, 200);
        assert_eq!(w.drain(6).await.0, 0);
        let channel = w.cost_channel();
        let newest = w.deps.messages.channel_window(&channel, 1).await.unwrap().messages[0].ts.clone();
        for (kind, job) in [
            (JobKind::Summarize, Job::Summarize { channel: channel.clone(), ts: newest.clone() }),
            (JobKind::Reflect, Job::Reflect { channel: channel.clone(), ts: newest.clone() }),
        ] {
            assert_eq!(w.run_as_worker(kind, job).await, 0);
        }
        assert!(
            w.slack_calls("chat.postMessage").await.iter().any(|p| p["text"].as_str().unwrap().contains(PHRASE)),
            "kuuki answered with the phrase: {}",
            log.text()
        );
        let logged = log.text();
        for kind in ["message", "judge", "respond", "summary", "reflect"] {
            assert!(logged.contains(&format!("\"kind\":\"{kind}\"")), "no {kind} record in:\n{logged}");
        }
        match text {
            kuuki::domain::LogText::Withheld => assert!(!logged.contains(PHRASE), "words in the logs:\n{logged}"),
            kuuki::domain::LogText::Kept => assert!(logged.contains(PHRASE), "LOG_MESSAGE_TEXT keeps the words"),
        }
    }
}

#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn a_mention_delivered_three_times_and_redelivered_by_sqs_posts_once() {
    let (dynamo, moto) = emulators("a_mention_delivered_three_times_and_redelivered_by_sqs_posts_once");
    let w = world(&dynamo, &moto, &[]).await;
    let ts = now_ts(7);
    let mention = message("C0E2E", "UALICE", "<@UKUUKI> 今日のリリースは？", &ts);
    let mut app_mention = mention.clone();
    app_mention["type"] = json!("app_mention");
    w.counter.reset();
    assert_eq!(w.deliver(mention.clone(), false).await, 200);
    let first_delivery = w.counter.calls();
    assert_eq!(w.deliver(app_mention, false).await, 200);
    assert_eq!(w.deliver(mention, true).await, 200);
    assert_eq!(
        first_delivery.values().sum::<u64>(),
        3,
        "one conditional put, one SQS send and one counter update per new message: {first_delivery:?}"
    );

    // The respond queue holds the job (twice: the retry re-queued it).
    let event = w.receive(&w.urls.respond).await;
    assert!(!event.records.is_empty());
    // The batch's records run at once: one answers; a copy that meets its claim
    // still held fails for a retry instead of being dropped.
    let response = handle_sqs_event(&w.deps, &w.queue, JobKind::Respond, event.clone(), None).await;
    assert!(response.batch_item_failures.len() < event.records.len(), "one copy answered");
    // SQS delivers the same records again (a visibility timeout ran out): every copy
    // finds the answer done.
    let again = handle_sqs_event(&w.deps, &w.queue, JobKind::Respond, event, None).await;
    assert!(again.batch_item_failures.is_empty());
    let posts = w.slack_calls("chat.postMessage").await;
    assert_eq!(posts.len(), 1, "{posts:?}");
    assert_eq!(posts[0]["channel"], "C0E2E");
}

/// A job that fails because Slack is busy comes back after the first redelivery
/// delay (30 s), not at the queue's visibility timeout (24 minutes): the worker
/// Lambda tells SQS, and its policy lets it.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn a_job_that_failed_on_a_busy_slack_comes_back_after_the_redelivery_delay() {
    let (dynamo, moto) = emulators("a_job_that_failed_on_a_busy_slack_comes_back_after_the_redelivery_delay");
    let w = world(&dynamo, &moto, &[]).await;
    // A 429 asking for longer than a chat call waits (15 s, over CHAT_TIMEOUT_SECONDS):
    // short ones are waited out within the delivery; this one fails it.
    wiremock::Mock::given(wiremock::matchers::path("/chat.postMessage"))
        .respond_with(wiremock::ResponseTemplate::new(429).insert_header("retry-after", "15"))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&w.slack_api)
        .await;
    // The next delivery looks for a post an earlier one may have made: none.
    wiremock::Mock::given(wiremock::matchers::path("/conversations.history"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_json(json!({"ok": true, "messages": []})))
        .mount(&w.slack_api)
        .await;
    assert_eq!(w.deliver(message("C0BUSY", "UALICE", "<@UKUUKI> hi", &now_ts(4)), false).await, 200);
    let visibility = w.deps.budget.visibility_timeout().as_secs() as i32;
    let event = w.receive_for(&w.urls.respond, visibility).await;
    assert_eq!(event.records.len(), 1);
    w.counter.acting_as("RespondFunction");
    let response = handle_sqs_event(&w.deps, &w.queue, JobKind::Respond, event, None).await;
    w.counter.acting_as("");
    assert_eq!(response.batch_item_failures.len(), 1, "Slack was busy: the job failed");
    // Back after the first redelivery delay (30 s; Slack's 15 s is sooner, and a limit
    // that outlasted a wait inside the call would spend the deliveries), not after
    // the visibility timeout.
    let failed_at = std::time::Instant::now();
    let again = loop {
        let event = w.receive_for(&w.urls.respond, visibility).await;
        if !event.records.is_empty() {
            break event;
        }
        assert!(failed_at.elapsed().as_secs() < 45, "not back within 45 s");
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    let back_after = failed_at.elapsed().as_secs_f64();
    assert!((28.0..45.0).contains(&back_after), "back after {back_after:.1} s");
    assert_eq!(again.records.len(), 1);
    assert_eq!(again.records[0].attributes.get("ApproximateReceiveCount").map(String::as_str), Some("2"));
    w.counter.acting_as("RespondFunction");
    let response = handle_sqs_event(&w.deps, &w.queue, JobKind::Respond, again, None).await;
    w.counter.acting_as("");
    assert!(response.batch_item_failures.is_empty(), "the second delivery answered");
    let posts = w.slack_calls("chat.postMessage").await;
    assert_eq!(posts.len(), 2, "one refused, one posted: {posts:?}");
    w.assert_the_template_allows_what_was_done();
}

/// An invocation with little time left (Lambda's deadline, from its context) stops
/// a job that overruns early enough to settle the batch and answer, and reports it.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn a_job_is_stopped_within_the_time_the_invocation_has_left() {
    let (dynamo, moto) = emulators("a_job_is_stopped_within_the_time_the_invocation_has_left");
    let w = world_with(&dynamo, &moto, &[], Some(Arc::new(kuuki_e2e::NeverAnswers))).await;
    assert_eq!(w.deliver(message("C0LATE", "UALICE", "<@UKUUKI> hi", &now_ts(5)), false).await, 200);
    let event = w.receive(&w.urls.respond).await;
    assert_eq!(event.records.len(), 1);
    // 10 s left: the settle share (7.5 s) and a second for the answer leave 1.5 s.
    let started = std::time::Instant::now();
    let left = Some(std::time::Duration::from_secs(10));
    let response = handle_sqs_event(&w.deps, &w.queue, JobKind::Respond, event, left).await;
    let took = started.elapsed();
    assert_eq!(response.batch_item_failures.len(), 1, "the stopped job is reported");
    assert!(took >= std::time::Duration::from_millis(1500), "it ran until then: {took:?}");
    assert!(took < std::time::Duration::from_secs(9), "and no longer: {took:?}");
}

#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn an_ambient_message_goes_through_the_judge_queue_to_a_reaction() {
    let (dynamo, moto) = emulators("an_ambient_message_goes_through_the_judge_queue_to_a_reaction");
    let w = world(&dynamo, &moto, &[("JUDGE_MIN_WAIT_SECONDS", "0"), ("JUDGE_SCORE_THRESHOLD", "0")]).await;
    let ts = now_ts(9);
    assert_eq!(w.deliver(message("C0AMB", "UBOB", "deploy done 🎉", &ts), false).await, 200);
    let judged = handle_sqs_event(&w.deps, &w.queue, JobKind::Judge, w.receive(&w.urls.judge).await, None).await;
    assert!(judged.batch_item_failures.is_empty());
    let answered = handle_sqs_event(&w.deps, &w.queue, JobKind::Respond, w.receive(&w.urls.respond).await, None).await;
    assert!(answered.batch_item_failures.is_empty());
    assert_eq!(
        w.slack_calls("reactions.add").await,
        vec![json!({"channel": "C0AMB", "timestamp": ts, "name": "tada"})]
    );
}

/// A judgment that waits past SQS's 15 minutes is handed to EventBridge Scheduler by
/// the ingress: the schedule is made, and the ingress's policy allows it (with the
/// PassRole it takes), so the IAM check covers the scheduler too.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn a_long_judgment_wait_is_scheduled_within_the_ingress_policy() {
    let (dynamo, moto) = emulators("a_long_judgment_wait_is_scheduled_within_the_ingress_policy");
    let group = unique("kuuki");
    let scheduler = aws_sdk_scheduler::Client::new(&sdk(&moto).await);
    scheduler.create_schedule_group().name(&group).send().await.expect("a schedule group");
    let settings = [
        ("JUDGE_MIN_WAIT_SECONDS", "1200"),
        ("SCHEDULE_GROUP", group.as_str()),
        ("SCHEDULER_ROLE_ARN", "arn:aws:iam::123456789012:role/kuuki-scheduler"),
        ("JUDGE_QUEUE_ARN", "arn:aws:sqs:us-east-1:123456789012:kuuki-judge"),
    ];
    let w = world(&dynamo, &moto, &settings).await;
    w.counter.reset();
    assert_eq!(w.deliver(message("C0LATE", "UBOB", "anyone around later?", &now_ts(11)), false).await, 200);
    assert_eq!(w.counter.calls().get("scheduler.CreateSchedule"), Some(&1), "{:?}", w.counter.calls());
    let listed = scheduler.list_schedules().group_name(&group).send().await.unwrap();
    assert_eq!(listed.schedules().len(), 1, "the judgment waits in the scheduler");
    w.assert_the_template_allows_what_was_done();
}

/// An uninstall on DynamoDB: the ingress marks Slack's access gone (the event's time
/// is long past here, so the purge is queued at once, on the forget queue), a Slack
/// channel's state read carries the mark, and the reflect function's purge empties
/// the Slack channels while a Discord channel keeps its message: every call within
/// the template's policies.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn an_uninstalled_workspace_is_purged_from_the_tables_within_the_policies() {
    use kuuki::domain::{ChannelId, Timestamp, Ts};
    let (dynamo, moto) = emulators("an_uninstalled_workspace_is_purged_from_the_tables_within_the_policies");
    let w = world(&dynamo, &moto, &[]).await;
    let (slack, discord) = (ChannelId("C0GONE".into()), ChannelId("41771983423143940".into()));
    for n in 0..3 {
        assert_eq!(w.deliver(message("C0GONE", "UALICE", "my cat is Miso", &now_ts(n + 40)), false).await, 200);
    }
    let at = w.deps.clock.now();
    let theirs = kuuki::domain::Message {
        channel: discord.clone(),
        ts: Ts::new("1301213485260619790"),
        thread_root: None,
        user: UserId("80351110224678912".into()),
        user_name: "bob".into(),
        text: "my dog is Pochi".into(),
        author: kuuki::domain::Author::Human,
        replies_to_bot: false,
        replies_to: None,
        in_dm: false,
        private_channel: false,
        at,
    };
    w.deps.messages.put_message(&Arc::new(theirs)).await.unwrap();
    w.deps.channels.set_muted(&slack, Some(Timestamp(at.0 + 3_600_000_000))).await.unwrap();
    for _ in 0..2 {
        assert_eq!(w.deliver(json!({"type": "app_uninstalled"}), true).await, 200);
    }
    let gone = w.deps.channels.slack_gone(Workspace::Shared).await.unwrap().expect("marked");
    assert_eq!(w.deps.channels.channel_state(&slack).await.unwrap().slack_gone, Some(gone));
    let event = w.receive(&w.urls.forget).await;
    assert_eq!(event.records.len(), 1, "one purge on the forget queue");
    w.counter.acting_as("ReflectFunction");
    for _ in 0..2 {
        let response = handle_sqs_event(&w.deps, &w.queue, JobKind::Forget, event.clone(), None).await;
        assert!(response.batch_item_failures.is_empty(), "the purge failed");
    }
    w.counter.acting_as("");
    w.assert_the_template_allows_what_was_done();
    assert!(w.deps.messages.messages_after(&slack, None, 10).await.unwrap().is_empty());
    assert!(!w.deps.channels.state_channels().await.unwrap().contains(&slack));
    assert_eq!(w.deps.facts.profile(Workspace::Shared, &UserId("UALICE".into())).await.unwrap(), None);
    assert_eq!(w.deps.messages.message_channels().await.unwrap(), std::slice::from_ref(&discord));
    assert_eq!(w.deps.messages.messages_after(&discord, None, 10).await.unwrap().len(), 1, "Discord's stays");
}

/// `/kuuki forget-me` on DynamoDB: the person's messages, profile, notes and the
/// facts only they taught are gone from the tables; a shared fact stays without them.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn forget_me_empties_the_tables_of_a_person() {
    use kuuki::domain::{ChannelId, Fact, Timestamp, Ts};
    use kuuki::ingest::command::{SlashCommand, run_command};
    let (dynamo, moto) = emulators("forget_me_empties_the_tables_of_a_person");
    let w = world(&dynamo, &moto, &[]).await;
    let channel = ChannelId("C0FGT".into());
    let (alice, bob) = (UserId("UALICE".into()), UserId("UBOB".into()));
    for (n, (user, text)) in
        [("UALICE", "my cat is Miso"), ("UBOB", "deploys on Monday"), ("UALICE", "curry!")].into_iter().enumerate()
    {
        assert_eq!(w.deliver(message("C0FGT", user, text, &now_ts(n as u32 + 20)), false).await, 200);
    }
    // Older ones of hers, more than one batch of deletes holds (25).
    for i in 0..28 {
        let at = Timestamp(w.deps.clock.now().0 - 3_600_000_000 + i * 1_000_000);
        let older = kuuki::domain::Message {
            channel: channel.clone(),
            ts: Ts::from_timestamp(at),
            thread_root: None,
            user: alice.clone(),
            user_name: "alice".into(),
            text: format!("an older thought, number {i}"),
            author: kuuki::domain::Author::Human,
            replies_to_bot: false,
            replies_to: None,
            in_dm: false,
            private_channel: false,
            at,
        };
        w.deps.messages.put_message(&Arc::new(older)).await.unwrap();
    }
    let now = Timestamp::from_secs_f64(1.0e9);
    let fact = |id: &str, content: &str, sources: &[&str]| Fact {
        id: id.into(),
        channel: channel.clone(),
        content: content.into(),
        keywords: vec!["k".into()],
        source_users: sources.iter().map(|s| s.to_string()).collect(),
        confidence: 0.9,
        shareable: false,
        created_at: now,
        confirmed_at: now,
        strength: 1,
        source_messages: vec![Ts::new("1.000001")],
        embedding: None,
    };
    w.deps.facts.put_fact(&fact("f1", "her cat is Miso", &["UALICE"])).await.unwrap();
    w.deps.facts.put_fact(&fact("f2", "the team deploys on Mondays", &["UALICE", "UBOB"])).await.unwrap();
    w.deps.facts.note_reflection(&channel, &alice, &["cats".into()], "", now).await.unwrap();
    assert_eq!(w.deps.facts.profile(Workspace::Shared, &alice).await.unwrap().map(|p| p.interactions), Some(2));
    // The workspace memory where a version before 2026-11-27 kept it (one item in the
    // channels table), naming her: the forget reads it, and its wipe deletes it.
    let client = aws_sdk_dynamodb::Client::new(&sdk(&dynamo).await);
    let old_key = aws_sdk_dynamodb::types::AttributeValue::S("#workspace".into());
    let old = kuuki::domain::WorkspaceMemory { history: "UALICE has a cat named Miso".into(), ..Default::default() };
    client
        .put_item()
        .table_name(&w.tables.channels)
        .item("channel", old_key.clone())
        .item("workspace", aws_sdk_dynamodb::types::AttributeValue::S(serde_json::to_string(&old).unwrap()))
        .send()
        .await
        .unwrap();
    assert_eq!(w.deps.channels.workspace_memory(Workspace::Shared).await.unwrap().history, old.history);

    // Slack's way back for the answer: the stand-in's origin (hooks.slack.com in
    // production).
    let response_path = "/commands/T0TEAM/1/forget";
    wiremock::Mock::given(wiremock::matchers::path(response_path))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_string("ok"))
        .mount(&w.slack_api)
        .await;
    let command = SlashCommand {
        command: "/kuuki".into(),
        text: "forget-me".into(),
        channel_id: channel.0.to_string(),
        user_id: alice.0.to_string(),
        may_manage_channel: None,
        response_url: Some(format!("{}{response_path}", w.slack_api.uri())),
        team_id: None,
        enterprise_id: None,
        is_enterprise_install: false,
        discord_reply: None,
        server: None,
    };
    // Slash commands are answered by the ingress function: forgetting is queued.
    w.counter.acting_as("IngressFunction");
    let ack = run_command(&w.deps, &command).await.unwrap();
    // A manager's mute is announced in the channel once (a ledger claim).
    let mute = SlashCommand { text: "mute 30m".into(), may_manage_channel: Some(true), ..command.clone() };
    let muted = run_command(&w.deps, &mute).await.unwrap();
    w.counter.acting_as("");
    assert!(ack.starts_with("kuuki is forgetting you"), "{ack}");
    assert_eq!(w.deps.messages.messages_after(&channel, None, 100).await.unwrap().len(), 31, "not yet");
    // The reflect worker carries it out from the forget queue (never behind
    // reflections) and answers through the response_url; the same delivery again
    // (SQS redelivers) neither forgets more nor answers twice.
    assert!(w.receive(&w.urls.reflect).await.records.is_empty(), "nothing on the reflect queue");
    let event = w.receive(&w.urls.forget).await;
    assert_eq!(event.records.len(), 1, "one forget job on the forget queue");
    let kind = kuuki_lambda::event_kind(&w.queue, &[JobKind::Reflect, JobKind::Forget], &event);
    assert_eq!(kind, JobKind::Forget, "the reflect worker knows the event's queue by its source");
    w.counter.acting_as("ReflectFunction");
    for _ in 0..2 {
        let response = handle_sqs_event(&w.deps, &w.queue, kind, event.clone(), None).await;
        assert!(response.batch_item_failures.is_empty(), "the forget job failed");
    }
    w.counter.acting_as("");
    w.assert_the_template_allows_what_was_done();
    assert!(w.deps.channels.channel_state(&channel).await.unwrap().muted_until.is_some(), "{muted}");
    let answers = w.slack_calls(response_path.trim_start_matches('/')).await;
    assert_eq!(answers.len(), 1, "answered once: {answers:?}");
    assert_eq!(answers[0]["response_type"], "ephemeral");
    let answer = answers[0]["text"].as_str().unwrap();
    assert!(answer.starts_with("Forgotten you: 30 stored message(s), 1 fact(s) removed, 1 fact(s) kept"), "{answer}");
    let left = w.deps.messages.messages_after(&channel, None, 100).await.unwrap();
    assert_eq!(left.iter().map(|m| m.user.as_str()).collect::<Vec<_>>(), ["UBOB"]);
    let facts = w.deps.facts.facts(&channel).await.unwrap();
    assert_eq!(facts.len(), 1);
    assert_eq!(facts[0].source_users, vec!["UBOB"]);
    assert_eq!(w.deps.facts.user_note(&channel, &alice).await.unwrap(), None);
    assert_eq!(w.deps.facts.profile(Workspace::Shared, &alice).await.unwrap(), None);
    assert!(w.deps.facts.profile(Workspace::Shared, &bob).await.unwrap().is_some(), "bob is still known");
    let old_item =
        client.get_item().table_name(&w.tables.channels).key("channel", old_key).consistent_read(true).send();
    assert_eq!(old_item.await.unwrap().item, None, "the old workspace item naming her is deleted");
    assert_eq!(
        w.deps.channels.workspace_memory(Workspace::Shared).await.unwrap(),
        kuuki::domain::WorkspaceMemory::default()
    );
    // Asked again (without a way back, so at once): nothing left, nothing changes.
    let at_once = SlashCommand { response_url: None, ..command.clone() };
    let again = run_command(&w.deps, &at_once).await.unwrap();
    assert_eq!(again, "kuuki had nothing stored about you.");
    assert_eq!(w.deps.facts.facts(&channel).await.unwrap().len(), 1);
}

#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn a_bad_record_fails_alone() {
    let (dynamo, moto) = emulators("a_bad_record_fails_alone");
    let w = world(&dynamo, &moto, &[]).await;
    assert_eq!(w.deliver(message("C0BAD", "UALICE", "<@UKUUKI> hi", &now_ts(3)), false).await, 200);
    let mut event = w.receive(&w.urls.respond).await;
    let mut bad = SqsMessage::default();
    bad.message_id = Some("not-a-job".into());
    bad.body = Some("{\"hello\": 1}".into());
    event.records.push(bad);
    let response = handle_sqs_event(&w.deps, &w.queue, JobKind::Respond, event, None).await;
    let failed: Vec<_> = response.batch_item_failures.iter().map(|f| f.item_identifier.clone()).collect();
    assert_eq!(failed, vec!["not-a-job".to_string()]);
    assert_eq!(w.slack_calls("chat.postMessage").await.len(), 1, "the good record was answered");
}

/// An event from a queue the worker does not read (a mapping pointed at the wrong
/// queue) is taken as the worker's first kind, and its jobs, of another worker's
/// kind, fail without running (on to that queue's dead letters): a reflect worker
/// given the respond queue's event posts nothing.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn an_event_from_another_workers_queue_runs_nothing() {
    let (dynamo, moto) = emulators("an_event_from_another_workers_queue_runs_nothing");
    let w = world(&dynamo, &moto, &[]).await;
    assert_eq!(w.deliver(message("C0ELSE", "UALICE", "<@UKUUKI> hi", &now_ts(3)), false).await, 200);
    let event = w.receive(&w.urls.respond).await;
    assert_eq!(event.records.len(), 1, "the mention queued its answer");
    let kind = kuuki_lambda::event_kind(&w.queue, &[JobKind::Reflect, JobKind::Forget], &event);
    assert_eq!(kind, JobKind::Reflect, "the respond queue is none of the reflect worker's");
    let response = handle_sqs_event(&w.deps, &w.queue, kind, event.clone(), None).await;
    assert_eq!(response.batch_item_failures.len(), 1, "the respond job failed there");
    assert!(w.slack_calls("chat.postMessage").await.is_empty(), "nothing was posted by the wrong worker");
    // Its own worker answers it.
    let kind = kuuki_lambda::event_kind(&w.queue, &[JobKind::Respond], &event);
    let response = handle_sqs_event(&w.deps, &w.queue, kind, event, None).await;
    assert!(response.batch_item_failures.is_empty());
    assert_eq!(w.slack_calls("chat.postMessage").await.len(), 1);
}
