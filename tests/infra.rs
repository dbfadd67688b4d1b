//! The deployed stack against the code: infra/template.yaml read as data, so the
//! numbers and names the code relies on cannot drift from what is deployed.

use std::collections::BTreeSet;

use kuuki::adapters::aws::emf::{self, LlmCall};
use serde_json::Value as Json;
use serde_yaml::Value;

/// Every SQS worker's function timeout in seconds (`WORKER_TIMEOUT_SECONDS`'s default).
/// `shared/src/budget.rs` must agree.
const WORKER_TIMEOUT_SECONDS: u64 = kuuki::budget::DEFAULT_WORKER_TIMEOUT_SECONDS;
/// A worker queue's visibility timeout is this many times the function timeout (AWS's
/// advice for SQS event sources). `shared/src/budget.rs` must agree.
const VISIBILITY_TIMEOUT_FACTOR: u64 = kuuki::budget::VISIBILITY_PER_WORKER_TIMEOUT as u64;

const WORKER_QUEUES: [&str; 5] = ["JudgeQueue", "RespondQueue", "SummarizeQueue", "ReflectQueue", "ForgetQueue"];

fn template() -> Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/template.yaml");
    let text = std::fs::read_to_string(path).expect("infra/template.yaml is readable");
    serde_yaml::from_str(&text).expect("infra/template.yaml is YAML")
}

/// The value of a short-form intrinsic such as `!Ref X` (tag `Ref`), or `None`.
fn intrinsic<'a>(value: &'a Value, function: &str) -> Option<&'a Value> {
    match value {
        Value::Tagged(tagged) if tagged.tag == function => Some(&tagged.value),
        _ => None,
    }
}

/// The resource a `!GetAtt Resource.Attribute` names.
fn get_att_resource(value: &Value) -> Option<&str> {
    intrinsic(value, "GetAtt")?.as_str()?.split('.').next()
}

/// The path of a `!FindInMap [Map, Key, Field]`.
fn find_in_map(value: &Value) -> Option<Vec<&str>> {
    let path = intrinsic(value, "FindInMap")?.as_sequence()?;
    path.iter().map(Value::as_str).collect()
}

fn budget(t: &Value, field: &str) -> u64 {
    t["Mappings"]["Budget"]["Worker"][field]
        .as_u64()
        .unwrap_or_else(|| panic!("Mappings.Budget.Worker.{field} is a number"))
}

/// The worker functions (fed by an SQS event source), each with its queue.
fn worker_functions(t: &Value) -> Vec<(&str, &Value, &str)> {
    let resources = t["Resources"].as_mapping().expect("Resources");
    let mut workers = Vec::new();
    for (name, resource) in resources {
        if resource["Type"] != "AWS::Serverless::Function" {
            continue;
        }
        let Some(events) = resource["Properties"]["Events"].as_mapping() else { continue };
        for event in events.values().filter(|e| e["Type"] == "SQS") {
            let queue =
                get_att_resource(&event["Properties"]["Queue"]).expect("an SQS event's Queue is !GetAtt Queue.Arn");
            workers.push((name.as_str().expect("a resource name"), resource, queue));
        }
    }
    workers
}

#[test]
fn the_budget_is_the_one_the_code_uses() {
    let t = template();
    let timeout = budget(&t, "TimeoutSeconds");
    assert_eq!(timeout, WORKER_TIMEOUT_SECONDS);
    assert_eq!(budget(&t, "VisibilityTimeoutSeconds"), VISIBILITY_TIMEOUT_FACTOR * timeout);
}

#[test]
fn every_worker_and_its_queue_run_on_the_one_time_budget() {
    let t = template();
    let timeout = Some(vec!["Budget", "Worker", "TimeoutSeconds"]);
    let visibility = Some(vec!["Budget", "Worker", "VisibilityTimeoutSeconds"]);
    let workers = worker_functions(&t);
    let queues: BTreeSet<&str> = workers.iter().map(|(_, _, queue)| *queue).collect();
    assert_eq!(queues, BTreeSet::from(WORKER_QUEUES), "a worker for every queue");
    assert_eq!(workers.len(), WORKER_QUEUES.len(), "one worker per queue");
    for (name, function, queue) in workers.iter().copied() {
        let properties = &function["Properties"];
        assert_eq!(find_in_map(&properties["Timeout"]), timeout, "{name}'s Timeout");
        let variable = &properties["Environment"]["Variables"]["WORKER_TIMEOUT_SECONDS"];
        assert_eq!(find_in_map(variable), timeout, "{name}'s WORKER_TIMEOUT_SECONDS");
        for event in properties["Events"].as_mapping().unwrap().values().filter(|e| e["Type"] == "SQS") {
            let types = event["Properties"]["FunctionResponseTypes"].as_sequence();
            assert!(
                types.is_some_and(|types| types.iter().any(|t| t == "ReportBatchItemFailures")),
                "{name} reports failed batch items, so one bad job does not retry the batch"
            );
        }
        let queue_visibility = &t["Resources"][queue]["Properties"]["VisibilityTimeout"];
        assert_eq!(find_in_map(queue_visibility), visibility, "{queue}'s VisibilityTimeout");
        // SAM's SQS event source lets it receive and delete, not set when a failed job
        // comes back (kuuki::worker::redelivery_delay).
        let own: BTreeSet<&str> = workers.iter().filter(|(other, ..)| *other == name).map(|(.., q)| *q).collect();
        assert_eq!(
            queues_allowed(function, "sqs:ChangeMessageVisibility"),
            own,
            "{name} sets the visibility of its own queues' messages only"
        );
    }
}

/// The queues a function's policy lets it send to.
fn sends_to(function: &Value) -> BTreeSet<&str> {
    queues_allowed(function, "sqs:SendMessage")
}

/// The queues a function's policy allows `action` on (statements naming it alone).
fn queues_allowed<'t>(function: &'t Value, action: &str) -> BTreeSet<&'t str> {
    let mut queues = BTreeSet::new();
    for policy in function["Properties"]["Policies"].as_sequence().into_iter().flatten() {
        for statement in policy["Statement"].as_sequence().into_iter().flatten() {
            if statement["Action"] != action {
                continue;
            }
            let resources = match &statement["Resource"] {
                Value::Sequence(list) => list.iter().collect(),
                one => vec![one],
            };
            queues.extend(resources.into_iter().filter_map(get_att_resource));
        }
    }
    queues
}

/// Each worker function runs the job kinds its binary declares (the kind it is named
/// after, and for the reflect worker forget requests too), fed by exactly those kinds'
/// queues, and may send to exactly the queues of the jobs its work queues (least
/// privilege, and no job that fails for want of a permission).
#[test]
fn each_worker_runs_its_own_kind_and_sends_only_where_its_jobs_go() {
    use kuuki::budget::JobKind;
    let t = template();
    let queue_of = |kind: JobKind| format!("{kind:?}Queue");
    // What each function queues: ingress a judgment, an answer, a REMEMBER or a FORGET;
    // a judgment itself again (a wait), an answer and the memory triggers; an answer
    // and REMEMBER the memory triggers (a summary, a reflection); a FORGET the
    // summaries of the channels it touched and its own second look (a FORGET_LATE on
    // the forget queue), a lull's reflection itself again.
    let sends = [
        ("IngressFunction", vec![JobKind::Judge, JobKind::Respond, JobKind::Summarize, JobKind::Forget]),
        ("JudgeFunction", vec![JobKind::Judge, JobKind::Respond, JobKind::Summarize, JobKind::Reflect]),
        ("RespondFunction", vec![JobKind::Summarize, JobKind::Reflect]),
        ("SummarizeFunction", vec![JobKind::Summarize, JobKind::Reflect]),
        ("ReflectFunction", vec![JobKind::Summarize, JobKind::Reflect, JobKind::Forget]),
    ];
    for (name, kinds) in sends {
        let expected: BTreeSet<String> = kinds.into_iter().map(queue_of).collect();
        let actual: BTreeSet<String> = sends_to(&t["Resources"][name]).into_iter().map(str::to_owned).collect();
        assert_eq!(actual, expected, "the queues {name} may send to");
    }
    let workers = worker_functions(&t);
    let names: BTreeSet<&str> = workers.iter().map(|(name, ..)| *name).collect();
    for name in names {
        let function = &t["Resources"][name];
        let binary = function["Metadata"]["BuildProperties"]["Binary"].as_str().expect("a worker's Binary");
        assert!(JobKind::ALL.iter().any(|k| k.as_str() == binary), "{name} is named after a job kind");
        let main = std::fs::read_to_string(format!("{}/../functions/{binary}/src/main.rs", env!("CARGO_MANIFEST_DIR")))
            .unwrap();
        // `run_sqs_worker(&[kuuki::budget::JobKind::A, kuuki::budget::JobKind::B])`
        let call = main.split("run_sqs_worker(&[").nth(1).and_then(|rest| rest.split("])").next());
        let call = call.unwrap_or_else(|| panic!("functions/{binary} calls run_sqs_worker(&[…])"));
        let declared: BTreeSet<String> = call
            .split(',')
            .map(|kind| kind.trim().trim_start_matches("kuuki::budget::JobKind::").to_owned() + "Queue")
            .collect();
        assert!(declared.contains(&queue_of(JobKind::ALL.into_iter().find(|k| k.as_str() == binary).unwrap())));
        let fed: BTreeSet<String> =
            workers.iter().filter(|(other, ..)| *other == name).map(|(.., queue)| queue.to_string()).collect();
        assert_eq!(fed, declared, "{name} is fed by the queues of the kinds functions/{binary} runs");
    }
}

/// One metric an alarm reads: namespace, name and dimensions (name, literal value or
/// `None` for an intrinsic resolved at deploy).
struct AlarmMetric {
    namespace: String,
    name: String,
    dimensions: Vec<(String, Option<String>)>,
}

/// The metrics an alarm reads: its one metric, or each of its metric-math queries'.
fn alarm_metrics(alarm: &Value) -> Vec<AlarmMetric> {
    let read = |metric: &Value| {
        let dimensions = metric["Dimensions"].as_sequence().map(Vec::as_slice).unwrap_or_default();
        AlarmMetric {
            namespace: metric["Namespace"].as_str().expect("Namespace").to_owned(),
            name: metric["MetricName"].as_str().expect("MetricName").to_owned(),
            dimensions: dimensions
                .iter()
                .map(|d| {
                    // A `!Ref` value is resolved at deploy: any value matches it.
                    let literal = match &d["Value"] {
                        Value::Tagged(_) => None,
                        value => value.as_str().map(str::to_owned),
                    };
                    (d["Name"].as_str().expect("a dimension's Name").to_owned(), literal)
                })
                .collect(),
        }
    };
    match alarm["Properties"]["Metrics"].as_sequence() {
        Some(queries) => {
            queries.iter().filter_map(|query| query.get("MetricStat")).map(|s| read(&s["Metric"])).collect()
        }
        None => vec![read(&alarm["Properties"])],
    }
}

/// Whether the EMF `line` publishes `metric` under exactly its dimensions: a directive in
/// its namespace that declares the metric with that dimension set, and the line carrying
/// each literal dimension value.
fn publishes(line: &Json, metric: &AlarmMetric) -> bool {
    let wanted: BTreeSet<&str> = metric.dimensions.iter().map(|(name, _)| name.as_str()).collect();
    let directives = line["_aws"]["CloudWatchMetrics"].as_array().expect("an EMF line");
    let declared = directives.iter().any(|directive| {
        directive["Namespace"] == metric.namespace.as_str()
            && directive["Metrics"].as_array().unwrap().iter().any(|m| m["Name"] == metric.name.as_str())
            && directive["Dimensions"].as_array().unwrap().iter().any(|set| {
                let set: BTreeSet<&str> = set.as_array().unwrap().iter().map(|d| d.as_str().unwrap()).collect();
                set == wanted
            })
    });
    let values_match = metric
        .dimensions
        .iter()
        .all(|(name, value)| value.as_ref().is_none_or(|value| line[name.as_str()] == value.as_str()));
    declared && values_match && line[metric.name.as_str()].is_number()
}

#[test]
fn the_llm_failure_rate_alarm_reads_metrics_every_llm_call_publishes() {
    let t = template();
    let metrics = alarm_metrics(&t["Resources"]["LlmFailureRateAlarm"]);
    let names: BTreeSet<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, BTreeSet::from(["LlmCalls", "LlmFailures"]));
    // Exactly the line CountingLlm prints after each call, for a failed and a good one.
    for ok in [false, true] {
        let call = LlmCall {
            function: "kuuki-JudgeFunction-abc",
            role: "judge",
            ok,
            input_tokens: 100,
            output_tokens: 20,
            latency: std::time::Duration::from_millis(800),
        };
        let line = emf::llm_call_line(1_700_000_000_000, &call);
        for metric in &metrics {
            assert!(
                publishes(&line, metric),
                "the alarm reads {}/{} with dimensions {:?}, which no LLM call publishes: {line}",
                metric.namespace,
                metric.name,
                metric.dimensions
            );
        }
    }
}

#[test]
fn every_function_is_given_the_persona_parameter() {
    let t = template();
    assert_eq!(t["Parameters"]["PersonaToml"]["Default"], "", "the built-in persona by default");
    let variable = &t["Globals"]["Function"]["Environment"]["Variables"]["PERSONA_TOML"];
    assert_eq!(intrinsic(variable, "Ref").and_then(Value::as_str), Some("PersonaToml"));
}

/// `text` with every `${X}` of `!Sub` written as `X`.
fn without_sub_markers(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        let end = start + rest[start..].find('}').expect("every ${ is closed");
        out.push_str(&rest[..start]);
        out.push_str(&rest[start + 2..end]);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// The dashboard's metrics as (namespace, metric, dimension value) with `${X}` read as `X`.
fn dashboard_metrics(t: &Value) -> BTreeSet<(String, String, String)> {
    let body = intrinsic(&t["Resources"]["Dashboard"]["Properties"]["DashboardBody"], "Sub")
        .and_then(Value::as_str)
        .expect("DashboardBody is !Sub text");
    let dashboard: Json = serde_json::from_str(&without_sub_markers(body)).expect("the dashboard body is JSON");
    let mut metrics = BTreeSet::new();
    for widget in dashboard["widgets"].as_array().unwrap() {
        for metric in widget["properties"]["metrics"].as_array().into_iter().flatten() {
            let parts: Vec<&str> = metric.as_array().unwrap().iter().filter_map(Json::as_str).collect();
            if let [namespace, name, _, value, ..] = parts[..] {
                metrics.insert((namespace.to_owned(), name.to_owned(), value.to_owned()));
            }
        }
    }
    metrics
}

#[test]
fn the_dashboard_shows_every_worker_queue_and_dead_letter_queue() {
    let t = template();
    let shown = dashboard_metrics(&t);
    let sqs = |metric: &str, queue: &str| ("AWS/SQS".to_owned(), metric.to_owned(), format!("{queue}.QueueName"));
    for queue in WORKER_QUEUES {
        let dead_letters =
            get_att_resource(&t["Resources"][queue]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"])
                .expect("every worker queue has a dead-letter queue");
        for wanted in [
            sqs("ApproximateNumberOfMessagesVisible", queue),
            sqs("ApproximateAgeOfOldestMessage", queue),
            sqs("ApproximateNumberOfMessagesVisible", dead_letters),
        ] {
            assert!(shown.contains(&wanted), "the dashboard lacks {wanted:?}");
        }
    }
}

/// Fails unless every metric of `alarm` is published by `line` (the line the code prints).
fn assert_alarm_reads(t: &Value, alarm: &str, line: &Json) {
    for metric in alarm_metrics(&t["Resources"][alarm]) {
        assert!(
            publishes(line, &metric),
            "{alarm} reads {}/{} with dimensions {:?}, which the code does not publish: {line}",
            metric.namespace,
            metric.name,
            metric.dimensions
        );
    }
}

#[test]
fn every_alarm_notifies_the_alarm_topic_and_an_address_may_subscribe() {
    let t = template();
    let resources = t["Resources"].as_mapping().unwrap();
    let alarms: Vec<&str> = resources
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::CloudWatch::Alarm")
        .map(|(name, _)| name.as_str().unwrap())
        .collect();
    for wanted in [
        "SignatureRejectionsAlarm",
        "WorkerErrorsAlarm",
        "IngressErrorsAlarm",
        "LlmFailureRateAlarm",
        "RelayForwardFailuresAlarm",
        "RelayDisconnectedAlarm",
    ] {
        assert!(alarms.contains(&wanted), "no {wanted}");
    }
    for alarm in &alarms {
        let actions = t["Resources"][*alarm]["Properties"]["AlarmActions"].as_sequence();
        let notifies = actions.is_some_and(|actions| {
            actions.iter().any(|a| intrinsic(a, "Ref").and_then(Value::as_str) == Some("AlarmTopic"))
        });
        assert!(notifies, "{alarm} notifies nobody (AlarmActions without !Ref AlarmTopic)");
    }
    assert_eq!(t["Resources"]["AlarmTopic"]["Type"], "AWS::SNS::Topic");
    let subscription = &t["Resources"]["AlarmEmailSubscription"];
    assert_eq!(subscription["Properties"]["Protocol"], "email");
    assert_eq!(intrinsic(&subscription["Properties"]["Endpoint"], "Ref").and_then(Value::as_str), Some("AlarmEmail"));
    assert_eq!(subscription["Condition"], "MailsAlarms", "no subscription without an address");
    assert_eq!(t["Parameters"]["AlarmEmail"]["Default"], "", "the address is optional");
}

#[test]
fn the_worker_errors_alarm_watches_every_worker() {
    let t = template();
    let watched: BTreeSet<String> = t["Resources"]["WorkerErrorsAlarm"]["Properties"]["Metrics"]
        .as_sequence()
        .unwrap()
        .iter()
        .filter_map(|query| query.get("MetricStat"))
        .map(|stat| {
            assert_eq!(stat["Metric"]["MetricName"], "Errors");
            let value = &stat["Metric"]["Dimensions"][0]["Value"];
            intrinsic(value, "Ref").and_then(Value::as_str).expect("a function's !Ref").to_owned()
        })
        .collect();
    let workers: BTreeSet<String> = worker_functions(&t).into_iter().map(|(name, ..)| name.to_owned()).collect();
    assert_eq!(watched, workers);
}

#[test]
fn the_signature_and_relay_alarms_read_what_the_code_publishes() {
    let t = template();
    let rejection = kuuki_ingress::count_line(1_700_000_000_000, "kuuki-IngressFunction-abc", "SignatureRejections");
    assert_alarm_reads(&t, "SignatureRejectionsAlarm", &rejection);
    let stats = kuuki_discord_gateway::Stats::default();
    let relay = kuuki_discord_gateway::metrics_line(&stats, 1_700_000_000_000);
    assert_alarm_reads(&t, "RelayForwardFailuresAlarm", &relay);
    assert_alarm_reads(&t, "RelayDisconnectedAlarm", &relay);
    // A relay that stopped prints nothing: that is a disconnection too.
    assert_eq!(t["Resources"]["RelayDisconnectedAlarm"]["Properties"]["TreatMissingData"], "breaching");
    let shown = dashboard_metrics(&t);
    for metric in ["Forwarded", "ForwardFailures", "Reconnects", "Connected"] {
        let wanted = ("kuuki".to_owned(), metric.to_owned(), kuuki_discord_gateway::FUNCTION.to_owned());
        assert!(shown.contains(&wanted), "the dashboard lacks the relay's {metric}");
    }
}

#[test]
fn the_relay_rolls_back_a_deployment_that_never_turns_healthy() {
    let t = template();
    let breaker = &t["Resources"]["RelayService"]["Properties"]["DeploymentConfiguration"]["DeploymentCircuitBreaker"];
    assert_eq!((breaker["Enable"].as_bool(), breaker["Rollback"].as_bool()), (Some(true), Some(true)));
}

#[test]
fn the_memory_and_secrets_outlive_the_stack_and_logs_expire() {
    let t = template();
    let resources = t["Resources"].as_mapping().unwrap();
    let mut kept = 0;
    for (name, resource) in resources {
        let kept_kinds = ["AWS::DynamoDB::Table", "AWS::SecretsManager::Secret", "AWS::KMS::Key"];
        if kept_kinds.contains(&resource["Type"].as_str().unwrap()) {
            assert_eq!(resource["DeletionPolicy"], "Retain", "{name:?} is deleted with the stack");
            assert_eq!(resource["UpdateReplacePolicy"], "Retain", "{name:?} is dropped by a replacement");
            kept += 1;
        }
    }
    assert_eq!(kept, 13, "four tables, eight secrets (two for many Slack workspaces) and the tokens' KMS key");
    assert_eq!(t["Parameters"]["LogRetentionDays"]["Default"].as_u64(), Some(30));
    for (name, resource) in resources {
        let name = name.as_str().unwrap();
        match resource["Type"].as_str().unwrap() {
            "AWS::Serverless::Function" => {
                let group = intrinsic(&resource["Properties"]["LoggingConfig"]["LogGroup"], "Ref")
                    .and_then(Value::as_str)
                    .unwrap_or_else(|| panic!("{name} logs to Lambda's default group, kept forever"));
                let retention = &t["Resources"][group]["Properties"]["RetentionInDays"];
                assert_eq!(intrinsic(retention, "Ref").and_then(Value::as_str), Some("LogRetentionDays"), "{group}");
            }
            "AWS::Logs::LogGroup" => {
                let retention = &resource["Properties"]["RetentionInDays"];
                assert_eq!(intrinsic(retention, "Ref").and_then(Value::as_str), Some("LogRetentionDays"), "{name}");
            }
            _ => {}
        }
    }
}

/// The secrets a function is given (its `*_ARN` variables, the template's and its own)
/// and the ones its policy lets it read, by resource name.
fn secrets_of(t: &Value, function: &Value) -> (BTreeSet<String>, BTreeSet<String>) {
    let refs = |value: &Value| -> Vec<String> {
        let names = match intrinsic(value, "If") {
            Some(branches) => branches.as_sequence().unwrap()[1..].to_vec(),
            None => vec![value.clone()],
        };
        names.iter().filter_map(|v| intrinsic(v, "Ref").and_then(Value::as_str)).map(str::to_owned).collect()
    };
    let mut given = BTreeSet::new();
    for variables in
        [&t["Globals"]["Function"]["Environment"]["Variables"], &function["Properties"]["Environment"]["Variables"]]
    {
        for (name, value) in variables.as_mapping().into_iter().flatten() {
            if name.as_str().unwrap().ends_with("_ARN") && !name.as_str().unwrap().contains("QUEUE") {
                given.extend(refs(value).into_iter().filter(|r| r != "AWS::NoValue"));
            }
        }
    }
    let mut readable = BTreeSet::new();
    for policy in function["Properties"]["Policies"].as_sequence().unwrap() {
        for statement in policy["Statement"].as_sequence().into_iter().flatten() {
            if statement["Action"] == "secretsmanager:GetSecretValue" {
                for resource in statement["Resource"].as_sequence().unwrap() {
                    readable.extend(refs(resource));
                }
            }
        }
    }
    (given, readable)
}

#[test]
fn each_function_is_given_and_may_read_only_the_secrets_it_uses() {
    let t = template();
    // One Slack workspace's bot token, or many workspaces' client secret, which
    // refreshes a rotating token (their tokens open with the stack's KMS key).
    let platform = ["SlackBotToken", "SlackClientSecret", "DiscordBotToken"];
    let ingress: BTreeSet<String> = platform
        .iter()
        .chain(&["SlackSigningSecret", "SlackStateSecret", "DiscordPublicKey", "DiscordRelaySecret"])
        .map(|s| s.to_string())
        .collect();
    let worker: BTreeSet<String> = platform.iter().chain(&["LlmApiKey"]).map(|s| s.to_string()).collect();
    let (given, readable) = secrets_of(&t, &t["Resources"]["IngressFunction"]);
    assert_eq!(given, ingress, "the ingress verifies and signs in; it never calls the model");
    assert_eq!(readable, ingress);
    for (name, function, _) in worker_functions(&t) {
        let (given, readable) = secrets_of(&t, function);
        assert_eq!(given, worker, "{name} posts and calls the model");
        assert_eq!(readable, worker, "{name}");
    }
}

#[test]
fn sam_deploy_deploys_the_built_template_and_the_outputs_are_the_urls_to_paste() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../samconfig.toml");
    let config: toml::Table = toml::from_str(&std::fs::read_to_string(path).unwrap()).expect("samconfig.toml");
    let section = |command: &str| config["default"].get(command).and_then(|c| c.get("parameters"));
    // sam deploy uses .aws-sam/build/template.yaml (what sam build wrote, with each
    // function's bootstrap) unless it is given a template: the source one has none.
    for command in ["global", "deploy", "package"] {
        let template = section(command).and_then(|p| p.get("template_file")).and_then(toml::Value::as_str);
        assert!(
            template.is_none_or(|file| file.starts_with(".aws-sam/build")),
            "samconfig.toml's [default.{command}.parameters] template_file = {template:?}: deploy would package the \
             source template (CodeUri: .., no built bootstrap)"
        );
    }
    let built = section("build").and_then(|p| p.get("template_file")).and_then(toml::Value::as_str);
    assert_eq!(built, Some("infra/template.yaml"), "sam build reads the source template");

    let t = template();
    for (output, route) in [
        ("SlackEventsUrl", "slack/events"),
        ("SlackCommandsUrl", "slack/commands"),
        ("SlackInstallUrl", "slack/install"),
        ("DiscordInteractionsUrl", "discord/interactions"),
    ] {
        let value = intrinsic(&t["Outputs"][output]["Value"], "Sub").and_then(Value::as_str);
        // The Function URL ends in "/": the route follows it without another.
        assert_eq!(value, Some(format!("${{IngressFunctionUrl.FunctionUrl}}{route}").as_str()), "{output}");
    }
}
