//! People and privacy (issue 12), as a user meets them in a replay: commands run as a
//! person, what kuuki remembers of whom, and where.

use kuuki_e2e::Run;

#[test]
fn a_transcript_command_runs_as_its_user_and_its_answer_is_logged() {
    let log = Run::new(
        r#"{"t": 0, "user": "alice", "text": "デプロイ終わりました"}
{"t": 60, "user": "bob", "command": "/kuuki mute 30", "channel": "random"}
{"t": 120, "user": "alice", "command": "/kuuki status", "channel": "random"}"#,
    )
    .settings(&[("COMMAND_MANAGERS", "bob")])
    .log();
    let commands = log.kind("command");
    assert_eq!(commands.len(), 2, "{commands:?}");
    assert_eq!(commands[0]["user"], "bob");
    assert_eq!(commands[0]["channel"], "random");
    assert_eq!(commands[0]["command"], "/kuuki mute 30");
    assert_eq!(commands[0]["t"], 60.0);
    let muted = commands[0]["answer"].as_str().unwrap();
    assert!(muted.starts_with("Muted here until 2026-01-05 09:31"), "{muted}");
    let status = commands[1]["answer"].as_str().unwrap();
    assert!(status.contains("muted until 2026-01-05 09:31"), "the mute held: {status}");
    assert_eq!(log.stats()["messages"], 1, "commands are not messages");
}
