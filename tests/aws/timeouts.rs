//! AWS calls that hang or lose their answer: each is cut off within its share of the
//! time budget, and a retried claim is held by its caller.

use super::*;

/// An endpoint that takes every connection and never answers (a hung network path).
async fn endpoint_that_never_answers() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((connection, _)) = listener.accept().await {
            held.push(connection);
        }
    });
    endpoint
}

/// An AWS endpoint that takes the connection and never answers (a hung network path)
/// fails the call within kuuki's AWS call timeout, with a timeout error, instead of
/// holding the job until Lambda kills its whole batch. Needs no emulator.
#[tokio::test]
async fn an_aws_call_that_gets_no_answer_fails_within_its_timeout() {
    use kuuki::budget::{AWS_ATTEMPT_TIMEOUT, AWS_CALL_TIMEOUT};
    let endpoint = endpoint_that_never_answers().await;
    let config = kuuki::adapters::aws::config::load().await;
    // On the client's own config: it wins over AWS_ENDPOINT_URL_DYNAMODB (the emulators').
    let config = aws_sdk_dynamodb::config::Builder::from(&config)
        .endpoint_url(endpoint)
        .region(aws_config::Region::new("us-east-1"))
        .credentials_provider(aws_sdk_dynamodb::config::Credentials::new("test", "test", None, None, "test"))
        .build();
    let client = aws_sdk_dynamodb::Client::from_conf(config);
    let started = std::time::Instant::now();
    let call = client
        .get_item()
        .table_name("messages")
        .key("pk", aws_sdk_dynamodb::types::AttributeValue::S("C1".into()))
        .send();
    let outcome = tokio::time::timeout(AWS_CALL_TIMEOUT + Duration::from_secs(15), call)
        .await
        .expect("the call ended by its own timeout, not the test's");
    let error = outcome.expect_err("no answer came");
    assert!(
        matches!(error, aws_sdk_dynamodb::error::SdkError::TimeoutError(_)),
        "a timeout, not another failure: {error:?}"
    );
    let took = started.elapsed();
    assert!(took >= AWS_ATTEMPT_TIMEOUT, "it waited for an answer first");
    assert!(took < AWS_CALL_TIMEOUT + Duration::from_secs(3), "cut off at the call's timeout: {took:?}");
}

/// A proxy to `upstream` that forwards every HTTP/1.1 request and its answer, except
/// that the first request whose body contains `marker` reaches the upstream and its
/// answer is dropped with the connection (an answer lost on the way back).
async fn proxy_losing_one_answer(upstream: String, marker: &'static str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    /// One whole HTTP message (headers and a Content-Length body), or None at the end.
    async fn read_message(stream: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
        let mut data = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                if data.len() >= end + 4 + length {
                    return Some(data);
                }
            }
            let read = stream.read(&mut buf).await.ok()?;
            if read == 0 {
                return None;
            }
            data.extend_from_slice(&buf[..read]);
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let upstream = upstream.trim_start_matches("http://").to_owned();
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            let (upstream, dropped) = (upstream.clone(), dropped.clone());
            tokio::spawn(async move {
                while let Some(request) = read_message(&mut client).await {
                    let mut server = tokio::net::TcpStream::connect(&upstream).await.unwrap();
                    server.write_all(&request).await.unwrap();
                    let Some(answer) = read_message(&mut server).await else { return };
                    let lose = String::from_utf8_lossy(&request).contains(marker)
                        && !dropped.swap(true, std::sync::atomic::Ordering::SeqCst);
                    if lose {
                        return;
                    }
                    client.write_all(&answer).await.unwrap();
                }
            });
        }
    });
    address
}

/// A claim whose first attempt DynamoDB applied but whose answer was lost is retried
/// by the SDK; the retry finds the claim its own call took and holds it, instead of
/// reading it as another delivery's and waiting out the lease.
#[ignore = "needs DynamoDB Local and moto: ./scripts/test runs it (scripts/with-emulators cargo test -- --include-ignored)"]
#[tokio::test]
async fn a_claim_retried_after_its_answer_was_lost_is_held_by_its_caller() {
    let (dynamo, _) = emulators("a_claim_retried_after_its_answer_was_lost_is_held_by_its_caller");
    // Now by the machine's clock: DynamoDB Local's TTL deleter (real clock) would remove
    // a claim dated in the past, and the second call would find the key free.
    let clock = Arc::new(VirtualClock::new(kuuki::ports::Clock::now(&kuuki::adapters::system::SystemClock)));
    let names = TableNames {
        messages: unique("messages"),
        channels: unique("channels"),
        ledger: unique("ledger"),
        facts: unique("facts"),
    };
    let direct = aws_sdk_dynamodb::Client::new(&sdk(&dynamo).await);
    create_tables(&direct, &names).await.unwrap();
    let proxy = proxy_losing_one_answer(dynamo.clone(), "respond:CLOST:1.000001").await;
    // On the client's own config: it wins over AWS_ENDPOINT_URL_DYNAMODB (the emulator's).
    let config = aws_sdk_dynamodb::config::Builder::from(&sdk(&dynamo).await).endpoint_url(proxy).build();
    let store = DynamoStore::new(
        aws_sdk_dynamodb::Client::from_conf(config),
        names,
        clock.clone(),
        Duration::from_secs(3650 * 86_400),
    );
    let outcome = store.claim("respond:CLOST:1.000001", clock.now(), Duration::from_secs(270)).await.unwrap();
    assert_eq!(outcome, ClaimOutcome::Claimed, "the caller holds its own claim");
    let again = store.claim("respond:CLOST:1.000001", clock.now(), Duration::from_secs(270)).await.unwrap();
    assert!(matches!(again, ClaimOutcome::InProgress { .. }), "another call still finds it held: {again:?}");
}

/// An SDK configuration (kuuki's, from `config::load`) that sends every service to
/// `endpoint`, with test credentials, and reads no endpoint from the environment (the
/// emulators' `AWS_ENDPOINT_URL*` would otherwise win over it).
async fn config_for_fake(endpoint: String) -> aws_config::SdkConfig {
    /// Service settings from nowhere.
    #[derive(Debug)]
    struct NoEnvironment;
    impl aws_types::service_config::LoadServiceConfig for NoEnvironment {
        fn load_config(&self, _: aws_types::service_config::ServiceConfigKey<'_>) -> Option<String> {
            None
        }
    }
    let mut config = kuuki::adapters::aws::config::load().await.into_builder();
    config.set_endpoint_url(Some(endpoint));
    config.set_region(Some(aws_config::Region::new("us-east-1")));
    config.set_credentials_provider(Some(aws_sdk_dynamodb::config::SharedCredentialsProvider::new(
        aws_sdk_dynamodb::config::Credentials::new("test", "test", None, None, "test"),
    )));
    config.set_service_config(Some(NoEnvironment));
    config.build()
}

/// Settings whose worker timeout (48 s) leaves a margin of 6 s: the LLM and chat calls
/// are made short to fit.
fn small_budget_settings() -> kuuki::config::Settings {
    let vars = std::collections::HashMap::from(
        [
            ("WORKER_TIMEOUT_SECONDS", "48"),
            ("LLM_TIMEOUT_SECONDS", "5"),
            ("LLM_MAX_RETRIES", "0"),
            ("CHAT_TIMEOUT_SECONDS", "2"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    kuuki::config::Settings::from_vars(&vars).unwrap()
}

/// How long a store read through `adapters` takes to fail against an endpoint that
/// never answers; it must fail with a timeout, by the clients' own cut-off.
async fn time_to_fail_a_hung_read(adapters: &kuuki::adapters::aws::AwsAdapters) -> Duration {
    use kuuki::budget::AWS_CALL_TIMEOUT;
    use kuuki::ports::MessageStore;
    let started = std::time::Instant::now();
    let (channel, ts) = (ChannelId("C1".into()), Ts::new("1767603600.000100"));
    let read = adapters.store.get_message(&channel, &ts);
    let outcome = tokio::time::timeout(AWS_CALL_TIMEOUT + Duration::from_secs(15), read)
        .await
        .expect("the call ended by its own timeout, not the test's");
    let error = outcome.expect_err("no answer came");
    assert!(error.to_string().contains("TimeoutError"), "a timeout, not another failure: {error}");
    started.elapsed()
}

/// With a small time budget the clients jobs use cut a call off within the job's
/// margin, not at the longest timeout: `WORKER_TIMEOUT_SECONDS=48` leaves a margin of
/// 6 s, so a store read from an endpoint that never answers fails after about 6 s (two
/// attempts of 3 s) where the default cut-off would hold the job for 20 s. Needs no
/// emulator.
#[tokio::test]
async fn a_small_budget_cuts_a_hung_aws_call_off_within_its_margin() {
    use kuuki::adapters::aws::AwsAdapters;
    use kuuki::adapters::platforms::Role;
    let settings = small_budget_settings();
    let budget = settings.time_budget();
    assert_eq!(budget.margin, Duration::from_secs(6));
    let config = config_for_fake(endpoint_that_never_answers().await).await;
    let adapters =
        AwsAdapters::for_role(&config, Role::Worker, &settings, Arc::new(kuuki::adapters::system::SystemClock));
    let took = time_to_fail_a_hung_read(&adapters).await;
    assert!(took >= budget.aws_attempt(), "it waited for an answer first: {took:?}");
    assert!(took < budget.margin + Duration::from_secs(2), "cut off within the margin: {took:?}");
}

/// The ingress's calls are cut off at the shortest (4 s: two attempts of 2 s), well
/// inside its own 10 s Lambda timeout, whatever the workers' budget: a hung call fails
/// the request with an error the log names instead of Lambda stopping it. Needs no
/// emulator.
#[tokio::test]
async fn the_ingress_cuts_a_hung_aws_call_off_inside_its_own_timeout() {
    use kuuki::adapters::aws::AwsAdapters;
    use kuuki::adapters::platforms::Role;
    use kuuki::budget::{AWS_MIN_ATTEMPT_TIMEOUT, AWS_MIN_CALL_TIMEOUT};
    // The default worker budget, whose job calls may take 20 s.
    let settings = kuuki::config::Settings::from_vars(&std::collections::HashMap::new()).unwrap();
    let config = config_for_fake(endpoint_that_never_answers().await).await;
    let adapters =
        AwsAdapters::for_role(&config, Role::Ingress, &settings, Arc::new(kuuki::adapters::system::SystemClock));
    let took = time_to_fail_a_hung_read(&adapters).await;
    assert!(took >= AWS_MIN_ATTEMPT_TIMEOUT, "it waited for an answer first: {took:?}");
    assert!(took < AWS_MIN_CALL_TIMEOUT + Duration::from_secs(2), "cut off at the shortest call: {took:?}");
}

/// The long poll of `kuuki serve --aws` keeps the longest cut-offs when the budget is
/// small: SQS answers a poll of an empty queue only after its wait (up to 5 s), and a
/// poll cut off at the small budget's 3 s attempt would lose what SQS handed it until
/// the visibility timeout. Here a fake SQS answers after 4 s with one message. Needs no
/// emulator.
#[tokio::test]
async fn a_long_poll_outlasts_a_small_budgets_attempts() {
    use kuuki::adapters::aws::AwsAdapters;
    use wiremock::matchers::{header, method};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let sqs = MockServer::start().await;
    Mock::given(method("POST"))
        .and(header("x-amz-target", "AmazonSQS.ReceiveMessage"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "application/x-amz-json-1.0")
                .set_body_string(r#"{"Messages": [{"MessageId": "m1", "ReceiptHandle": "r1", "Body": "{}"}]}"#)
                .set_delay(Duration::from_secs(4)),
        )
        .expect(1)
        .mount(&sqs)
        .await;
    let settings = small_budget_settings();
    assert!(settings.time_budget().aws_attempt() < Duration::from_secs(4), "the budget's attempts are shorter");
    let config = config_for_fake(sqs.uri()).await;
    let adapters = AwsAdapters::for_jobs(&config, &settings, Arc::new(kuuki::adapters::system::SystemClock), None);
    let received =
        kuuki::adapters::aws::sqs::receive_batch(adapters.queue.client(), &format!("{}/queue/judge", sqs.uri()))
            .await
            .expect("the poll waited for SQS's answer");
    assert_eq!(received.iter().map(|m| m.message_id()).collect::<Vec<_>>(), [Some("m1")]);
}

/// Settling a batch (telling SQS when its failed messages come back) retries a stalled
/// attempt inside the settle window: its attempts are cut at half the window, not at
/// the job calls' 10 s, which would spend the whole window on one attempt and leave the
/// messages to the 24-minute visibility timeout. A fake SQS stalls the first attempt.
/// Needs no emulator.
#[tokio::test]
async fn settling_a_batch_retries_a_stalled_attempt_within_its_window() {
    use kuuki::adapters::aws::AwsAdapters;
    use kuuki::worker::FailedMessage;
    use wiremock::matchers::{header, method};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let sqs = MockServer::start().await;
    let target = || header("x-amz-target", "AmazonSQS.ChangeMessageVisibilityBatch");
    let answer = |delay: Duration| {
        ResponseTemplate::new(200)
            .insert_header("content-type", "application/x-amz-json-1.0")
            .set_body_string(r#"{"Successful": [{"Id": "0"}], "Failed": []}"#)
            .set_delay(delay)
    };
    Mock::given(method("POST"))
        .and(target())
        .respond_with(answer(Duration::from_secs(30)))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&sqs)
        .await;
    Mock::given(method("POST")).and(target()).respond_with(answer(Duration::ZERO)).with_priority(2).mount(&sqs).await;
    let config = config_for_fake(sqs.uri()).await;
    let settings = kuuki::config::Settings::from_vars(&std::collections::HashMap::new()).unwrap();
    let adapters = AwsAdapters::for_jobs(&config, &settings, Arc::new(kuuki::adapters::system::SystemClock), None);
    let failed = [FailedMessage { id: "m1".into(), retry_after: Some(Duration::from_secs(30)) }];
    // Attempts of 4 s; a retry waits up to 1 s first (the SDK's backoff).
    let window = Duration::from_secs(8);
    kuuki::adapters::aws::sqs::retry_later(
        adapters.queue.client(),
        &format!("{}/queue/judge", sqs.uri()),
        &failed,
        |_| Some("receipt-1"),
        window,
    )
    .await;
    let calls = sqs.received_requests().await.unwrap_or_default().len();
    assert_eq!(calls, 2, "the stalled attempt was given up and retried within the {window:?} window");
}
