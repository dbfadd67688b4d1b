//! `kuuki setup-aws`: the tables, queues and schedule group kuuki needs, where the
//! standard AWS environment points (emulators, or a quick trial account).

use anyhow::Context;
use clap::Args;
use kuuki::adapters::aws::dynamo::{TableNames, create_tables};
use kuuki::adapters::aws::sqs::create_queues;

use crate::cli::{CommonArgs, setup};

#[derive(Args)]
pub struct SetupArgs {
    /// Queue names start with this.
    #[arg(long, default_value = "kuuki")]
    prefix: String,
    #[command(flatten)]
    common: CommonArgs,
}

pub async fn setup_aws(args: SetupArgs) -> anyhow::Result<()> {
    let settings = setup(&args.common)?.options.settings;
    let config = kuuki::adapters::aws::config::load().await;
    let tables = TableNames {
        messages: settings.storage.messages_table.clone(),
        channels: settings.storage.channels_table.clone(),
        ledger: settings.storage.ledger_table.clone(),
        facts: settings.storage.facts_table.clone(),
    };
    create_tables(&aws_sdk_dynamodb::Client::new(&config), &tables).await.context("creating the DynamoDB tables")?;
    let (urls, arns) =
        create_queues(&aws_sdk_sqs::Client::new(&config), &args.prefix, settings.time_budget().visibility_timeout())
            .await
            .context("creating the SQS queues")?;
    let scheduler = aws_sdk_scheduler::Client::new(&config);
    let group = &settings.storage.schedule_group;
    let exists = scheduler.get_schedule_group().name(group).send().await.is_ok();
    if !exists {
        scheduler
            .create_schedule_group()
            .name(group)
            .send()
            .await
            .with_context(|| format!("creating the schedule group {group}"))?;
    }
    eprintln!(
        "kuuki setup-aws: tables {}, {}, {}, {}; queues and schedule group {group} are ready. For kuuki serve --aws:",
        tables.messages, tables.channels, tables.ledger, tables.facts
    );
    println!("export JUDGE_QUEUE_URL={}", urls.judge);
    println!("export RESPOND_QUEUE_URL={}", urls.respond);
    println!("export SUMMARIZE_QUEUE_URL={}", urls.summarize);
    println!("export REFLECT_QUEUE_URL={}", urls.reflect);
    println!("export FORGET_QUEUE_URL={}", urls.forget);
    println!("export JUDGE_QUEUE_ARN={}", arns[0]);
    println!("export RESPOND_QUEUE_ARN={}", arns[1]);
    println!("export SUMMARIZE_QUEUE_ARN={}", arns[2]);
    println!("export REFLECT_QUEUE_ARN={}", arns[3]);
    println!("export FORGET_QUEUE_ARN={}", arns[4]);
    Ok(())
}
