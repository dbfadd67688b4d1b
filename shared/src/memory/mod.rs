//! Memory beyond the conversation window (DESIGN §6): channel and workspace memory,
//! kept up to date by summarization.

pub mod keywords;
pub mod reflect;
pub mod summarize;
