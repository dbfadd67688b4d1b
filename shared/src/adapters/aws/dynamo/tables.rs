//! Creating the tables where they do not exist (`kuuki setup-aws`, tests); in AWS the
//! SAM template owns them.

use super::*;
use crate::adapters::aws::SetupError;

/// Whether TTL is on (or being turned on) for `table`.
pub(super) async fn ttl_enabled(client: &Client, table: &str) -> Result<bool, SetupError> {
    use aws_sdk_dynamodb::types::TimeToLiveStatus;
    let status = client
        .describe_time_to_live()
        .table_name(table)
        .send()
        .await
        .map_err(SetupError::of(format!("TTL of {table}")))?
        .time_to_live_description
        .and_then(|d| d.time_to_live_status);
    Ok(matches!(status, Some(TimeToLiveStatus::Enabled | TimeToLiveStatus::Enabling)))
}

/// Creates the four tables where they do not exist (`kuuki setup-aws`, tests); in AWS
/// the SAM template owns them.
pub async fn create_tables(client: &Client, tables: &TableNames) -> Result<(), SetupError> {
    let existing =
        client.list_tables().send().await.map_err(SetupError::of("list tables"))?.table_names.unwrap_or_default();
    let key = |name: &str, kind: KeyType| KeySchemaElement::builder().attribute_name(name).key_type(kind).build();
    let attr =
        |name: &str| AttributeDefinition::builder().attribute_name(name).attribute_type(ScalarAttributeType::S).build();
    let specs: [(&str, Vec<&str>, bool); 4] = [
        (&tables.messages, vec!["channel", "sk"], true),
        (&tables.channels, vec!["channel"], false),
        (&tables.ledger, vec!["key"], true),
        (&tables.facts, vec!["scope", "id"], false),
    ];
    for (name, keys, ttl) in specs {
        if existing.iter().any(|t| t == name) {
            continue;
        }
        let mut create = client.create_table().table_name(name).billing_mode(BillingMode::PayPerRequest);
        for (i, k) in keys.iter().enumerate() {
            let kind = if i == 0 { KeyType::Hash } else { KeyType::Range };
            create = create
                .key_schema(key(k, kind).map_err(SetupError::of("table schema"))?)
                .attribute_definitions(attr(k).map_err(SetupError::of("table schema"))?);
        }
        if name == tables.messages {
            let index = GlobalSecondaryIndex::builder()
                .index_name(CONVERSATION_INDEX)
                .key_schema(key("conv", KeyType::Hash).map_err(SetupError::of("table schema"))?)
                .key_schema(key("sk", KeyType::Range).map_err(SetupError::of("table schema"))?)
                .projection(Projection::builder().projection_type(ProjectionType::All).build())
                .build()
                .map_err(SetupError::of("table schema"))?;
            create = create
                .attribute_definitions(attr("conv").map_err(SetupError::of("table schema"))?)
                .global_secondary_indexes(index);
        }
        match create.send().await {
            Ok(_) => {}
            // The table is there: the SDK retried a create that had succeeded (a slow
            // answer), or another setup made it meanwhile. Its TTL is still checked.
            Err(SdkError::ServiceError(e)) if e.err().is_resource_in_use_exception() => {}
            Err(e) => return Err(SetupError::of(format!("create table {name}"))(e)),
        }
        if ttl && !ttl_enabled(client, name).await? {
            let spec = TimeToLiveSpecification::builder()
                .enabled(true)
                .attribute_name("expires_at")
                .build()
                .map_err(SetupError::of("table schema"))?;
            client
                .update_time_to_live()
                .table_name(name)
                .time_to_live_specification(spec)
                .send()
                .await
                .map_err(SetupError::of(format!("enable TTL on {name}")))?;
        }
    }
    Ok(())
}
