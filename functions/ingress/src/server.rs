//! [`serve_http`]: the router on a TCP listener for `kuuki serve`, with the limits a
//! server on the open internet needs (`axum::serve` has none): a header-read timeout,
//! a whole-request timeout and a cap on open connections.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::future::Future;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tower::ServiceExt;
use tower_http::timeout::TimeoutLayer;

/// How long a client may take and how many may be connected at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerLimits {
    /// From the connection's first byte (or the end of its previous response) to the
    /// end of a request's headers; idle connections close when it runs out.
    pub header_timeout: Duration,
    /// From complete headers to the handler's answer, reading the body included; the
    /// client then gets 408.
    pub request_timeout: Duration,
    /// Open connections; see [`admit`] for what happens to the next one.
    pub max_connections: usize,
}

impl Default for ServerLimits {
    /// Slack gives up on an answer after 3 s, so 10 s never cuts off an honest request.
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(10),
            max_connections: 1024,
        }
    }
}

/// Serves `router` on `listener` until `shutdown` resolves, then lets the requests in
/// progress finish (for at most one header and one request timeout) and returns.
///
/// The header timeout is hyper's `header_read_timeout`. In hyper 1.12 it also covers
/// keep-alive connections waiting for their next request: `proto/h1/conn.rs` starts
/// the timer on the first poll of every request head, and `State::idle` sets
/// `notify_read` after each response precisely so that the next head's timer starts
/// at once. So no separate idle timeout is needed.
pub async fn serve_http(
    listener: TcpListener,
    router: Router,
    limits: ServerLimits,
    shutdown: impl Future<Output = ()> + Send,
) -> std::io::Result<()> {
    if limits.max_connections == 0 || limits.max_connections > Semaphore::MAX_PERMITS.min(u32::MAX as usize) {
        return Err(std::io::Error::other(format!("max_connections must be 1 to {}", u32::MAX)));
    }
    let router = router.layer(TimeoutLayer::with_status_code(StatusCode::REQUEST_TIMEOUT, limits.request_timeout));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new()).header_read_timeout(limits.header_timeout);
    let permits = Arc::new(Semaphore::new(limits.max_connections));
    let open = Arc::new(OpenConnections::default());
    let (stop, stopping) = watch::channel(());
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(error) => {
                    tracing::warn!(%error, "could not accept a connection");
                    // Out of file descriptors (EMFILE, ENFILE): a soft limit below the cap
                    // must not let idle sockets lock everyone out either.
                    if matches!(error.raw_os_error(), Some(23 | 24)) {
                        open.evict_oldest_idle();
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let Some(permit) = admit(&permits, &open).await else {
            tracing::warn!(max = limits.max_connections, "refused a connection: every connection is inside a request");
            continue;
        };
        let (id, connection) = open.register();
        let service = hyper::service::service_fn({
            let (router, connection) = (router.clone(), connection.clone());
            move |request: Request<hyper::body::Incoming>| {
                let (router, connection) = (router.clone(), connection.clone());
                async move {
                    let Some(_busy) = connection.start_request() else {
                        // Evicted while its headers arrived: it closes as this returns.
                        return Ok::<_, Infallible>(StatusCode::SERVICE_UNAVAILABLE.into_response());
                    };
                    router.oneshot(request).await
                }
            }
        });
        let conn = http.serve_connection(TokioIo::new(stream), service);
        let (open, mut stopping) = (open.clone(), stopping.clone());
        tokio::spawn(async move {
            let _permit = permit;
            tokio::pin!(conn);
            let mut shutting_down = false;
            loop {
                tokio::select! {
                    // The connection first, so a response written in this poll is flushed
                    // before an eviction drops the socket.
                    biased;
                    result = conn.as_mut() => {
                        if let Err(error) = result {
                            tracing::debug!(%error, "connection ended with an error");
                        }
                        break;
                    }
                    () = connection.evicted.notified() => break,
                    _ = stopping.changed(), if !shutting_down => {
                        shutting_down = true;
                        if connection.try_evict() {
                            break;
                        }
                        conn.as_mut().graceful_shutdown();
                    }
                }
            }
            open.remove(id);
        });
    }
    drop(stop);
    // Every permit back means every connection has ended.
    let all = limits.max_connections as u32;
    let _ = tokio::time::timeout(limits.header_timeout + limits.request_timeout, permits.acquire_many(all)).await;
    Ok(())
}

/// A permit for a new connection. At the cap, the oldest connection that is not inside
/// a request is closed to make room: waiting instead would leave an honest request
/// queued behind idle or slow sockets until their header timeout, and refusing would
/// let a few idle sockets, reopened as they time out, lock everyone out. A connection
/// inside a request is never closed; if every one is, the new connection is refused
/// at once (the request timeout frees them soon).
async fn admit(permits: &Arc<Semaphore>, open: &OpenConnections) -> Option<OwnedSemaphorePermit> {
    if let Ok(permit) = permits.clone().try_acquire_owned() {
        return Some(permit);
    }
    if !open.evict_oldest_idle() {
        return None;
    }
    // The evicted connection's task drops it and its permit as soon as it is polled.
    tokio::time::timeout(Duration::from_secs(1), permits.clone().acquire_owned()).await.ok()?.ok()
}

const IDLE: u8 = 0;
const IN_REQUEST: u8 = 1;
const EVICTED: u8 = 2;

/// One open connection, as the accept loop sees it.
struct Connection {
    state: AtomicU8,
    evicted: Notify,
}

impl Connection {
    fn start_request(self: &Arc<Self>) -> Option<InRequest> {
        self.state.compare_exchange(IDLE, IN_REQUEST, Ordering::AcqRel, Ordering::Acquire).ok()?;
        Some(InRequest(self.clone()))
    }

    /// Closes the connection unless a request is in progress on it.
    fn try_evict(&self) -> bool {
        let evicted = self.state.compare_exchange(IDLE, EVICTED, Ordering::AcqRel, Ordering::Acquire).is_ok();
        if evicted {
            self.evicted.notify_one();
        }
        evicted
    }
}

/// Marks its connection as inside a request until dropped.
struct InRequest(Arc<Connection>);

impl Drop for InRequest {
    fn drop(&mut self) {
        let _ = self.0.state.compare_exchange(IN_REQUEST, IDLE, Ordering::AcqRel, Ordering::Acquire);
    }
}

/// The open connections, oldest first.
#[derive(Default)]
struct OpenConnections {
    next_id: AtomicU64,
    by_age: Mutex<BTreeMap<u64, Arc<Connection>>>,
}

impl OpenConnections {
    fn register(&self) -> (u64, Arc<Connection>) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let connection = Arc::new(Connection { state: AtomicU8::new(IDLE), evicted: Notify::new() });
        self.by_age.lock().unwrap().insert(id, connection.clone());
        (id, connection)
    }

    fn remove(&self, id: u64) {
        self.by_age.lock().unwrap().remove(&id);
    }

    fn evict_oldest_idle(&self) -> bool {
        self.by_age.lock().unwrap().values().any(|connection| connection.try_evict())
    }
}
