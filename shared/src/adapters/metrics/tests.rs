use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::adapters::memory::MemoryLog;
use crate::domain::{
    Author, ChannelId, Decision, Event, EventKind, LoggedMessage, Message, RespondMode, ResponseType, Stage, Timestamp,
    Ts, UserId,
};
use crate::ports::{DecisionLog, Llm, LlmError, LlmRequest, LlmResponse, Usage};

fn event(kind: EventKind) -> Event {
    Event { at: Timestamp(0), channel: ChannelId("CSECRET".into()), thread_root: None, ts: Ts::new("1.000001"), kind }
}

fn respond(mode: RespondMode, response_type: ResponseType, shadow: bool) -> EventKind {
    EventKind::Respond {
        mode,
        response_type,
        posted_in: None,
        posted_ts: None,
        text: Some("kuuki's private answer".into()),
        emoji: None,
        shadow,
        facts: Vec::new(),
    }
}

/// The sample lines of `text` whose name and labels start with `prefix`, as values.
fn samples(text: &str, prefix: &str) -> Vec<f64> {
    text.lines()
        .filter(|line| line.starts_with(prefix))
        .filter_map(|line| line.rsplit(' ').next()?.parse().ok())
        .collect()
}

fn value(text: &str, sample: &str) -> Option<f64> {
    text.lines().find_map(|line| line.strip_prefix(sample)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn the_decision_logs_records_move_their_counters_by_kind_and_carry_no_words() {
    let metrics = Arc::new(Metrics::new());
    let written = Arc::new(MemoryLog::default());
    let log = MeteredLog::new(written.clone(), metrics.clone());
    let message = Message {
        channel: ChannelId("CSECRET".into()),
        ts: Ts::new("1.000001"),
        thread_root: None,
        user: UserId("UALICE".into()),
        user_name: "alice".into(),
        text: "my salary is 90k".into(),
        author: Author::Human,
        replies_to_bot: false,
        replies_to: None,
        in_dm: false,
        private_channel: false,
        at: Timestamp(0),
    };
    log.record(event(EventKind::Message { message: LoggedMessage(Arc::new(message)), trigger: None }));
    log.record(event(EventKind::Judge {
        user: UserId("UALICE".into()),
        score: 70,
        breakdown: Default::default(),
        decision: Decision::Respond,
        llm_called: false,
        respond: true,
        response_type: Some(ResponseType::FullResponse),
        delay_seconds: 0,
        llm: None,
        llm_error: None,
        llm_cached: false,
        llm_usage: None,
        reason: "alice said \"my salary is 90k\"".into(),
        pick_up: false,
    }));
    log.record(event(respond(RespondMode::Direct, ResponseType::FullResponse, false)));
    log.record(event(respond(RespondMode::Ambient, ResponseType::ReactOnly, false)));
    log.record(event(respond(RespondMode::Ambient, ResponseType::ShortAck, true)));
    log.record(event(EventKind::Superseded { stage: Stage::Judge, by: Ts::new("2.000001") }));
    assert_eq!(written.take().len(), 6, "every record is still written");

    let text = metrics.render(&Observed::default());
    assert_eq!(value(&text, "kuuki_messages_stored_total"), Some(1.0), "{text}");
    assert_eq!(value(&text, "kuuki_judgments_total{decision=\"respond\"}"), Some(1.0), "{text}");
    assert_eq!(value(&text, "kuuki_posts_total{mode=\"direct\",type=\"full_response\"}"), Some(1.0), "{text}");
    assert_eq!(value(&text, "kuuki_reactions_total{mode=\"ambient\"}"), Some(1.0), "{text}");
    assert_eq!(samples(&text, "kuuki_posts_total{mode=\"ambient\""), Vec::<f64>::new(), "a shadowed answer is no post");
    assert_eq!(value(&text, "kuuki_superseded_total{stage=\"judge\"}"), Some(1.0), "{text}");
    for private in ["salary", "UALICE", "alice", "CSECRET", "kuuki's private answer"] {
        assert!(!text.contains(private), "{private} in the metrics:\n{text}");
    }
}

struct Answers;

#[async_trait::async_trait]
impl Llm for Answers {
    async fn complete(&self, request: LlmRequest) -> Result<LlmResponse, LlmError> {
        match request.role {
            LlmRole::Judge => Err(LlmError::Failed("timed out".into())),
            _ => Ok(LlmResponse {
                text: "ok".into(),
                usage: Usage { input_tokens: 120, output_tokens: 7 },
                finish: crate::ports::Finish::Complete,
            }),
        }
    }
}

#[tokio::test]
async fn model_calls_are_counted_by_role_with_tokens_failures_and_time() {
    let metrics = Arc::new(Metrics::new());
    let llm = MeteredLlm::new(Arc::new(Answers), metrics.clone());
    let request = |role| LlmRequest {
        role,
        model: "m".into(),
        system: String::new(),
        user: "a person's words".into(),
        max_tokens: 10,
        temperature: None,
        schema: None,
        subject: "a person's words".into(),
    };
    llm.complete(request(LlmRole::Generate)).await.unwrap();
    llm.complete(request(LlmRole::Generate)).await.unwrap();
    llm.complete(request(LlmRole::Judge)).await.unwrap_err();
    let text = metrics.render(&Observed::default());
    assert_eq!(value(&text, "kuuki_llm_calls_total{role=\"generate\"}"), Some(2.0), "{text}");
    assert_eq!(value(&text, "kuuki_llm_calls_total{role=\"judge\"}"), Some(1.0), "{text}");
    assert_eq!(value(&text, "kuuki_llm_errors_total{role=\"judge\"}"), Some(1.0), "{text}");
    assert_eq!(value(&text, "kuuki_llm_errors_total{role=\"generate\"}"), None, "{text}");
    assert_eq!(value(&text, "kuuki_llm_tokens_total{role=\"generate\",direction=\"input\"}"), Some(240.0), "{text}");
    assert_eq!(value(&text, "kuuki_llm_tokens_total{role=\"generate\",direction=\"output\"}"), Some(14.0), "{text}");
    assert_eq!(value(&text, "kuuki_llm_call_duration_seconds_count{role=\"generate\"}"), Some(2.0), "{text}");
}

#[test]
fn jobs_are_counted_by_kind_and_outcome_with_their_durations() {
    let metrics = Metrics::new();
    metrics.job_finished(JobKind::Judge, JobOutcome::Done, Duration::from_millis(3));
    metrics.job_finished(JobKind::Judge, JobOutcome::Done, Duration::from_millis(40));
    metrics.job_finished(JobKind::Respond, JobOutcome::Failed, Duration::from_secs(2));
    let text = metrics.render(&Observed::default());
    assert_eq!(value(&text, "kuuki_jobs_total{kind=\"judge\",outcome=\"done\"}"), Some(2.0), "{text}");
    assert_eq!(value(&text, "kuuki_jobs_total{kind=\"respond\",outcome=\"failed\"}"), Some(1.0), "{text}");
    assert_eq!(value(&text, "kuuki_job_duration_seconds_count{kind=\"judge\"}"), Some(2.0), "{text}");
    assert_eq!(value(&text, "kuuki_job_duration_seconds_bucket{kind=\"judge\",le=\"0.005\"}"), Some(1.0), "{text}");
    assert_eq!(value(&text, "kuuki_job_duration_seconds_bucket{kind=\"judge\",le=\"0.04\"}"), Some(2.0), "{text}");
    assert!(text.contains("# TYPE kuuki_job_duration_seconds histogram"), "{text}");
}

#[test]
fn what_is_read_at_a_scrape_is_written_as_read() {
    let metrics = Metrics::new();
    let observed = Observed {
        queue: Some(QueueDepth { due: 2, delayed: 5, in_delivery: 1, oldest_due: Duration::from_millis(1500) }),
        store_errors: Some(3),
        links: vec![
            Link { platform: "slack", connected: true, reconnects: 4 },
            Link { platform: "discord", connected: false, reconnects: 0 },
        ],
    };
    let text = metrics.render(&observed);
    assert_eq!(value(&text, "kuuki_queue_jobs{state=\"due\"}"), Some(2.0), "{text}");
    assert_eq!(value(&text, "kuuki_queue_jobs{state=\"delayed\"}"), Some(5.0), "{text}");
    assert_eq!(value(&text, "kuuki_queue_jobs{state=\"in_delivery\"}"), Some(1.0), "{text}");
    assert_eq!(value(&text, "kuuki_queue_oldest_due_job_age_seconds"), Some(1.5), "{text}");
    assert_eq!(value(&text, "kuuki_store_errors_total"), Some(3.0), "{text}");
    assert_eq!(value(&text, "kuuki_platform_connected{platform=\"slack\"}"), Some(1.0), "{text}");
    assert_eq!(value(&text, "kuuki_platform_connected{platform=\"discord\"}"), Some(0.0), "{text}");
    assert_eq!(value(&text, "kuuki_platform_reconnects_total{platform=\"slack\"}"), Some(4.0), "{text}");
    // Without a queue, a store or a platform of its own (`--aws`), those are left out.
    let bare = metrics.render(&Observed::default());
    for absent in ["kuuki_queue_jobs", "kuuki_store_errors", "kuuki_platform_connected"] {
        assert!(!bare.contains(absent), "{absent}:\n{bare}");
    }
}
