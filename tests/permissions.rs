//! Who may change how kuuki takes part (issue 12 item 5), as a user meets it in a
//! replay: a non-manager's `mute` and `shadow` are refused and change nothing; a
//! manager's expire by themselves; shadow mode still answers mentions unless `all`;
//! each change is announced in the channel once.

use kuuki::adapters::memory::ChatCall;
use kuuki::ingest::command::{SlashCommand, caller_may_manage, run_command};
use kuuki_e2e::harness::Harness;
use kuuki_e2e::{Log, Run};
use serde_json::Value;

/// bob manages; every ambient message is answered unless something holds kuuki back
/// (a score threshold of 0), judged 30 s after it was written.
const SETTINGS: &[(&str, &str)] =
    &[("COMMAND_MANAGERS", "bob"), ("JUDGE_SCORE_THRESHOLD", "0"), ("JUDGE_JITTER_RATIO", "0")];

fn replay(transcript: &str) -> Log {
    Run::new(transcript).settings(SETTINGS).log()
}

/// The one `respond` line about the message written at `t`, if any.
fn respond_to(log: &Log, t: f64) -> Option<&Value> {
    let responds = log.about("respond", t);
    assert!(responds.len() <= 1, "{responds:?}");
    responds.first().copied()
}

/// Whether kuuki's answer to the message at `t` went out, rather than only being
/// logged (the replay marks an answer shadow mode held back `"shadow": true`).
fn posted(log: &Log, t: f64) -> bool {
    let respond = respond_to(log, t).unwrap_or_else(|| panic!("no answer to the message at {t}: {log:?}"));
    respond["shadow"] != true
}

#[test]
fn a_non_managers_mute_and_shadow_are_refused_and_change_nothing() {
    let log = replay(
        r#"{"t": 0, "user": "carol", "command": "/kuuki mute 30"}
{"t": 1, "user": "carol", "command": "/kuuki shadow all 2h"}
{"t": 10, "user": "alice", "text": "デプロイ終わりました"}
{"t": 120, "user": "carol", "command": "/kuuki status"}"#,
    );
    let commands = log.kind("command");
    for refused in &commands[..2] {
        let answer = refused["answer"].as_str().unwrap();
        assert!(answer.starts_with("Sorry, only workspace admins and owners, and <@bob> can change"), "{answer}");
        assert!(answer.contains("nothing changed"), "{answer}");
        assert!(refused["announced"].is_null(), "nothing announced: {refused}");
    }
    assert!(posted(&log, 10.0), "kuuki still joins in, and posts");
    let status = commands[2]["answer"].as_str().unwrap();
    assert!(!status.contains("muted") && !status.contains("shadow"), "{status}");
}

#[test]
fn a_managers_mute_holds_kuuki_back_until_it_expires() {
    // Muted at 09:00 for 30 minutes: until 09:30.
    let log = replay(
        r#"{"t": 0, "user": "bob", "command": "/kuuki mute 30m"}
{"t": 60, "user": "alice", "text": "デプロイ終わりました"}
{"t": 1500, "user": "alice", "text": "<@bot> まだミュート中？"}
{"t": 1860, "user": "alice", "text": "ビルドも通りました"}"#,
    );
    let mute = &log.kind("command")[0];
    assert!(mute["answer"].as_str().unwrap().starts_with("Muted here until 2026-01-05 09:30 UTC"), "{mute}");
    let judged = &log.about("judge", 60.0)[0];
    assert!(judged["breakdown"].get("muted").is_some(), "held back by the mute: {judged}");
    assert!(respond_to(&log, 60.0).is_none(), "{log:?}");
    assert!(posted(&log, 1500.0), "a mention is answered while muted");
    assert!(posted(&log, 1860.0), "after 09:30 kuuki joins in again: {log:?}");
}

#[test]
fn shadow_mode_answers_mentions_not_the_rest_and_ends_by_itself() {
    // Shadow mode from 09:00 for 2 hours: until 11:00.
    let log = replay(
        r#"{"t": 0, "user": "bob", "command": "/kuuki shadow 2h"}
{"t": 60, "user": "alice", "text": "<@bot> 今日の天気は？"}
{"t": 600, "user": "alice", "text": "デプロイ終わりました"}
{"t": 3000, "user": "bob", "command": "/kuuki status"}
{"t": 7300, "user": "alice", "text": "ビルドも通りました"}"#,
    );
    let shadow = &log.kind("command")[0];
    assert!(shadow["answer"].as_str().unwrap().starts_with("Shadow mode on until 2026-01-05 11:00 UTC"), "{shadow}");
    assert!(posted(&log, 60.0), "a mention is answered and posted");
    assert!(!posted(&log, 600.0), "an ambient answer is judged and logged, not posted");
    let held_back = respond_to(&log, 600.0).unwrap();
    assert!(held_back["text"].is_string() || held_back["emoji"].is_string(), "what kuuki would have said: {held_back}");
    let status = log.kind("command")[1]["answer"].as_str().unwrap();
    assert!(status.contains("in shadow mode until 2026-01-05 11:00 UTC (answers mentions and DMs"), "{status}");
    assert!(posted(&log, 7300.0), "after 11:00 kuuki posts again: {log:?}");
}

#[test]
fn shadow_all_answers_nothing_until_turned_off() {
    let log = replay(
        r#"{"t": 0, "user": "bob", "command": "/kuuki shadow all"}
{"t": 60, "user": "alice", "text": "<@bot> 今日の天気は？"}
{"t": 600, "user": "alice", "text": "デプロイ終わりました"}
{"t": 1200, "user": "bob", "command": "/kuuki shadow off"}
{"t": 1300, "user": "alice", "text": "<@bot> 聞こえますか？"}"#,
    );
    assert!(!posted(&log, 60.0), "not even a mention");
    assert!(!posted(&log, 600.0));
    let off = &log.kind("command")[1];
    assert!(off["answer"].as_str().unwrap().starts_with("Shadow mode off"), "{off}");
    assert_eq!(off["announced"], "kuuki posts here again (shadow mode ended by <@bob>).");
    assert!(posted(&log, 1300.0), "turned off: answered again");
}

#[test]
fn each_change_is_announced_in_the_channel_once() {
    // bob and dave both mute until 09:30 (the same change); dave's second, longer mute is
    // a new change.
    let log = Run::new(
        r#"{"t": 0, "user": "bob", "command": "/kuuki mute 30", "channel": "random"}
{"t": 0, "user": "dave", "command": "/kuuki mute 30", "channel": "random"}
{"t": 10, "user": "dave", "command": "/kuuki mute 1h", "channel": "random"}
{"t": 20, "user": "bob", "command": "/kuuki shadow all 1d", "channel": "random"}"#,
    )
    .settings(&[("COMMAND_MANAGERS", "bob, dave")])
    .log();
    let commands = log.kind("command");
    let announced: Vec<&Value> = commands.iter().map(|c| &c["announced"]).collect();
    assert_eq!(
        announced[0],
        "kuuki is muted here until 2026-01-05 09:30 UTC (set by <@bob>): it will not join in unasked, and still answers mentions."
    );
    assert!(announced[1].is_null(), "the same change: not announced again ({})", commands[1]);
    assert!(commands[1]["answer"].as_str().unwrap().ends_with("(Announced in the channel already.)"));
    assert!(
        announced[2].as_str().unwrap().starts_with("kuuki is muted here until 2026-01-05 10:01 UTC (set by <@dave>)")
    );
    // Shadow mode's own announcement is posted although shadow mode is on.
    assert_eq!(
        announced[3],
        "kuuki is in shadow mode here until 2026-01-06 09:01 UTC (set by <@bob>): it posts nothing at all, mentions included."
    );
}

fn mute_by(user: &str, text: &str) -> SlashCommand {
    SlashCommand {
        command: "/kuuki".into(),
        text: text.into(),
        channel_id: "general".into(),
        user_id: user.into(),
        may_manage_channel: None,
        response_url: None,
        team_id: None,
        enterprise_id: None,
        is_enterprise_install: false,
        discord_reply: None,
        server: None,
    }
}

fn posts(h: &Harness) -> Vec<String> {
    h.chat
        .calls()
        .into_iter()
        .filter_map(|call| match call {
            ChatCall::Post { post, .. } => Some(post.text),
            ChatCall::Reaction { .. } | ChatCall::CommandAnswer { .. } => None,
        })
        .collect()
}

#[tokio::test]
async fn an_announcement_whose_post_may_have_gone_out_is_never_posted_again() {
    let h = Harness::new(&[("COMMAND_MANAGERS", "bob")]);
    h.chat.lose_next_answers(1);
    let first = run_command(&h.deps, &mute_by("bob", "mute 30")).await.unwrap();
    assert!(first.contains("could not announce it"), "{first}");
    assert_eq!(posts(&h).len(), 1, "it went out, but kuuki cannot know");
    let again = run_command(&h.deps, &mute_by("bob", "mute 30")).await.unwrap();
    assert!(again.contains("may have been announced"), "{again}");
    assert_eq!(posts(&h).len(), 1, "not posted twice");

    // A post that failed for certain is not posted again either (kuuki cannot tell
    // the difference), but the change itself stands.
    h.chat.fail_next(1);
    let failed = run_command(&h.deps, &mute_by("bob", "mute 2h")).await.unwrap();
    assert!(failed.starts_with("Muted here until 2026-01-05 11:00 UTC"), "{failed}");
    assert!(failed.contains("could not announce it"), "{failed}");
    let state = h.deps.channels.channel_state(&kuuki::domain::ChannelId("general".into())).await.unwrap();
    assert_eq!(state.muted_until, Some(h.at(7200.0)));
    let again = run_command(&h.deps, &mute_by("bob", "mute 2h")).await.unwrap();
    assert!(again.contains("may have been announced"), "{again}");
    assert_eq!(posts(&h).len(), 1, "still the one post");
}

#[tokio::test]
async fn the_manager_check_other_commands_use() {
    let h = Harness::new(&[("COMMAND_MANAGERS", "bob")]);
    assert!(caller_may_manage(&h.deps, &mute_by("bob", "")).await.unwrap(), "listed");
    assert!(!caller_may_manage(&h.deps, &mute_by("carol", "")).await.unwrap(), "replay's chat knows no admins");
    let vouched = SlashCommand { may_manage_channel: Some(true), ..mute_by("carol", "") };
    assert!(caller_may_manage(&h.deps, &vouched).await.unwrap(), "the platform's answer counts");
    let denied = SlashCommand { may_manage_channel: Some(false), ..mute_by("bob", "") };
    assert!(caller_may_manage(&h.deps, &denied).await.unwrap(), "the allow-list wins over the platform");
}

/// `forget @user`: a member who manages channels in a Discord server forgets the person
/// in that server only, a Slack admin in the Slack workspace only (not a Discord server
/// the same deployment serves); someone in `COMMAND_MANAGERS` (the deployment's
/// operators) everywhere.
#[tokio::test]
async fn an_operators_forget_reaches_every_server_and_a_server_managers_only_theirs() {
    use kuuki::domain::{Job, SLACK_WORKSPACE};
    use kuuki::ports::{Clock, InProcessQueue};
    let h = Harness::new(&[("COMMAND_MANAGERS", "bob")]);
    let asked_by = |user: &str, channel: &str| SlashCommand {
        channel_id: channel.into(),
        server: channel.starts_with('4').then(|| "G1".into()),
        may_manage_channel: Some(user == "carol"),
        response_url: Some("https://hooks.slack.com/commands/T1/2/x".into()),
        ..mute_by(user, "forget <@alice>")
    };
    let discord = "41771983423143938";
    for (user, channel, reach) in [
        ("bob", discord, None),
        ("bob", "general", None),
        ("carol", discord, Some("G1")),
        ("carol", "general", Some(SLACK_WORKSPACE)),
    ] {
        let ack = run_command(&h.deps, &asked_by(user, channel)).await.unwrap();
        assert!(ack.starts_with("kuuki is forgetting <@alice>"), "{ack}");
        let reach = reach.map(str::to_owned);
        let job = h.queue.pop_due(h.clock.now()).expect("the forget is queued").job;
        let Job::Forget { server, .. } = Job::clone(&job) else { panic!("{job:?}") };
        assert_eq!(server, reach, "{user}'s forget");
    }
    // A Discord manager's right is their server's: a command that names none is refused.
    let nameless = SlashCommand { server: None, ..asked_by("carol", discord) };
    let refused = run_command(&h.deps, &nameless).await.unwrap();
    assert!(refused.starts_with("Sorry, only"), "{refused}");
    assert!(h.queue.pop_due(h.clock.now()).is_none(), "nothing queued");
}
