//! The decision log's records as counters: the events the Lambdas' EMF lines count
//! (`aws::emf::metrics_of`), here with their kinds as labels.

use std::sync::Arc;

use super::{Metrics, name_of};
use crate::domain::{Event, EventKind, ResponseType};
use crate::ports::DecisionLog;

/// A decision log that counts each record, then hands it to `inner` (which writes it).
pub struct MeteredLog {
    inner: Arc<dyn DecisionLog>,
    metrics: Arc<Metrics>,
}

impl MeteredLog {
    pub fn new(inner: Arc<dyn DecisionLog>, metrics: Arc<Metrics>) -> Self {
        MeteredLog { inner, metrics }
    }
}

impl DecisionLog for MeteredLog {
    fn record(&self, event: Event) {
        count(&self.metrics, &event);
        self.inner.record(event);
    }
}

/// The counter `event` moves, if any. Only kinds become labels, never ids or words.
fn count(metrics: &Metrics, event: &Event) {
    match &event.kind {
        EventKind::Message { .. } => {
            metrics.messages_stored.inc();
        }
        EventKind::Judge { decision, .. } => {
            metrics.judgments.get_or_create(&[("decision", name_of(decision))]).inc();
        }
        // Decided and logged in a shadowed channel, but not posted: not counted as posts.
        EventKind::Respond { shadow: true, .. } => {}
        EventKind::Respond { mode, response_type: ResponseType::ReactOnly, .. } => {
            metrics.reactions.get_or_create(&[("mode", name_of(mode))]).inc();
        }
        EventKind::Respond { mode, response_type, .. } => {
            metrics.posts.get_or_create(&[("mode", name_of(mode)), ("type", name_of(response_type))]).inc();
        }
        EventKind::RespondFailed { mode, .. } => {
            metrics.responses_failed.get_or_create(&[("mode", name_of(mode))]).inc();
        }
        EventKind::Superseded { stage, .. } => {
            metrics.superseded.get_or_create(&[("stage", name_of(stage))]).inc();
        }
        EventKind::Dropped { stage, .. } => {
            metrics.dropped.get_or_create(&[("stage", name_of(stage))]).inc();
        }
        EventKind::Command { .. } => {
            metrics.commands.inc();
        }
        _ => {}
    }
}
