//! `kuuki serve`'s own routes beside the platforms': `GET /metrics` (the Prometheus
//! text format, `kuuki::adapters::metrics`) and `GET /healthz`, which answers 503 when
//! a platform connection this process holds has been down longer than
//! `--unhealthy-after-secs` or the data file is failing. Both read what the process
//! holds at the moment they are asked; neither carries a name or anyone's words.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use kuuki::adapters::metrics::{Link, Metrics, Observed};
use kuuki::adapters::sqlite::SqliteStore;
use kuuki::ports::Clock;
use kuuki_discord_gateway::{ConnectionState, Stats};
use serde_json::{Value, json};

/// What the two routes read.
pub struct Operations {
    pub metrics: Arc<Metrics>,
    /// The data file (`None` with `--aws`: SQS and DynamoDB report through CloudWatch).
    pub store: Option<Arc<SqliteStore>>,
    pub clock: Arc<dyn Clock>,
    /// Slack's Socket Mode, when this process runs it.
    pub slack: Option<Arc<ConnectionState>>,
    /// The Discord Gateway, when this process runs it.
    pub discord: Option<Arc<Stats>>,
    /// How long a platform connection may be down before `/healthz` says unhealthy.
    pub unhealthy_after: Duration,
}

impl Operations {
    pub fn router(self: Arc<Self>) -> Router {
        Router::new().route("/metrics", get(metrics)).route("/healthz", get(healthz)).with_state(self)
    }

    fn links(&self) -> Vec<(&'static str, &ConnectionState)> {
        let slack = self.slack.as_deref().map(|state| ("slack", state));
        let discord = self.discord.as_deref().map(|stats| ("discord", &stats.connection));
        slack.into_iter().chain(discord).collect()
    }

    fn observed(&self) -> Observed {
        let queue = self.store.as_ref().and_then(|store| match store.queue_depth(self.clock.now()) {
            Ok(depth) => Some(depth),
            Err(error) => {
                tracing::warn!(%error, "cannot read the job queue for /metrics");
                None
            }
        });
        let links = self.links().into_iter().map(|(platform, state)| Link {
            platform,
            connected: state.connected(),
            reconnects: state.reconnects(),
        });
        Observed { queue, store_errors: self.store.as_ref().map(|store| store.health().errors), links: links.collect() }
    }

    /// Whether this process is well, and what it knows: the store's errors and state,
    /// and each platform connection's.
    fn health(&self) -> (bool, Value) {
        let mut problems = Vec::new();
        let mut report = json!({"status": "ok"});
        if let Some(store) = &self.store {
            let health = store.health();
            if health.failing {
                problems.push("the data file is failing (no write has succeeded since its last error)".to_owned());
            }
            report["store"] = json!({"failing": health.failing, "errors": health.errors});
        }
        for (platform, state) in self.links() {
            let healthy = state.healthy(self.unhealthy_after);
            if !healthy {
                let bound = self.unhealthy_after.as_secs();
                problems.push(format!("the {platform} connection has been down for more than {bound} s"));
            }
            report[platform] = json!({"connected": state.connected(), "reconnects": state.reconnects()});
        }
        if !problems.is_empty() {
            report["status"] = json!("unhealthy");
            report["problems"] = json!(problems);
        }
        (problems.is_empty(), report)
    }
}

async fn metrics(State(operations): State<Arc<Operations>>) -> impl IntoResponse {
    let text = operations.metrics.render(&operations.observed());
    ([(header::CONTENT_TYPE, kuuki::adapters::metrics::CONTENT_TYPE)], text)
}

async fn healthz(State(operations): State<Arc<Operations>>) -> impl IntoResponse {
    let (healthy, report) = operations.health();
    let status = if healthy { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE };
    (status, axum::Json(report))
}
