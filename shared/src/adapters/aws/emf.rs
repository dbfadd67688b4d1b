//! Metrics as CloudWatch embedded metric format: one JSON log line per measurement
//! that CloudWatch turns into metrics, with no agent and no extra API call.
//! Namespace `kuuki`; every metric also carries the function's name (the LLM metrics
//! are published as all-functions totals too).

use std::io::Write;
use std::sync::Mutex;

use serde_json::{Map, Value, json};

use crate::domain::{Decision, Event, EventKind, LogText};
use crate::ports::DecisionLog;

pub const NAMESPACE: &str = "kuuki";

/// One EMF line: `metrics` (name, value, unit) under `dimensions` (name, value).
pub fn line(timestamp_ms: i64, dimensions: &[(&str, &str)], metrics: &[(&str, f64, &str)]) -> Value {
    let names: Vec<&str> = dimensions.iter().map(|(k, _)| *k).collect();
    line_with_dimension_sets(timestamp_ms, dimensions, &[&names], metrics)
}

/// One EMF line publishing `metrics` once per dimension set, each set naming some of
/// `dimensions` (an empty set is the total over every value of them).
pub fn line_with_dimension_sets(
    timestamp_ms: i64,
    dimensions: &[(&str, &str)],
    dimension_sets: &[&[&str]],
    metrics: &[(&str, f64, &str)],
) -> Value {
    let mut root = Map::new();
    root.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{
                "Namespace": NAMESPACE,
                "Dimensions": dimension_sets,
                "Metrics": metrics.iter().map(|(name, _, unit)| json!({"Name": name, "Unit": unit})).collect::<Vec<_>>(),
            }],
        }),
    );
    for (k, v) in dimensions {
        root.insert((*k).into(), json!(v));
    }
    for (name, value, _) in metrics {
        root.insert((*name).into(), json!(value));
    }
    Value::Object(root)
}

/// One LLM call, as `CountingLlm` measures it.
#[derive(Debug, Clone, Copy)]
pub struct LlmCall<'a> {
    pub function: &'a str,
    pub role: &'a str,
    pub ok: bool,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub latency: std::time::Duration,
}

/// The dimension sets of the LLM metrics: by function and role for the dashboard, and
/// none for the all-functions totals that `LlmFailureRateAlarm` divides.
pub const LLM_DIMENSION_SETS: &[&[&str]] = &[&["Function", "Role"], &[]];

/// The EMF line of one LLM call: calls, failures, tokens and latency.
pub fn llm_call_line(timestamp_ms: i64, call: &LlmCall) -> Value {
    let metrics = [
        ("LlmCalls", 1.0, "Count"),
        ("LlmFailures", if call.ok { 0.0 } else { 1.0 }, "Count"),
        ("LlmInputTokens", call.input_tokens as f64, "Count"),
        ("LlmOutputTokens", call.output_tokens as f64, "Count"),
        ("LlmLatency", call.latency.as_millis() as f64, "Milliseconds"),
    ];
    line_with_dimension_sets(
        timestamp_ms,
        &[("Function", call.function), ("Role", call.role)],
        LLM_DIMENSION_SETS,
        &metrics,
    )
}

/// The metrics a decision record stands for: judgments by decision, superseded and
/// dropped work, responses by type, failed responses.
pub fn metrics_of(event: &Event) -> Vec<(&'static str, f64, &'static str)> {
    match &event.kind {
        EventKind::Judge { decision, respond, llm_error, .. } => {
            let mut m = vec![
                ("Judgments", 1.0, "Count"),
                (
                    match decision {
                        Decision::Respond => "JudgedRespond",
                        Decision::Skip => "JudgedSkip",
                        Decision::Llm => "JudgedByLlm",
                        Decision::Wait => "JudgedWait",
                    },
                    1.0,
                    "Count",
                ),
            ];
            if *respond {
                m.push(("DecidedToRespond", 1.0, "Count"));
            }
            if llm_error.is_some() {
                m.push(("LlmUnusable", 1.0, "Count"));
            }
            m
        }
        EventKind::Superseded { .. } => vec![("Superseded", 1.0, "Count")],
        EventKind::Dropped { .. } => vec![("Dropped", 1.0, "Count")],
        EventKind::Respond { response_type, .. } => vec![
            ("Responses", 1.0, "Count"),
            (
                match response_type {
                    crate::domain::ResponseType::ReactOnly => "ResponsesReactOnly",
                    crate::domain::ResponseType::ShortAck => "ResponsesShortAck",
                    crate::domain::ResponseType::FullResponse => "ResponsesFullResponse",
                },
                1.0,
                "Count",
            ),
        ],
        EventKind::RespondFailed { .. } => vec![("ResponsesFailed", 1.0, "Count")],
        EventKind::Summary { .. } => vec![("Summaries", 1.0, "Count")],
        EventKind::Reflect { facts_new, facts_strengthened, embedding_error, .. } => vec![
            ("Reflections", 1.0, "Count"),
            ("FactsLearned", *facts_new as f64, "Count"),
            ("FactsStrengthened", *facts_strengthened as f64, "Count"),
            ("FactEmbeddingFailures", f64::from(u8::from(embedding_error.is_some())), "Count"),
        ],
        EventKind::Message { .. } => vec![("Messages", 1.0, "Count")],
        EventKind::Command { .. } => vec![("Commands", 1.0, "Count")],
        // A second look is the same request's: counted in its facts, not as a forget.
        EventKind::Forget { facts_removed, late, .. } => {
            vec![("Forgets", f64::from(u8::from(!late)), "Count"), ("FactsForgotten", *facts_removed as f64, "Count")]
        }
        EventKind::SlackAccess { gone, .. } => vec![("SlackAccessGone", f64::from(u8::from(*gone)), "Count")],
        EventKind::Purge { .. } => vec![("WorkspacePurges", 1.0, "Count")],
        // One metric per signal, an undone one counted against it.
        EventKind::Feedback { signal, undone, .. } => {
            vec![(feedback_metric(*signal), if *undone { -1.0 } else { 1.0 }, "Count")]
        }
        EventKind::Edited { .. } | EventKind::Deleted => vec![],
    }
}

/// The metric counting one talkativeness signal.
fn feedback_metric(signal: crate::domain::talkativeness::SignalKind) -> &'static str {
    use crate::domain::talkativeness::SignalKind;
    match signal {
        SignalKind::PositiveReaction => "FeedbackPositiveReactions",
        SignalKind::NegativeReaction => "FeedbackNegativeReactions",
        SignalKind::OtherReaction => "FeedbackOtherReactions",
        SignalKind::Engaged => "FeedbackEngaged",
        SignalKind::Ignored => "FeedbackIgnored",
        SignalKind::Hushed => "FeedbackHushed",
        SignalKind::Thanked => "FeedbackThanked",
        SignalKind::Quieter => "FeedbackQuieter",
        SignalKind::Louder => "FeedbackLouder",
        SignalKind::Reset => "FeedbackResets",
    }
}

/// Decision records as JSON lines, each followed by its EMF metrics line.
pub struct EmfLog<W: Write + Send> {
    out: Mutex<W>,
    function: String,
    text: LogText,
}

impl<W: Write + Send> EmfLog<W> {
    /// Records with people's words or without ([`LogText`]); the metrics carry none.
    pub fn new(out: W, function: &str, text: LogText) -> Self {
        EmfLog { out: Mutex::new(out), function: function.to_owned(), text }
    }
}

impl<W: Write + Send> DecisionLog for EmfLog<W> {
    fn record(&self, event: Event) {
        let metrics = metrics_of(&event);
        let record = event.to_log_json(self.text);
        let mut out = self.out.lock().expect("log lock");
        let mut written = writeln!(out, "{record}");
        if !metrics.is_empty() {
            let emf = line(event.at.as_micros() / 1000, &[("Function", &self.function)], &metrics);
            written = written.and_then(|_| writeln!(out, "{emf}"));
        }
        if let Err(error) = written.and_then(|_| out.flush()) {
            tracing::warn!(%error, "could not write a decision record");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::{ChannelId, Stage, Timestamp, Ts};

    #[test]
    fn an_emf_line_declares_its_metrics_and_carries_their_values() {
        let v = line(
            1_700_000_000_000,
            &[("Function", "judge")],
            &[("Judgments", 1.0, "Count"), ("LlmLatency", 812.0, "Milliseconds")],
        );
        assert_eq!(v["_aws"]["CloudWatchMetrics"][0]["Namespace"], "kuuki");
        assert_eq!(v["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["Function"]]));
        assert_eq!(
            v["_aws"]["CloudWatchMetrics"][0]["Metrics"][1],
            json!({"Name": "LlmLatency", "Unit": "Milliseconds"})
        );
        assert_eq!(v["_aws"]["Timestamp"], 1_700_000_000_000i64);
        assert_eq!(
            (v["Function"].clone(), v["Judgments"].clone(), v["LlmLatency"].clone()),
            (json!("judge"), json!(1.0), json!(812.0))
        );
    }

    #[test]
    fn an_llm_call_is_published_by_function_and_role_and_as_a_total() {
        let call = LlmCall {
            function: "judge-fn",
            role: "judge",
            ok: false,
            input_tokens: 120,
            output_tokens: 0,
            latency: std::time::Duration::from_millis(30_000),
        };
        let v = llm_call_line(1_700_000_000_000, &call);
        assert_eq!(v["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["Function", "Role"], []]));
        assert_eq!((v["Function"].clone(), v["Role"].clone()), (json!("judge-fn"), json!("judge")));
        assert_eq!(
            (v["LlmCalls"].clone(), v["LlmFailures"].clone(), v["LlmLatency"].clone()),
            (json!(1.0), json!(1.0), json!(30_000.0))
        );
    }

    /// A forget's second look counts the facts it removed, not a second forget.
    #[test]
    fn a_forgets_second_look_is_not_counted_as_a_forget() {
        let forget = |late: bool| Event {
            at: crate::domain::Timestamp(0),
            channel: crate::domain::ChannelId("C1".into()),
            thread_root: None,
            ts: crate::domain::Ts::new("1.000001"),
            kind: EventKind::Forget {
                user: Some(crate::domain::UserId("U1".into())),
                messages: 0,
                facts_removed: 2,
                facts_edited: 0,
                notes: 0,
                summaries: 0,
                server: None,
                unplaced: 0,
                late,
            },
        };
        let expect = |forgets: f64| vec![("Forgets", forgets, "Count"), ("FactsForgotten", 2.0, "Count")];
        assert_eq!(metrics_of(&forget(false)), expect(1.0));
        assert_eq!(metrics_of(&forget(true)), expect(0.0));
    }

    #[test]
    fn decision_records_are_followed_by_their_metrics() {
        let log = EmfLog::new(Vec::new(), "judge", LogText::Kept);
        log.record(Event {
            at: Timestamp(1_700_000_000_000_000),
            channel: ChannelId("C1".into()),
            thread_root: None,
            ts: Ts::new("1.000001"),
            kind: EventKind::Superseded { stage: Stage::Judge, by: Ts::new("2.000001") },
        });
        let out = String::from_utf8(log.out.into_inner().unwrap()).unwrap();
        let lines: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["kind"], "superseded");
        assert_eq!(lines[1]["Superseded"], 1.0);
        assert_eq!(lines[1]["Function"], "judge");
    }
}
