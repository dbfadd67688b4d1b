use serde_json::json;

use super::axis::*;
use super::*;

/// A rules-only replay of two channels (the transcript in the report's brief).
const SAMPLE: &str = r#"
{"t":0.0,"kind":"message","channel":"general","thread":null,"user":"alice","text":"おはよう"}
{"t":12.5,"kind":"message","channel":"general","thread":"t1","user":"bob","text":"<@bot> 今日の天気は？","trigger":"mention"}
{"t":12.5,"kind":"respond","channel":"general","thread":"t1","msg_t":12.5,"type":"full_response","mode":"direct","text":"それなら私が見ますよ"}
{"t":32.827,"kind":"judge","channel":"general","thread":null,"msg_t":0.0,"user":"alice","score":0,"breakdown":{"after_silence":10,"cooldown":-50,"no_mention":-10},"decision":"skip","llm_called":false,"respond":false,"reason":"the score stayed below the threshold"}
{"t":100.0,"kind":"message","channel":"dev","thread":null,"user":"carol","text":"誰か CI の設定わかる人いますか？"}
{"t":130.623,"kind":"judge","channel":"dev","thread":null,"msg_t":100.0,"user":"carol","score":20,"breakdown":{"after_silence":10,"no_mention":-10,"question":20},"decision":"skip","llm_called":false,"respond":false,"reason":"the score stayed below the threshold"}
{"t":200.0,"kind":"message","channel":"general","thread":null,"user":"alice","text":"deploy done"}
{"t":201.0,"kind":"message","channel":"general","thread":null,"user":"alice","text":"deploy done 2"}
{"t":202.0,"kind":"message","channel":"general","thread":null,"user":"bob","text":"ok"}
{"t":223.174,"kind":"judge","channel":"general","thread":null,"msg_t":202.0,"user":"bob","score":10,"breakdown":{"engagement":40,"no_mention":-10,"one_on_one":-20},"decision":"skip","llm_called":false,"respond":false,"reason":"the score stayed below the threshold"}
{"t":225.313,"kind":"superseded","channel":"general","thread":null,"msg_t":200.0,"stage":"judge","by_t":202.0}
{"t":236.02,"kind":"superseded","channel":"general","thread":null,"msg_t":201.0,"stage":"judge","by_t":202.0}
{"t":2000.0,"kind":"message","channel":"dev","thread":null,"user":"dave","text":"kuuki, what do you think?","trigger":"name"}
{"t":2000.0,"kind":"respond","channel":"dev","thread":null,"msg_t":2000.0,"type":"full_response","mode":"direct","text":"それなら私が見ますよ"}
{"t":2000.0,"kind":"stats","channel":"*","thread":null,"messages":7,"judgments":3,"llm_judgments":0,"superseded":2,"dropped":0,"respond_failed":0,"llm_calls":{"generate":2,"judge":0,"reflect":0,"summarize":0},"llm_tokens":{"generate":482,"judge":0,"reflect":0,"summarize":0},"responses":{"full_response":2,"react_only":0,"short_ack":0}}
"#;

/// The same replay with the LLM judge: carol's question is answered after asking it.
const SAMPLE_LLM: &str = r#"
{"t":0.0,"kind":"message","channel":"general","thread":null,"user":"alice","text":"おはよう"}
{"t":12.5,"kind":"message","channel":"general","thread":"t1","user":"bob","text":"<@bot> 今日の天気は？","trigger":"mention"}
{"t":12.5,"kind":"respond","channel":"general","thread":"t1","msg_t":12.5,"type":"full_response","mode":"direct","text":"それなら私が見ますよ"}
{"t":32.827,"kind":"judge","channel":"general","thread":null,"msg_t":0.0,"user":"alice","score":0,"breakdown":{"after_silence":10,"cooldown":-50,"no_mention":-10},"decision":"skip","llm_called":false,"respond":false,"reason":"the score stayed below the threshold"}
{"t":100.0,"kind":"message","channel":"dev","thread":null,"user":"carol","text":"誰か CI の設定わかる人いますか？"}
{"t":130.623,"kind":"judge","channel":"dev","thread":null,"msg_t":100.0,"user":"carol","score":20,"breakdown":{"after_silence":10,"no_mention":-10,"question":20},"decision":"llm","llm_called":true,"respond":true,"reason":"nobody answered","response_type":"full_response","delay_seconds":20,"llm":{"should_respond":true,"reason":"nobody answered","confidence":0.8,"delay_seconds":20,"response_type":"full_response","conversation_state":"active"}}
{"t":150.623,"kind":"respond","channel":"dev","thread":null,"msg_t":100.0,"type":"full_response","mode":"ambient","text":"それなら私が見ますよ"}
{"t":200.0,"kind":"message","channel":"general","thread":null,"user":"alice","text":"deploy done"}
{"t":201.0,"kind":"message","channel":"general","thread":null,"user":"alice","text":"deploy done 2"}
{"t":202.0,"kind":"message","channel":"general","thread":null,"user":"bob","text":"ok"}
{"t":223.174,"kind":"judge","channel":"general","thread":null,"msg_t":202.0,"user":"bob","score":10,"breakdown":{"engagement":40,"no_mention":-10,"one_on_one":-20},"decision":"skip","llm_called":false,"respond":false,"reason":"the score stayed below the threshold"}
{"t":225.313,"kind":"superseded","channel":"general","thread":null,"msg_t":200.0,"stage":"judge","by_t":202.0}
{"t":236.02,"kind":"superseded","channel":"general","thread":null,"msg_t":201.0,"stage":"judge","by_t":202.0}
{"t":2000.0,"kind":"message","channel":"dev","thread":null,"user":"dave","text":"kuuki, what do you think?","trigger":"name"}
{"t":2000.0,"kind":"respond","channel":"dev","thread":null,"msg_t":2000.0,"type":"full_response","mode":"direct","text":"それなら私が見ますよ"}
{"t":2000.0,"kind":"stats","channel":"*","thread":null,"messages":7,"judgments":3,"llm_judgments":1,"superseded":2,"dropped":0,"respond_failed":0,"llm_calls":{"generate":3,"judge":1,"reflect":0,"summarize":0},"llm_tokens":{"generate":720,"judge":541,"reflect":0,"summarize":0},"responses":{"full_response":3,"react_only":0,"short_ack":0}}
"#;

fn parse(text: &str) -> Vec<Value> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("test logs are JSON"))
        .collect()
}

fn rules() -> Settings {
    Settings::default().for_llm(false)
}

fn with_llm_judge() -> Settings {
    Settings::default().for_llm(true)
}

/// Only the charts, so legend icons (which reuse the mark classes) are not counted.
fn charts(html: &str) -> String {
    html.split("<svg class=\"chart\"").skip(1).map(|part| part.split("</svg>").next().unwrap_or("")).collect()
}

/// The part of the page for channel section `ci`.
fn section(html: &str, ci: usize) -> &str {
    let start = html.find(&format!("id=\"ch-{ci}\"")).expect("section present");
    let end = html[start..].find("</section>").expect("section closed");
    &html[start..start + end]
}

fn message(t: f64, channel: &str, user: &str, text: &str) -> Value {
    json!({"t": t, "kind": "message", "channel": channel, "thread": null, "user": user, "text": text})
}

#[test]
fn a_section_per_channel_in_order_of_first_appearance() {
    let html = render("sample", &parse(SAMPLE), &rules());
    assert_eq!(html.matches("<section class=\"channel\"").count(), 2);
    let general = html.find("<h2>#general</h2>").expect("general section");
    let dev = html.find("<h2>#dev</h2>").expect("dev section");
    assert!(general < dev, "general appears first in the log");
    assert_eq!(html.matches("<svg class=\"chart\"").count(), 2);
    assert!(section(&html, 0).contains("5 messages · 2 judgments · 1 response · 2 superseded"));
}

#[test]
fn rules_only_draws_the_score_threshold() {
    let mut settings = rules();
    settings.judge.score_threshold = 45;
    let html = render("sample", &parse(SAMPLE), &settings);
    assert!(html.contains(">threshold 45</text>"));
    assert!(html.contains(&format!("y1=\"{:.1}\"", y_score(45.0))), "the line is at 45");
    assert!(!html.contains("LLM low"));
    assert!(!html.contains("class=\"zone-llm\""));
    assert!(html.contains("Rules only: a score of 45 or more responds."));
}

#[test]
fn the_llm_judge_draws_the_band() {
    let mut settings = with_llm_judge();
    settings.judge.llm_threshold_low = 25;
    settings.judge.llm_threshold_high = 75;
    let html = render("sample", &parse(SAMPLE_LLM), &settings);
    assert!(html.contains(">LLM low 25</text>"));
    assert!(html.contains(">LLM high 75</text>"));
    assert_eq!(html.matches("class=\"zone-llm\"").count(), 2, "one band per channel");
    assert!(!html.contains(">threshold "));
}

#[test]
fn the_llm_judge_without_an_llm_uses_the_score_threshold() {
    let mut settings = Settings::default();
    settings.judge.llm_setting = Some(true);
    let settings = settings.for_llm(false);
    let html = render("sample", &parse(SAMPLE), &settings);
    assert!(html.contains(">threshold 60</text>"));
    assert!(!html.contains("LLM high"));
}

#[test]
fn superseded_judgments_are_marked() {
    let html = render("sample", &parse(SAMPLE), &rules());
    let charts = charts(&html);
    assert_eq!(charts.matches("class=\"s-sup\"").count(), 2);
    assert!(charts.contains("superseded by message at t=3:22 (judge stage)"));
    assert!(charts.contains(&format!("cy=\"{:.1}\"", lane_y(LANE_SUPERSEDED))));
    assert_eq!(html.matches("class=\"k-superseded\"").count(), 2);
}

#[test]
fn judgments_are_plotted_by_outcome() {
    let html = render("sample", &parse(SAMPLE_LLM), &with_llm_judge());
    let charts = charts(&html);
    assert_eq!(charts.matches("class=\"j-resp\"").count(), 1, "carol's question was answered");
    assert_eq!(charts.matches("class=\"j-skip\"").count(), 2);
    assert_eq!(charts.matches("class=\"j-llm\"").count(), 1, "the LLM was asked once");
    assert!(charts.contains(&format!("cy=\"{:.1}\" r=\"5\"", y_score(20.0))), "score 20 at its height");
    assert!(charts.contains("score 20 → respond full_response in 20s (asked the LLM)"));
    assert!(charts.contains("after_silence +10, no_mention −10, question +20"));
    assert!(html.contains("<span class=\"chip neg\">no_mention −10</span>"));
}

#[test]
fn responses_are_drawn_and_listed() {
    let html = render("sample", &parse(SAMPLE_LLM), &with_llm_judge());
    let drawn = charts(&html);
    assert_eq!(drawn.matches("class=\"r-full\"").count(), 3);
    assert!(drawn.contains("kuuki full_response (ambient): それなら私が見ますよ"));
    // The ambient response is tied to the judgment that caused it.
    assert!(drawn.contains("class=\"link\""));
    assert_eq!(html.matches("class=\"k-respond\"").count(), 3, "responses are highlighted rows");

    let mut lines = parse(SAMPLE);
    lines.push(json!({"t": 300.0, "kind": "respond", "channel": "dev", "thread": "t9", "msg_t": 100.0,
        "type": "react_only", "mode": "ambient", "emoji": "thinking_face"}));
    let html = render("sample", &lines, &rules());
    assert_eq!(charts(&html).matches("class=\"r-react\"").count(), 1);
    assert!(html.contains(":thinking_face:"));
}

#[test]
fn summaries_read_as_memory_rows() {
    let lines = vec![json!({"t": 930.0, "kind": "summary", "channel": "dev", "thread": null, "msg_t": 0.0,
        "messages": 8, "summary": "deploy <b>talk</b>", "mood": "calm", "topic_keywords": ["deploy", "CI"],
        "active_users": ["alice"], "workspace": true})];
    let html = render("t", &lines, &Settings::default());
    assert!(html.contains("summary of 8 messages"), "{html}");
    assert!(html.contains("workspace too"));
    // minijinja's HTML escaping also escapes `/` (as `&#x2f;`).
    assert!(html.contains("deploy &lt;b&gt;talk&lt;&#x2f;b&gt;"));
    assert!(html.contains("topics: deploy, CI"));
}

#[test]
fn log_text_is_escaped() {
    let hostile = "<script>alert(\"x\")</script> & 'q'";
    let lines = vec![
        json!({"t": 1.0, "kind": "message", "channel": "<img src=x onerror=alert(1)>",
            "thread": "x\" onmouseover=\"alert(1)", "user": "<b>mallory</b>", "text": hostile}),
        json!({"t": 31.0, "kind": "judge", "channel": "<img src=x onerror=alert(1)>", "thread": null,
            "msg_t": 1.0, "user": "<b>mallory</b>", "score": 70, "breakdown": {"<i>rule</i>": 70},
            "decision": "respond", "llm_called": false, "respond": true, "reason": hostile}),
        json!({"t": 31.0, "kind": "<svg onload=alert(1)>", "channel": "c"}),
    ];
    let html = render("</title><script>", &lines, &rules());
    assert!(!html.contains("<script"), "no script element");
    assert!(!html.contains("<img"));
    assert!(!html.contains("<b>mallory"));
    assert!(!html.contains("<i>rule"));
    assert!(!html.contains("<svg onload"));
    assert!(!html.contains("\" onmouseover=\""));
    // minijinja's HTML escaping spells `'` as `&#x27;` and escapes `/` as `&#x2f;`.
    assert!(html.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;&#x2f;script&gt; &amp; &#x27;q&#x27;"));
    assert!(html.contains("&lt;b&gt;mallory&lt;&#x2f;b&gt;: &lt;script&gt;"), "the tooltip too");
}

#[test]
fn stats_are_summarised() {
    let html = render("sample", &parse(SAMPLE_LLM), &with_llm_judge());
    assert!(html.contains("<strong>7</strong><span>messages</span>"));
    assert!(html.contains("<strong>3</strong><span>judgments</span><small>1 asked the LLM</small>"));
    assert!(html.contains(
        "<strong>3</strong><span>responses</span><small>full_response 3 · short_ack 0 · react_only 0</small>"
    ));
    assert!(html.contains("<strong>4</strong><span>LLM calls</span><small>generate 3 · judge 1 · 1261 tokens</small>"));
    assert!(html.contains("<strong>2</strong><span>superseded</span>"));
    assert!(html.contains("<strong>33:20</strong><span>replayed</span>"));
    assert!(!html.contains("No stats line"));
}

#[test]
fn without_a_stats_line_the_totals_are_counted() {
    let mut lines = parse(SAMPLE_LLM);
    lines.pop();
    let html = render("cut short", &lines, &with_llm_judge());
    assert!(html.contains("No stats line"));
    assert!(html.contains("<strong>7</strong><span>messages</span>"));
    assert!(html.contains("<strong>3</strong><span>judgments</span><small>1 asked the LLM</small>"));
    assert!(html.contains("<strong>3</strong><span>responses</span><small>full_response 3</small>"));
    assert!(html.contains("<strong>–</strong><span>LLM calls</span>"));
}

#[test]
fn an_empty_log_is_a_page_that_says_so() {
    let html = render("empty", &[], &rules());
    assert!(html.starts_with("<!doctype html>"));
    assert!(html.contains("<meta charset=\"utf-8\">"));
    assert!(html.contains("No events"));
    assert!(!html.contains("<section"));
    assert!(html.contains("<strong>0</strong><span>messages</span>"));
    assert!(html.trim_end().ends_with("</html>"));
}

#[test]
fn a_single_event() {
    let html = render("one", &[message(5.0, "general", "alice", "hi")], &rules());
    assert_eq!(html.matches("<section class=\"channel\"").count(), 1);
    assert!(charts(&html).contains("<title>alice: hi\n0:05</title>"));
    assert!(html.contains("<tr id=\"c0-e0\" class=\"k-message\">"));
    assert!(html.contains("href=\"#c0-e0\""), "the mark links to its row");
}

#[test]
fn a_long_replay_stays_bounded() {
    // 100 channels of 40 events: everything shown.
    let lines: Vec<Value> =
        (0..4000).map(|i| message(i as f64 * 3.0, &format!("ch{}", i % 100), "alice", "メッセージ")).collect();
    let html = render("many", &lines, &rules());
    assert_eq!(html.matches("<section class=\"channel\"").count(), 100);
    assert_eq!(html.matches("<tr id=").count(), 4000);
    assert!(html.len() < 8_000_000, "{} bytes", html.len());

    // One busy channel: the table stops at the cap, the chart has every event.
    let lines: Vec<Value> = (0..1200).map(|i| message(i as f64, "busy", "bob", "x")).collect();
    let html = render("busy", &lines, &rules());
    assert_eq!(html.matches("<tr id=").count(), MAX_ROWS_PER_CHANNEL);
    assert!(html.contains("Showing the first 500 of 1200 events"));
    assert_eq!(charts(&html).matches("class=\"m-human\"").count(), 1200);
    assert!(html.contains(&format!("width=\"{:.0}\"", ML + 1200.0 * PX_PER_EVENT + MR)), "the chart widens");

    // Many busy channels: the page-wide budget caps the rows.
    let lines: Vec<Value> = (0..30 * 600).map(|i| message(i as f64, &format!("c{}", i % 30), "carol", "y")).collect();
    let html = render("busier", &lines, &rules());
    assert_eq!(html.matches("<tr id=").count(), MAX_ROWS_TOTAL);
    assert!(html.contains("Showing the first 0 of 600 events"));
}

#[test]
fn odd_lines_do_not_break_the_page() {
    let lines = vec![
        json!(5),
        json!({"kind": "mystery", "channel": "general", "payload": "p&q"}),
        json!({"t": "soon", "kind": "judge", "channel": "general"}),
        json!({"t": 2.0, "kind": "message"}),
        json!({"t": 3.0, "kind": "respond", "channel": "general"}),
        json!({"t": 4.0, "kind": "superseded", "channel": "general", "by_t": "x"}),
        json!({"t": f64::MAX, "kind": "message", "channel": 7, "user": null, "text": ["?"]}),
        json!({"t": -5.0, "kind": "stats", "channel": "*", "messages": "many", "responses": []}),
    ];
    let html = render("odd", &lines, &rules());
    assert!(html.contains("1 log line(s) were not JSON objects"));
    // Unknown kinds are shown raw (escaped), whatever order the keys come in.
    let mystery = html.split("class=\"k-mystery\"").nth(1).and_then(|r| r.split("</tr>").next()).unwrap_or("");
    assert!(mystery.contains("<code>"), "{mystery}");
    assert!(mystery.contains("&quot;payload&quot;:&quot;p&amp;q&quot;"), "{mystery}");
    assert!(html.contains("<h2>#(no channel)</h2>"));
    assert!(html.contains("<h2>#7</h2>"));
    assert!(html.contains("<strong>–</strong><span>messages</span>"));
    assert!(html.contains("superseded by message at t=?"));
}

#[test]
fn japanese_text_renders() {
    let html = render("日本語", &parse(SAMPLE), &rules());
    assert!(html.contains("<meta charset=\"utf-8\">"));
    assert!(html.contains("おはよう"));
    assert!(html.contains("<title>kuuki replay · 日本語</title>"));
    let font = html.split("font:14px/1.45 ").nth(1).and_then(|f| f.split('}').next()).unwrap_or("");
    assert!(font.contains("Noto Sans CJK JP"));
    assert!(font.ends_with(",sans-serif"), "{font}");
}

#[test]
fn a_long_silence_is_drawn_as_a_break() {
    let html = render("sample", &parse(SAMPLE), &rules());
    // #dev is quiet from 1:40 to 33:20.
    let dev = section(&html, 1);
    assert_eq!(dev.matches("class=\"brk\"").count(), 1);
    assert!(dev.contains(">+31m</text>"));
    assert!(dev.contains("31m of silence (2:10–33:20), not drawn to scale"));
    assert!(!section(&html, 0).contains("class=\"brk\""), "#general has no long silence");
    assert!(section(&html, 0).contains(">3:30</text>"), "tick labels");
}

#[test]
fn the_axis_keeps_time_order() {
    let times = [0.0, 10.0, 20.0, 5000.0, 5010.0];
    let axis = TimeAxis::new(&times, ML, MIN_PLOT_W);
    assert_eq!(axis.segments.len(), 2);
    let xs: Vec<f64> = times.iter().map(|&t| axis.x(t)).collect();
    assert!(xs.windows(2).all(|w| w[0] < w[1]), "{xs:?}");
    assert!(xs[4] <= ML + MIN_PLOT_W);
    // One instant: a single segment, drawn in its middle.
    let axis = TimeAxis::new(&[7.0], ML, MIN_PLOT_W);
    assert_eq!(axis.x(7.0), ML + MIN_PLOT_W / 2.0);
}

#[test]
fn times_read_as_clock_times() {
    assert_eq!(fmt_clock(0.0), "0:00");
    assert_eq!(fmt_clock(75.9), "1:15");
    assert_eq!(fmt_clock(3725.0), "1:02:05");
    assert_eq!(fmt_time(32.827), "0:32.8");
    assert_eq!(fmt_time(100.0), "1:40");
    assert_eq!(fmt_gap(1850.0), "31m");
    assert_eq!(fmt_gap(45.0), "45s");
    assert_eq!(fmt_gap(7500.0), "2h05m");
}

// ---------------------------------------------------------------------------
// Escaping, typed reading, and the reflect sentence

/// Text that would run a script or break out of an attribute if it reached the page
/// unescaped, tagged with the place it was put.
fn hostile(place: &str) -> String {
    format!("<script>{place}</script>\"'&")
}

/// `hostile(place)` as minijinja's HTML escaping writes it.
fn escaped(place: &str) -> String {
    format!("&lt;script&gt;{place}&lt;&#x2f;script&gt;&quot;&#x27;&amp;")
}

#[test]
fn hostile_text_is_escaped_everywhere_it_appears() {
    // Every field of the log that holds text from users, the LLM or the settings.
    let h = hostile;
    let lines = vec![
        json!({"t": 1.0, "kind": "message", "channel": h("channel"), "thread": h("thread"), "user": h("user"),
            "text": h("text")}),
        json!({"t": 2.0, "kind": "message", "channel": h("channel"), "thread": null, "user": "bob", "text": "hi",
            "author": "other_bot"}),
        json!({"t": 3.0, "kind": "edited", "channel": h("channel"), "thread": null, "msg_t": 1.0,
            "text": h("edited")}),
        json!({"t": 31.0, "kind": "judge", "channel": h("channel"), "thread": h("thread"), "msg_t": 1.0,
            "user": h("judged"), "score": 70, "breakdown": {h("rule"): 70}, "decision": "llm", "llm_called": true,
            "respond": false, "reason": h("reason"), "llm_error": h("llm_error")}),
        json!({"t": 40.0, "kind": "respond", "channel": h("channel"), "thread": null, "msg_t": 1.0,
            "type": "full_response", "mode": "direct", "text": h("answer")}),
        json!({"t": 41.0, "kind": "respond", "channel": h("channel"), "thread": null, "msg_t": 1.0,
            "type": "react_only", "mode": "ambient", "emoji": h("emoji")}),
        json!({"t": 42.0, "kind": "respond_failed", "channel": h("channel"), "thread": null, "msg_t": 1.0,
            "type": "full_response", "mode": "direct", "reason": h("failure"), "notice": h("notice")}),
        json!({"t": 43.0, "kind": "dropped", "channel": h("channel"), "thread": null, "msg_t": 1.0,
            "stage": "respond", "reason": h("dropped")}),
        json!({"t": 44.0, "kind": "summary", "channel": h("channel"), "thread": null, "msg_t": 1.0, "messages": 3,
            "summary": h("summary"), "mood": h("mood"), "topic_keywords": [h("topic")], "active_users": [],
            "workspace": false}),
        json!({"t": 45.0, "kind": h("kind"), "channel": "other"}),
        json!({"t": 46.0, "kind": "message", "channel": "other", "thread": null, "user": "eve", "text": "x"}),
    ];
    let mut settings = rules();
    settings.bot.name = hostile("bot");
    let html = render(&hostile("title"), &lines, &settings);

    // Where each one is expected, so the test cannot pass by leaving a field out.
    let places = [
        ("title", 2),   // <title> and <h1>
        ("channel", 3), // contents, heading, the chart's aria-label
        ("thread", 4),  // two rows and two tooltips
        ("user", 2),    // who cell, tooltip
        ("text", 2),    // cell, tooltip
        ("edited", 2),  // cell, tooltip
        ("judged", 2),  // reason line, tooltip
        ("rule", 2),    // chip, tooltip
        ("reason", 2),  // cell, tooltip
        ("llm_error", 2),
        ("answer", 2),
        ("emoji", 2),
        ("failure", 2),
        ("notice", 1), // the table only
        ("dropped", 2),
        ("summary", 1), // summaries are not drawn in the chart
        ("mood", 1),
        ("topic", 1),
        ("kind", 1), // the who cell; the raw line below
    ];
    for (place, at_least) in places {
        let n = html.matches(&escaped(place)).count();
        assert!(n >= at_least, "{place}: {n} escaped occurrence(s), expected {at_least} or more");
    }
    // The bot's name: lane name (clipped), legend, who cells and tooltips.
    assert!(html.matches(&escaped("bot")).count() >= 6, "the bot's name");
    assert!(html.contains(">&lt;script&gt;bot&lt;…</text>"), "the lane name is clipped, then escaped");
    // The unknown kind's raw line is JSON, escaped.
    assert!(html.contains("&quot;kind&quot;:&quot;&lt;script&gt;kind&lt;&#x2f;script&gt;\\&quot;&#x27;&amp;&quot;"));
    // Nothing in the template opts out of escaping.
    assert!(!TEMPLATE.contains("safe"), "the template marks nothing safe");
    assert!(!TEMPLATE.contains("autoescape"), "the template does not turn escaping off");
    // No raw payload anywhere: not as an element, not breaking out of an attribute.
    assert!(!html.contains("<script"), "no script element");
    assert!(!html.contains("</script"));
    assert!(!html.contains("\"'&"), "quotes never reach the page raw");
    // The kind never reaches a class name as it is.
    assert!(html.contains("class=\"k-scriptkindscript\""));
}

#[test]
fn cutting_long_text_never_splits_an_entity() {
    let text = "&<".repeat(400);
    let html = render("long", &[message(1.0, "general", "alice", &text)], &rules());
    let cell = format!("{}…", "&amp;&lt;".repeat(300));
    assert!(html.contains(&format!("<td class=\"what\">{cell}</td>")), "600 characters, then …");
    // "alice: " and 233 characters of text.
    let tip = format!("alice: {}&amp;…", "&amp;&lt;".repeat((TOOLTIP_CHARS - "alice: ".len()) / 2));
    assert!(html.contains(&format!("<title>{tip}</title>")), "the tooltip is cut at {TOOLTIP_CHARS}");
}

#[test]
fn control_characters_are_dropped() {
    let html = render("bell\u{7}", &[message(1.0, "gen\u{1b}eral", "al\u{0}ice", "a\u{7}b\u{1b}[31m\tc\nd")], &rules());
    assert!(!html.chars().any(|c| c.is_control() && c != '\n' && c != '\t'), "no stray control characters");
    assert!(html.contains("<td class=\"what\">ab[31m\tc\nd</td>"), "newline and tab are kept");
    assert!(html.contains("<h2>#general</h2>"));
    assert!(html.contains("alice"));
    assert!(html.contains("<title>kuuki replay · bell</title>"));
}

#[test]
fn the_reflect_line_reads_as_a_sentence() {
    let lines = vec![json!({"t": 2155.746, "kind": "reflect", "channel": "dev", "thread": null, "msg_t": 1525.0,
        "messages": 17, "facts_new": 2, "facts_strengthened": 1, "profiles": 3})];
    let html = render("reflect", &lines, &rules());
    let row = html.split("class=\"k-reflect\"").nth(1).and_then(|r| r.split("</tr>").next()).unwrap_or("");
    assert!(
        row.contains(
            "reflected on 17 messages: learned 2 new facts, strengthened 1 known fact, and updated the notes on 3 people"
        ),
        "{row}"
    );
    assert!(row.contains("<span class=\"sys\">memory</span>"), "{row}");
    assert!(!row.contains("<code>"), "not the raw line: {row}");
    assert!(!row.contains("facts_new"), "{row}");

    // One of each, and fields that are missing.
    let lines = vec![
        json!({"t": 1.0, "kind": "reflect", "channel": "dev", "messages": 1, "facts_new": 1,
        "facts_strengthened": 0, "profiles": 1}),
        json!({"t": 2.0, "kind": "reflect", "channel": "dev", "messages": "many"}),
    ];
    let html = render("reflect", &lines, &rules());
    assert!(html.contains(
        "reflected on 1 message: learned 1 new fact, strengthened 0 known facts, and updated the notes on 1 person"
    ));
    assert!(html.contains(
        "reflected on ? messages: learned ? new facts, strengthened ? known facts, and updated the notes on ? people"
    ));
}

/// One event of every kind the log writer knows. The match is exhaustive on purpose:
/// a new `EventKind` does not compile here until the report has been taught it.
fn one_of_every_kind() -> Vec<crate::domain::Event> {
    use crate::domain::{
        Author, ChannelId, Decision, DirectTrigger, Event, EventKind, RespondMode, ResponseType, Stage, Timestamp, Ts,
        UserId,
    };
    let at = |s: i64| crate::replay::REPLAY_EPOCH + std::time::Duration::from_secs(s as u64);
    let ts = |s: i64| Ts::from_timestamp(at(s));
    let kinds = vec![
        EventKind::Message {
            message: crate::domain::LoggedMessage(std::sync::Arc::new(crate::domain::Message {
                channel: ChannelId("C1".into()),
                ts: ts(1),
                thread_root: None,
                user: UserId("alice".into()),
                user_name: "alice".into(),
                text: "message text".into(),
                author: Author::Human,
                replies_to_bot: false,
                replies_to: None,
                in_dm: false,
                private_channel: false,
                at: at(1),
            })),
            trigger: Some(DirectTrigger::Mention),
        },
        EventKind::Edited { text: "edited text".into() },
        EventKind::Deleted,
        EventKind::Judge {
            user: UserId("alice".into()),
            score: 55,
            breakdown: [("question".into(), 20)].into(),
            decision: Decision::Llm,
            llm_called: true,
            respond: true,
            response_type: Some(ResponseType::ShortAck),
            delay_seconds: 12,
            llm: None,
            llm_error: Some("llm error text".into()),
            llm_cached: false,
            llm_usage: Some(crate::ports::Usage { input_tokens: 10, output_tokens: 2 }),
            reason: "judge reason".into(),
            pick_up: false,
        },
        EventKind::Superseded { stage: Stage::Summarize, by: ts(50) },
        EventKind::Dropped { stage: Stage::Reflect, reason: "dropped reason".into() },
        EventKind::Respond {
            mode: RespondMode::Ambient,
            response_type: ResponseType::ReactOnly,
            posted_in: None,
            posted_ts: None,
            text: None,
            emoji: Some("tada".into()),
            shadow: true,
            facts: Vec::new(),
        },
        EventKind::Reflect { messages: 9, facts_new: 4, facts_strengthened: 2, profiles: 1, embedding_error: None },
        EventKind::Summary {
            messages: 8,
            summary: "summary text".into(),
            mood: "calm".into(),
            topic_keywords: vec!["deploy".into()],
            active_users: vec!["alice".into()],
            workspace: true,
        },
        EventKind::RespondFailed {
            mode: RespondMode::Direct,
            response_type: ResponseType::FullResponse,
            reason: "failure reason".into(),
            notice: Some("notice text".into()),
        },
        EventKind::Command {
            user: UserId("alice".into()),
            command: "/kuuki forget-me".into(),
            answer: "command answer".into(),
            announced: Some("announcement text".into()),
        },
        EventKind::Forget {
            user: Some(UserId("alice".into())),
            messages: 7,
            facts_removed: 2,
            facts_edited: 1,
            notes: 1,
            summaries: 1,
            server: None,
            unplaced: 0,
            late: false,
        },
        EventKind::SlackAccess {
            gone: true,
            team: Some("T1".into()),
            reason: "app_uninstalled".into(),
            purge_at: Some(at(3600)),
        },
        EventKind::Purge { team: "T1".into(), channels: 3, messages: 40, facts: 5, notes: 2, profiles: 4 },
        EventKind::Feedback {
            signal: crate::domain::talkativeness::SignalKind::NegativeReaction,
            user: Some(UserId("dana".into())),
            post: Some(ts(5)),
            weight: -6.0,
            offset: -12.0,
            undone: false,
        },
    ];
    let mut seen = [false; 15];
    for k in &kinds {
        let i = match k {
            EventKind::Message { .. } => 0,
            EventKind::Edited { .. } => 1,
            EventKind::Deleted => 2,
            EventKind::Judge { .. } => 3,
            EventKind::Superseded { .. } => 4,
            EventKind::Dropped { .. } => 5,
            EventKind::Respond { .. } => 6,
            EventKind::Reflect { .. } => 7,
            EventKind::Summary { .. } => 8,
            EventKind::RespondFailed { .. } => 9,
            EventKind::Command { .. } => 10,
            EventKind::Forget { .. } => 11,
            EventKind::SlackAccess { .. } => 12,
            EventKind::Purge { .. } => 13,
            EventKind::Feedback { .. } => 14,
        };
        seen[i] = true;
    }
    assert!(seen.iter().all(|s| *s), "one of each kind");
    let _: Timestamp = at(0);
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| Event {
            at: at(10 + i as i64),
            channel: ChannelId("general".into()),
            thread_root: None,
            ts: ts(1),
            kind,
        })
        .collect()
}

/// A forget's second look reads as what it is, not as a second request.
#[test]
fn a_forgets_second_look_reads_as_a_look_again() {
    use crate::domain::{ChannelId, Event, EventKind, Ts, UserId};
    let at = |s: i64| crate::replay::REPLAY_EPOCH + std::time::Duration::from_secs(s as u64);
    let ts = |s: i64| Ts::from_timestamp(at(s));
    let late = |late: bool| Event {
        at: at(10),
        channel: ChannelId("general".into()),
        thread_root: None,
        ts: ts(1),
        kind: EventKind::Forget {
            user: Some(UserId("alice".into())),
            messages: 1,
            facts_removed: 1,
            facts_edited: 0,
            notes: 1,
            summaries: 1,
            server: None,
            unplaced: 0,
            late,
        },
    };
    let mut sink = std::io::sink();
    let mut writer = crate::replay::LogWriter::new(&mut sink, true);
    writer.write_events(&mut vec![late(true), late(false)]);
    let lines = writer.kept().to_vec();
    assert_eq!((&lines[0]["late"], &lines[1]["late"]), (&json!(true), &serde_json::Value::Null), "{lines:?}");
    let html = render("second look", &lines, &with_llm_judge());
    assert!(
        html.contains(
            "looked again for alice once work in flight had ended: 1 message stored late, 1 fact removed, 0 facts kept without them, 1 note, 1 summary made anew"
        ),
        "{html}"
    );
    assert_eq!(html.matches("forgot alice").count(), 1, "the request alone reads as a forget");
}

#[test]
fn every_event_kind_reads_back_typed() {
    let mut sink = std::io::sink();
    let mut writer = crate::replay::LogWriter::new(&mut sink, true);
    writer.write_events(&mut one_of_every_kind());
    let lines = writer.kept().to_vec();
    assert_eq!(lines.len(), 15);
    for raw in &lines {
        let Read::Line(line) = line::read(raw) else { panic!("not a line: {raw}") };
        assert!(!matches!(line.body, Body::Other(_)), "{raw} is read as an unknown kind");
        assert!(line.t.is_some(), "{raw}");
        assert!(line.msg_t.is_some() || matches!(line.body, Body::Message(_)), "{raw}");
    }

    let html = render("every kind", &lines, &with_llm_judge());
    assert!(!html.contains("<code>"), "nothing is shown raw");
    for shown in [
        "message text",
        "<span class=\"badge trig\">mention</span>",
        "message at 0:01 now reads: edited text",
        "message at 0:01 deleted",
        "respond short_ack in 12s",
        "asked the LLM",
        "<span class=\"chip pos\">question +20</span>",
        "judge reason · alice's message at 0:01",
        "LLM error: llm error text",
        "the summarize of the message at 0:01 was superseded by the message at 0:50",
        "the message at 0:01 was dropped at the reflect stage: dropped reason",
        "<span class=\"badge t-react_only\">react_only</span><span class=\"badge\">ambient</span>",
        "shadow: not posted",
        ":tada:",
        "reflected on 9 messages: learned 4 new facts, strengthened 2 known facts, and updated the notes on 1 person",
        "<span class=\"badge\">summary of 8 messages</span><span class=\"badge\">workspace too</span> summary text",
        "mood: calm · topics: deploy",
        "<span class=\"err\">failed</span> <span class=\"badge\">full_response</span><span class=\"badge\">direct</span> failure reason",
        "posted instead: notice text",
        "forgot alice: 7 messages, 2 facts removed, 1 fact kept without them, 1 note, 1 summary made anew",
        "Slack took kuuki's access away: app_uninstalled",
        "the Slack workspace's data went after its uninstall: 3 channels, 40 messages, 5 facts, 2 notes, 4 profiles",
        "<span class=\"badge\">talkativeness</span> negative_reaction from dana: -6 <span class=\"reason\">· offset now -12</span>",
        // minijinja escapes "/" too.
        "<span class=\"badge\">command</span> alice ran <span class=\"cmd\">&#x2f;kuuki forget-me</span> <span class=\"reason\">· answered: command answer</span> <span class=\"reason\">· announced in the channel: announcement text</span>",
    ] {
        assert!(html.contains(shown), "{shown:?} is not on the page");
    }
}

#[test]
fn the_golden_logs_render_typed() {
    for (name, log) in [
        ("team-channel", include_str!("../../../../examples/team-channel.log.jsonl")),
        ("one-on-one", include_str!("../../../../examples/one-on-one.log.jsonl")),
        ("unanswered-question", include_str!("../../../../examples/unanswered-question.log.jsonl")),
    ] {
        let lines = parse(log);
        for raw in &lines {
            if let Read::Line(line) = line::read(raw) {
                assert!(!matches!(line.body, Body::Other(_)), "{name}: {raw}");
            }
        }
        let html = render(name, &lines, &with_llm_judge());
        assert!(!html.contains("<code>"), "{name}: a line is shown raw");
        assert!(!html.contains("No stats line"), "{name}");
        assert!(!html.contains(">?<") && !html.contains(" ? "), "{name}: a field was not read");
    }
}

#[test]
fn the_page_is_self_contained() {
    let html = render("team", &parse(include_str!("../../../../examples/team-channel.log.jsonl")), &with_llm_judge());
    for outside in ["<script", "<link", "src=", "url(", "@import", "<iframe", "<object", "<img"] {
        assert!(!html.contains(outside), "{outside:?} on the page");
    }
    // No event handler attributes (` onload=`, ` onclick=` …).
    for (at, _) in html.match_indices(" on") {
        let name: String = html[at + 3..].chars().take_while(char::is_ascii_alphabetic).collect();
        assert!(!html[at + 3 + name.len()..].starts_with('='), "an on{name} attribute");
    }
    assert!(html.matches("href=\"").count() > 10);
    assert_eq!(html.matches("href=\"").count(), html.matches("href=\"#").count(), "links stay on the page");
    assert!(html.contains("<style>"));
}

/// The talkativeness offset is drawn over time under a channel with feedback: 0 until
/// the first signal, each signal's offset, decaying between them; none elsewhere.
#[test]
fn the_talkativeness_offset_is_drawn_over_time() {
    let log = r#"{"t":0.0,"kind":"message","channel":"cold","thread":null,"user":"alice","text":"where is it?"}
{"t":120.0,"kind":"respond","channel":"cold","thread":null,"msg_t":0.0,"type":"full_response","mode":"ambient","text":"here"}
{"t":200.0,"kind":"feedback","channel":"cold","thread":null,"msg_t":120.0,"signal":"negative_reaction","user":"dana","post_t":120.0,"weight":-6.0,"offset":-6.0}
{"t":300.0,"kind":"feedback","channel":"cold","thread":null,"msg_t":120.0,"signal":"ignored","post_t":120.0,"weight":-6.0,"offset":-12.0}
{"t":86400.0,"kind":"message","channel":"cold","thread":null,"user":"alice","text":"next day"}
{"t":0.0,"kind":"message","channel":"warm","thread":null,"user":"bob","text":"hi"}"#;
    let html = render("talk", &parse(log), &with_llm_judge());
    let cold = html.split("<h2>#warm</h2>").next().unwrap();
    let warm = html.split("<h2>#warm</h2>").nth(1).unwrap();
    assert!(!charts(warm).contains("class=\"talk\""), "no feedback, no band");
    let points: Vec<(f64, f64)> = cold
        .split("<polyline class=\"talk\" points=\"")
        .nth(1)
        .expect("the band is drawn")
        .split('"')
        .next()
        .unwrap()
        .split(' ')
        .map(|p| {
            let (x, y) = p.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect();
    let (top, h) = (points[0].1 - 56.0 * 20.0 / 60.0, 56.0);
    let y = |offset: f64| top + h * (20.0 - offset) / 60.0;
    assert!((points[0].1 - y(0.0)).abs() < 0.1, "0 before the first signal");
    assert!(points.iter().any(|p| (p.1 - y(-6.0)).abs() < 0.1), "{points:?}");
    assert!(points.iter().any(|p| (p.1 - y(-12.0)).abs() < 0.1), "{points:?}");
    let last = points.last().unwrap().1;
    assert!(last < y(-12.0) && last > y(0.0), "decayed toward 0 by the next day, not to it: {last}");
    assert!(points.windows(2).all(|w| w[1].0 >= w[0].0), "in time order");
    assert!(cold.contains("negative_reaction from dana: -6 → talkativeness -6"), "each signal has a tip");
    assert!(cold.contains(">+20<") && cold.contains(">-40<"), "the bounds are labelled");
}
