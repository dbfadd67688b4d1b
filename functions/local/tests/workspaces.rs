//! Many Slack workspaces on one `kuuki serve` (issue 45), as a user meets them: a
//! browser adds kuuki through "Add to Slack" (the install page, Slack's authorize page
//! and its redirect back, played by a fake Slack that speaks the OAuth endpoints), then
//! signed events from each workspace are answered with that workspace's token and bot.

mod common;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{Served, post_signed, serve_with};
use serde_json::{Value, json};
use wiremock::matchers::{body_string_contains, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const CLIENT_ID: &str = "1111.2222";
const CLIENT_SECRET: &str = "client-s3cret-for-tests";
const STATE_SECRET: &str = "a-state-secret-at-least-thirty-two-characters";
const TOKEN_KEY: &str = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0";

/// A fake Slack with two workspaces to install into: `T1` (bot `UBOT1`, token
/// `xoxb-t1-secret`) and `T2` (`UBOT2`, `xoxb-t2-secret`), granted for codes
/// `code-T1`, `code-T2`; any other code is refused `invalid_code`.
async fn fake_slack() -> MockServer {
    let slack = MockServer::start().await;
    for team in ["T1", "T2"] {
        let token = format!("xoxb-{}-secret", team.to_lowercase());
        let grant = json!({
            "ok": true, "app_id": "A1", "access_token": token, "token_type": "bot",
            "scope": "app_mentions:read,chat:write", "bot_user_id": format!("UBOT{}", &team[1..]),
            "team": {"id": team, "name": format!("Team {team}")}, "enterprise": null,
            "authed_user": {"id": "UADMIN"}, "is_enterprise_install": false,
        });
        Mock::given(method("POST"))
            .and(path("/oauth.v2.access"))
            .and(body_string_contains(format!("code=code-{team}")))
            .respond_with(ResponseTemplate::new(200).set_body_json(grant))
            .mount(&slack)
            .await;
        let me = json!({"ok": true, "user_id": format!("UBOT{}", &team[1..]), "bot_id": format!("B{team}")});
        Mock::given(method("POST"))
            .and(path("/auth.test"))
            .and(header("authorization", format!("Bearer {token}").as_str()))
            .respond_with(ResponseTemplate::new(200).set_body_json(me))
            .mount(&slack)
            .await;
    }
    Mock::given(method("POST"))
        .and(path("/oauth.v2.access"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"ok": false, "error": "invalid_code"})))
        .with_priority(10)
        .mount(&slack)
        .await;
    common::mount_web_api(&slack).await;
    slack
}

fn serve_many(slack: &MockServer, data: &str) -> Served {
    let authorize = format!("{}/oauth/v2/authorize", slack.uri());
    let env = [
        ("SLACK_BOT_TOKEN", ""),
        ("SLACK_CLIENT_ID", CLIENT_ID),
        ("SLACK_CLIENT_SECRET", CLIENT_SECRET),
        ("SLACK_STATE_SECRET", STATE_SECRET),
        ("TOKEN_ENCRYPTION_KEY", TOKEN_KEY),
        ("SLACK_AUTHORIZE_URL", authorize.as_str()),
    ];
    serve_with(&slack.uri(), &env, &["--data", data]).expect("kuuki serve starts for many workspaces")
}

/// A browser that follows no redirect and keeps the cookie it is given.
fn browser() -> reqwest::Client {
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

/// `/slack/install` as a browser opens it: the authorize URL's query and the state cookie.
async fn start_install(base_url: &str) -> (Vec<(String, String)>, String, String) {
    let response = browser().get(format!("{base_url}/slack/install")).send().await.unwrap();
    assert_eq!(response.status(), 302, "sent to Slack");
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    let set_cookie = response.headers()["set-cookie"].to_str().unwrap().to_owned();
    let query: Vec<(String, String)> =
        serde_urlencoded::from_str(location.split_once('?').expect("a query").1).unwrap();
    (query, location, set_cookie)
}

fn param<'q>(query: &'q [(String, String)], name: &str) -> &'q str {
    &query.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no {name} in {query:?}")).1
}

/// Slack's redirect back to `base_url`, from a browser holding `cookie`.
async fn redirect_back(base_url: &str, query: &[(&str, &str)], cookie: Option<&str>) -> (u16, String) {
    let query = serde_urlencoded::to_string(query).unwrap();
    let mut request = browser().get(format!("{base_url}/slack/oauth_redirect?{query}"));
    if let Some(cookie) = cookie {
        request = request.header("cookie", format!("other=1; kuuki-oauth-state={cookie}"));
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let clears = response.headers().get("set-cookie").map(|v| v.to_str().unwrap().to_owned());
    assert!(clears.is_some_and(|c| c.starts_with("kuuki-oauth-state=;") && c.contains("Max-Age=0")), "cookie ended");
    (status, response.text().await.unwrap())
}

/// Installs kuuki into `team` through the whole browser flow.
async fn install(base_url: &str, team: &str) -> String {
    let (query, _, _) = start_install(base_url).await;
    let state = param(&query, "state").to_owned();
    let (status, page) =
        redirect_back(base_url, &[("code", &format!("code-{team}")), ("state", &state)], Some(&state)).await;
    assert_eq!(status, 200, "{page}");
    page
}

/// A signed mention of `bot` in `team`'s channel `C1`, as Slack delivers it.
async fn mention(base_url: &str, team: &str, bot: &str, event_id: &str) -> u16 {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let body = json!({
        "type": "event_callback", "team_id": team, "event_id": event_id, "event_time": now,
        "authorizations": [{"enterprise_id": null, "team_id": team, "user_id": bot, "is_bot": true, "is_enterprise_install": false}],
        "event": {"type": "app_mention", "channel": "C1", "user": "UALICE", "text": format!("<@{bot}> the deploy key?"),
                  "ts": format!("{now}.000{}", &event_id[event_id.len() - 3..])},
    })
    .to_string();
    post_signed(base_url, "/slack/events", &body).await.status().as_u16()
}

/// The posts Slack got, each with the token it came with.
async fn posts(slack: &MockServer) -> Vec<(String, Value)> {
    let requests = slack.received_requests().await.unwrap_or_default();
    requests
        .into_iter()
        .filter(|r| r.url.path() == "/chat.postMessage")
        .map(|r| (r.headers["authorization"].to_str().unwrap().to_owned(), serde_json::from_slice(&r.body).unwrap()))
        .collect()
}

async fn wait_for_posts(slack: &MockServer, count: usize) -> Vec<(String, Value)> {
    let deadline = Instant::now() + Duration::from_secs(15);
    while posts(slack).await.len() < count && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    posts(slack).await
}

#[tokio::test]
async fn two_workspaces_install_through_the_browser_and_each_is_answered_with_its_own_token() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("kuuki.db").to_string_lossy().into_owned();
    let served = serve_many(&slack, &data);
    let base = &served.base_url;

    // The install page sends the browser to Slack with the app, its scopes, a state
    // bound to the browser by a cookie, and where to come back.
    let (query, location, set_cookie) = start_install(base).await;
    assert!(location.starts_with(&format!("{}/oauth/v2/authorize?", slack.uri())), "{location}");
    assert_eq!(param(&query, "client_id"), CLIENT_ID);
    assert_eq!(param(&query, "redirect_uri"), format!("{base}/slack/oauth_redirect"));
    assert!(param(&query, "scope").split(',').any(|s| s == "app_mentions:read"));
    let state = param(&query, "state").to_owned();
    assert!(set_cookie.starts_with(&format!("kuuki-oauth-state={state};")), "{set_cookie}");
    for part in ["HttpOnly", "SameSite=Lax", "Path=/slack", "Max-Age=600"] {
        assert!(set_cookie.contains(part), "{part} in {set_cookie}");
    }
    assert!(!set_cookie.contains("Secure"), "plain http on a local host: {set_cookie}");

    // Slack sends the browser back with a code: exchanged, the installation stored.
    let (status, page) = redirect_back(base, &[("code", "code-T1"), ("state", &state)], Some(&state)).await;
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("Team T1") && !page.contains("xoxb") && !page.contains("code-T1"), "{page}");
    let exchanges: Vec<_> =
        slack.received_requests().await.unwrap().into_iter().filter(|r| r.url.path() == "/oauth.v2.access").collect();
    assert_eq!(exchanges.len(), 1);
    let form: Vec<(String, String)> = serde_urlencoded::from_bytes(&exchanges[0].body).unwrap();
    assert_eq!(param(&form, "code"), "code-T1");
    assert_eq!(param(&form, "redirect_uri"), format!("{base}/slack/oauth_redirect"), "the same redirect_uri");
    let basic = exchanges[0].headers["authorization"].to_str().unwrap().to_owned();
    let credentials = format!("{CLIENT_ID}:{CLIENT_SECRET}");
    assert_eq!(basic, format!("Basic {}", base64_of(&credentials)), "the app's credentials in HTTP Basic");
    // The same redirect again (a reload): refused, as used.
    let (again, page) = redirect_back(base, &[("code", "code-T1"), ("state", &state)], Some(&state)).await;
    assert!(again == 400 && page.contains("used already"), "{again} {page}");

    install(base, "T2").await;

    // The same words in both workspaces' channel C1: each answered there, with its own
    // token, to its own bot's mention.
    assert_eq!(mention(base, "T1", "UBOT1", "Ev-T1-001").await, 200);
    assert_eq!(mention(base, "T2", "UBOT2", "Ev-T2-002").await, 200);
    let posted = wait_for_posts(&slack, 2).await;
    assert_eq!(posted.len(), 2, "{posted:?}");
    let mut tokens: Vec<&str> = posted.iter().map(|(auth, _)| auth.as_str()).collect();
    tokens.sort();
    assert_eq!(tokens, ["Bearer xoxb-t1-secret", "Bearer xoxb-t2-secret"]);
    assert!(posted.iter().all(|(_, body)| body["channel"] == "C1"), "Slack's own channel id: {posted:?}");

    // A workspace that never installed kuuki: acknowledged, nothing stored or posted.
    assert_eq!(mention(base, "T3", "UBOT3", "Ev-T3-003").await, 200);
    // Another workspace's bot named in T1 is not kuuki there.
    assert_eq!(mention(base, "T1", "UBOT2", "Ev-T1-004").await, 200);
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(posts(&slack).await.len(), 2, "neither answered");
    let output = served.output.lock().unwrap().clone();
    assert!(output.contains("not installed"), "one line says why: {output}");
    for secret in ["xoxb-t1-secret", "xoxb-t2-secret", "code-T1", CLIENT_SECRET, TOKEN_KEY] {
        assert!(!output.contains(secret), "{secret} in the output");
    }
    drop(served);
    // Nothing readable of a token in the data file or its WAL.
    for file in [data.clone(), format!("{data}-wal")] {
        let bytes = std::fs::read(&file).unwrap_or_default();
        assert!(!bytes.windows(9).any(|w| w == b"t1-secret" || w == b"t2-secret"), "a token in {file}");
    }
}

#[tokio::test]
async fn a_bad_install_is_refused_with_a_clear_page_and_stores_nothing() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().unwrap();
    let served = serve_many(&slack, &dir.path().join("kuuki.db").to_string_lossy());
    let base = &served.base_url;
    let (query, _, _) = start_install(base).await;
    let state = param(&query, "state").to_owned();
    let (other, _, _) = start_install(base).await;
    let other = param(&other, "state").to_owned();
    let mut tampered = state.clone().into_bytes();
    tampered[0] = if tampered[0] == b'a' { b'b' } else { b'a' };
    let tampered = String::from_utf8(tampered).unwrap();
    // Slack's redirect back, the browser's cookie, the status, what the page says.
    type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>, u16, &'a str);
    let cases: [Case; 6] = [
        (&[("error", "access_denied"), ("state", &state)], Some(&state), 403, "not allowed"),
        (&[("code", "code-T1"), ("state", &state)], None, 400, "did not start the install"),
        (&[("code", "code-T1"), ("state", &state)], Some(&other), 400, "did not start the install"),
        (&[("code", "code-T1"), ("state", &tampered)], Some(&tampered), 400, "not one this deployment made"),
        (&[("code", "bad-code"), ("state", &state)], Some(&state), 400, "invalid_code"),
        // The state is spent by the refused exchange: a code of its own cannot reuse it.
        (&[("code", "code-T1"), ("state", &state)], Some(&state), 400, "used already"),
    ];
    for (query, cookie, status, says) in cases {
        let (got, page) = redirect_back(base, query, cookie).await;
        assert_eq!(got, status, "{query:?}: {page}");
        assert!(page.contains(says), "{query:?}: {page}");
    }
    // Nothing was installed: T1's mention is not answered.
    assert_eq!(mention(base, "T1", "UBOT1", "Ev-T1-001").await, 200);
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(posts(&slack).await.is_empty());
    let exchanged = slack.received_requests().await.unwrap();
    let codes: Vec<_> = exchanged.iter().filter(|r| r.url.path() == "/oauth.v2.access").collect();
    assert_eq!(codes.len(), 1, "only the good state's code was exchanged (and Slack refused it)");
}

fn base64_of(text: &str) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = text.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[tokio::test]
async fn the_ingress_will_not_start_without_the_install_secrets() {
    let slack = fake_slack().await;
    let env = [
        ("SLACK_BOT_TOKEN", ""),
        ("SLACK_CLIENT_ID", CLIENT_ID),
        ("SLACK_STATE_SECRET", STATE_SECRET),
        ("TOKEN_ENCRYPTION_KEY", TOKEN_KEY),
    ];
    let refused = serve_with(&slack.uri(), &env, &[]).err().expect("no client secret, no start");
    assert!(refused.contains("SLACK_CLIENT_SECRET is not set"), "{refused}");
    let env = [("SLACK_BOT_TOKEN", ""), ("SLACK_CLIENT_ID", CLIENT_ID), ("SLACK_CLIENT_SECRET", CLIENT_SECRET)];
    let refused = serve_with(&slack.uri(), &env, &[]).err().expect("no key, no start");
    assert!(refused.contains("TOKEN_ENCRYPTION_KEY") && !refused.contains(CLIENT_SECRET), "{refused}");
}
