//! Recording a decision in the decision log, now: what every stage (ingest, judge,
//! respond, memory) and the worker share, so none imports another for it.

use crate::deps::Deps;
use crate::domain::{ChannelId, Event, EventKind, Ts};

pub(crate) fn record(deps: &Deps, channel: &ChannelId, thread_root: Option<Ts>, ts: Ts, kind: EventKind) {
    deps.log.record(Event { at: deps.clock.now(), channel: channel.clone(), thread_root, ts, kind });
}
