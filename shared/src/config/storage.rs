//! The `storage` group: where kuuki keeps things (the SQLite file; on AWS the tables,
//! queues and schedules) and what its logs keep.

use super::ConfigError;
use super::reader::Reader;

#[derive(Debug, Clone)]
pub struct StorageSettings {
    /// `DATA_PATH`: `kuuki serve`'s SQLite file (`:memory:`: nothing kept).
    pub data_path: String,
    /// `LOG_MESSAGE_TEXT`: production logs carry people's words (debugging only).
    pub log_message_text: bool,
    pub messages_table: String,
    pub channels_table: String,
    pub ledger_table: String,
    pub facts_table: String,
    pub judge_queue_url: String,
    pub respond_queue_url: String,
    pub summarize_queue_url: String,
    pub reflect_queue_url: String,
    pub forget_queue_url: String,
    pub judge_queue_arn: String,
    pub respond_queue_arn: String,
    pub summarize_queue_arn: String,
    pub reflect_queue_arn: String,
    pub forget_queue_arn: String,
    pub schedule_group: String,
    pub scheduler_role_arn: String,
}

impl StorageSettings {
    pub(super) fn parse(r: &Reader) -> Result<StorageSettings, ConfigError> {
        Ok(StorageSettings {
            data_path: r.string("DATA_PATH", "kuuki.db"),
            log_message_text: r.bool("LOG_MESSAGE_TEXT", false)?,
            messages_table: r.string("MESSAGES_TABLE", "kuuki-messages"),
            channels_table: r.string("CHANNELS_TABLE", "kuuki-channels"),
            ledger_table: r.string("LEDGER_TABLE", "kuuki-ledger"),
            facts_table: r.string("FACTS_TABLE", "kuuki-facts"),
            judge_queue_url: r.string("JUDGE_QUEUE_URL", ""),
            respond_queue_url: r.string("RESPOND_QUEUE_URL", ""),
            summarize_queue_url: r.string("SUMMARIZE_QUEUE_URL", ""),
            reflect_queue_url: r.string("REFLECT_QUEUE_URL", ""),
            forget_queue_url: r.string("FORGET_QUEUE_URL", ""),
            judge_queue_arn: r.string("JUDGE_QUEUE_ARN", ""),
            respond_queue_arn: r.string("RESPOND_QUEUE_ARN", ""),
            summarize_queue_arn: r.string("SUMMARIZE_QUEUE_ARN", ""),
            reflect_queue_arn: r.string("REFLECT_QUEUE_ARN", ""),
            forget_queue_arn: r.string("FORGET_QUEUE_ARN", ""),
            schedule_group: r.string("SCHEDULE_GROUP", "kuuki"),
            scheduler_role_arn: r.string("SCHEDULER_ROLE_ARN", ""),
        })
    }
}
