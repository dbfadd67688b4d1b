//! The HTML timeline report of a replay.

use serde_json::Value;

use crate::config::Settings;

/// A self-contained HTML page of the replay's decision log.
pub fn render(title: &str, lines: &[Value], settings: &Settings) -> String {
    let _ = (lines, settings);
    format!("<!doctype html><title>{title}</title>")
}
