//! `kuuki serve`'s metrics in the Prometheus text format (prometheus-client, one
//! registry per process, no global one), every name prefixed `kuuki_`. What is counted
//! as it happens: the decision log's records ([`MeteredLog`], the events the Lambdas'
//! EMF lines count too), model calls ([`MeteredLlm`]) and the workers' jobs
//! ([`JobObserver`]). What is read at each scrape ([`Observed`]): the queue, the store's
//! errors, the platforms' connections. Labels carry ids of kinds only (role, decision,
//! mode, kind, outcome, platform), never a person, a channel or anyone's words.

mod llm;
mod log;

pub use llm::MeteredLlm;
pub use log::MeteredLog;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, prometheus_text};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};

use crate::budget::JobKind;
pub use crate::ports::QueueDepth;
use crate::ports::{JobObserver, JobOutcome, LlmRole};

/// The `Content-Type` of [`Metrics::render`]'s text (Prometheus' text format 0.0.4).
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

type Labels<const N: usize> = [(&'static str, String); N];
type Counters<const N: usize> = Family<Labels<N>, Counter>;
type Histograms<const N: usize> = Family<Labels<N>, Histogram, fn() -> Histogram>;

/// Every metric of the process. Cheap to update from any task (atomics).
pub struct Metrics {
    registry: Registry,
    pub(crate) messages_stored: Counter,
    pub(crate) judgments: Counters<1>,
    pub(crate) posts: Counters<2>,
    pub(crate) reactions: Counters<1>,
    pub(crate) responses_failed: Counters<1>,
    pub(crate) superseded: Counters<1>,
    pub(crate) dropped: Counters<1>,
    pub(crate) commands: Counter,
    pub(crate) llm_calls: Counters<1>,
    pub(crate) llm_errors: Counters<1>,
    pub(crate) llm_tokens: Counters<2>,
    pub(crate) llm_duration: Histograms<1>,
    jobs: Counters<2>,
    job_duration: Histograms<1>,
    latest: Arc<Latest>,
}

/// What is read at a scrape rather than counted as it happens.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    /// The in-process queue (`None` when SQS holds the jobs: `kuuki serve --aws`).
    pub queue: Option<QueueDepth>,
    /// The store's errors since it opened (`None` without a store that counts them).
    pub store_errors: Option<u64>,
    /// Each platform connection this process holds itself.
    pub links: Vec<Link>,
}

/// A platform connection: Slack's Socket Mode or the Discord Gateway.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// `slack` or `discord`.
    pub platform: &'static str,
    pub connected: bool,
    /// Connections after the first (Slack's routine refreshes included).
    pub reconnects: u64,
}

/// Seconds, from 5 ms doubling to about 80 s: a judgment's store reads to a slow model.
fn seconds_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.005, 2.0, 15))
}

fn counters<const N: usize>(registry: &mut Registry, name: &str, help: &str) -> Counters<N> {
    let family = Counters::<N>::default();
    registry.register(name, help, family.clone());
    family
}

fn histograms<const N: usize>(registry: &mut Registry, name: &str, help: &str) -> Histograms<N> {
    let family = Histograms::<N>::new_with_constructor(seconds_histogram as fn() -> Histogram);
    registry.register_with_unit(name, help, Unit::Seconds, family.clone());
    family
}

/// A label value: the name the decision log gives `value` (its serde name).
pub(crate) fn name_of(value: &impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        _ => "other".to_owned(),
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("kuuki");
        let messages_stored = Counter::default();
        registry.register(
            "messages_stored",
            "Messages stored (each once, duplicates not counted)",
            messages_stored.clone(),
        );
        let commands = Counter::default();
        registry.register("commands", "/kuuki commands run", commands.clone());
        let latest = Arc::new(Latest::default());
        registry.register_collector(Box::new(latest.clone()));
        let r = &mut registry;
        Metrics {
            latest,
            messages_stored,
            commands,
            judgments: counters(r, "judgments", "Judgments by the thresholds' decision (respond, skip, llm, wait)"),
            posts: counters(r, "posts", "Messages kuuki posted, by mode (direct, ambient, opener, pick_up) and type"),
            reactions: counters(r, "reactions", "Emoji reactions kuuki added, by mode"),
            responses_failed: counters(r, "responses_failed", "Answers that could not be given, by mode"),
            superseded: counters(r, "superseded", "Jobs a newer message made moot, by stage"),
            dropped: counters(r, "dropped", "Jobs dropped (dead letters, refusals), by stage"),
            llm_calls: counters(r, "llm_calls", "Model calls by role (judge, generate, summarize, reflect)"),
            llm_errors: counters(r, "llm_errors", "Model calls that failed, by role"),
            llm_tokens: counters(r, "llm_tokens", "Tokens by role and direction (input, output)"),
            llm_duration: histograms(r, "llm_call_duration", "How long model calls took, by role"),
            jobs: counters(r, "jobs", "Job deliveries by kind and outcome (done, failed, dead_letter, timed_out)"),
            job_duration: histograms(r, "job_duration", "How long job deliveries ran, by kind"),
            registry,
        }
    }

    /// One model call of `role`: its tokens, or a failure, and how long it took.
    pub(crate) fn llm_call(&self, role: LlmRole, tokens: Option<(u64, u64)>, took: Duration) {
        let role = [("role", role.as_str().to_owned())];
        self.llm_calls.get_or_create(&role).inc();
        self.llm_duration.get_or_create(&role).observe(took.as_secs_f64());
        let [(_, role)] = role;
        match tokens {
            Some((input, output)) => {
                for (direction, count) in [("input", input), ("output", output)] {
                    let labels = [("role", role.clone()), ("direction", direction.to_owned())];
                    self.llm_tokens.get_or_create(&labels).inc_by(count);
                }
            }
            None => {
                self.llm_errors.get_or_create(&[("role", role)]).inc();
            }
        }
    }

    /// The text a scrape gets: every metric, with `observed` as read now.
    pub fn render(&self, observed: &Observed) -> String {
        // Read by the collector while the registry is encoded.
        let mut latest = self.latest.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        *latest = observed.clone();
        drop(latest);
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = prometheus_text::encode(&mut text, &self.registry);
        text
    }
}

impl JobObserver for Metrics {
    fn job_finished(&self, kind: JobKind, outcome: JobOutcome, took: Duration) {
        let labels = [("kind", kind.as_str().to_owned()), ("outcome", outcome.as_str().to_owned())];
        self.jobs.get_or_create(&labels).inc();
        self.job_duration.get_or_create(&[("kind", kind.as_str().to_owned())]).observe(took.as_secs_f64());
    }
}

/// The registry's view of the latest [`Observed`]: written as it was read at the
/// scrape (set just before encoding).
#[derive(Debug, Default)]
struct Latest(Mutex<Observed>);

impl Collector for Latest {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let observed = self.0.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone();
        if let Some(queue) = observed.queue {
            let help = "Jobs in the queue by state (due, delayed, in_delivery)";
            let mut family = encoder.encode_descriptor("queue_jobs", help, None, MetricType::Gauge)?;
            for (state, jobs) in [("due", queue.due), ("delayed", queue.delayed), ("in_delivery", queue.in_delivery)] {
                let gauge = ConstGauge::new(i64::try_from(jobs).unwrap_or(i64::MAX));
                gauge.encode(family.encode_family(&[("state", state)])?)?;
            }
            let help = "How long the earliest due job has waited for a worker";
            let age =
                encoder.encode_descriptor("queue_oldest_due_job_age", help, Some(&Unit::Seconds), MetricType::Gauge)?;
            ConstGauge::new(queue.oldest_due.as_secs_f64()).encode(age)?;
        }
        if let Some(errors) = observed.store_errors {
            let help = "Store operations that failed (and failed write checks of the data file)";
            let family = encoder.encode_descriptor("store_errors", help, None, MetricType::Counter)?;
            ConstCounter::new(errors).encode(family)?;
        }
        if !observed.links.is_empty() {
            let help = "1 while the platform connection is up, 0 while it is down";
            let mut family = encoder.encode_descriptor("platform_connected", help, None, MetricType::Gauge)?;
            for link in &observed.links {
                let gauge = ConstGauge::new(i64::from(link.connected));
                gauge.encode(family.encode_family(&[("platform", link.platform)])?)?;
            }
            let help = "Platform connections opened after the first (Slack's refreshes included)";
            let mut family = encoder.encode_descriptor("platform_reconnects", help, None, MetricType::Counter)?;
            for link in &observed.links {
                ConstCounter::new(link.reconnects).encode(family.encode_family(&[("platform", link.platform)])?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
