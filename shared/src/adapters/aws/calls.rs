//! Counts AWS calls by service and operation (an SDK interceptor), and the DynamoDB
//! capacity units they consume: the figures behind the cost table of docs/aws.md.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use aws_sdk_dynamodb::operation::{
    batch_get_item::{BatchGetItemInput, BatchGetItemOutput},
    batch_write_item::{BatchWriteItemInput, BatchWriteItemOutput},
    delete_item::{DeleteItemInput, DeleteItemOutput},
    get_item::{GetItemInput, GetItemOutput},
    put_item::{PutItemInput, PutItemOutput},
    query::{QueryInput, QueryOutput},
    scan::{ScanInput, ScanOutput},
    update_item::{UpdateItemInput, UpdateItemOutput},
};
use aws_sdk_dynamodb::types::{ConsumedCapacity, ReturnConsumedCapacity};
use aws_smithy_runtime_api::box_error::BoxError;
use aws_smithy_runtime_api::client::interceptors::Intercept;
use aws_smithy_runtime_api::client::interceptors::context::{
    AfterDeserializationInterceptorContextRef, BeforeSerializationInterceptorContextMut,
    BeforeSerializationInterceptorContextRef, Input, Output,
};
use aws_smithy_runtime_api::client::orchestrator::Metadata;
use aws_smithy_runtime_api::client::runtime_components::RuntimeComponents;
use aws_smithy_types::config_bag::ConfigBag;

/// DynamoDB capacity units consumed, as the service reports them (tables and indexes).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CapacityUnits {
    pub read: f64,
    pub write: f64,
}

/// An action as IAM names it, with what it was on (a DynamoDB table and index, an SQS
/// queue's URL, the scheduler's schedules), and the function that made it (see
/// [`CallCounter::acting_as`]).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Access {
    pub function: String,
    /// `dynamodb:PutItem`, `sqs:SendMessage`, `scheduler:CreateSchedule`, …
    pub action: String,
    /// The table's name, the queue's URL, or `schedule` for the scheduler.
    pub resource: String,
    pub index: Option<String>,
}

#[derive(Debug, Clone, Default)]
pub struct CallCounter {
    calls: Arc<Mutex<BTreeMap<String, u64>>>,
    units: Arc<Mutex<CapacityUnits>>,
    accesses: Arc<Mutex<std::collections::BTreeSet<Access>>>,
    function: Arc<Mutex<String>>,
    service: &'static str,
}

impl CallCounter {
    /// A counter for one service that shares its tally with `self`.
    pub fn for_service(&self, service: &'static str) -> CallCounter {
        CallCounter { service, ..self.clone() }
    }

    /// Names the function (the template's resource name) whose calls follow, for
    /// [`CallCounter::accesses`].
    pub fn acting_as(&self, function: &str) {
        *self.function.lock().expect("counter lock") = function.to_owned();
    }

    /// Everything each function touched, and how: what its IAM policy must allow.
    pub fn accesses(&self) -> std::collections::BTreeSet<Access> {
        self.accesses.lock().expect("counter lock").clone()
    }

    /// Calls so far by `service.Operation`.
    pub fn calls(&self) -> BTreeMap<String, u64> {
        self.calls.lock().expect("counter lock").clone()
    }

    pub fn total(&self) -> u64 {
        self.calls().values().sum()
    }

    /// DynamoDB capacity units so far. A write refused by its condition counts one
    /// write unit: DynamoDB charges it, but reports nothing with the error.
    pub fn capacity_units(&self) -> CapacityUnits {
        *self.units.lock().expect("counter lock")
    }

    pub fn reset(&self) {
        self.calls.lock().expect("counter lock").clear();
        *self.units.lock().expect("counter lock") = CapacityUnits::default();
    }

    fn add_units(&self, read: f64, write: f64) {
        let mut units = self.units.lock().expect("counter lock");
        units.read += read;
        units.write += write;
    }
}

/// The table (and index) of an operation on one table.
fn one(table: &Option<String>, index: Option<&String>) -> Vec<(String, Option<String>)> {
    vec![(table.clone().unwrap_or_default(), index.cloned())]
}

/// The queue an SQS input names (by URL).
fn queues_of(input: &Input) -> Vec<(String, Option<String>)> {
    use aws_sdk_sqs::operation::{
        change_message_visibility_batch::ChangeMessageVisibilityBatchInput, send_message::SendMessageInput,
        send_message_batch::SendMessageBatchInput,
    };
    let url = if let Some(i) = input.downcast_ref::<SendMessageInput>() {
        i.queue_url.clone()
    } else if let Some(i) = input.downcast_ref::<SendMessageBatchInput>() {
        i.queue_url.clone()
    } else if let Some(i) = input.downcast_ref::<ChangeMessageVisibilityBatchInput>() {
        i.queue_url.clone()
    } else {
        None
    };
    url.into_iter().map(|url| (url, None)).collect()
}

/// The capacity units one report says were consumed.
fn units(consumed: Option<&ConsumedCapacity>) -> f64 {
    consumed.and_then(|c| c.capacity_units).unwrap_or(0.0)
}

/// The DynamoDB item operations, each once: its input and output types, the tables
/// its input names, and the (read, write) units its output reports. Makes
/// `tables_of`, `ask_for_capacity` (only the counted clients ask) and `reported_units`
/// (`None` for an output that is none of these).
macro_rules! item_operations {
    ($($input:ty => $output:ty, tables: |$i:ident| $tables:expr, units: |$o:ident| $units:expr;)*) => {
        fn tables_of(input: &Input) -> Vec<(String, Option<String>)> {
            $(if let Some($i) = input.downcast_ref::<$input>() {
                return $tables;
            })*
            Vec::new()
        }

        fn ask_for_capacity(input: &mut Input) {
            $(if let Some(i) = input.downcast_mut::<$input>() {
                i.return_consumed_capacity = Some(ReturnConsumedCapacity::Total);
                return;
            })*
        }

        fn reported_units(output: &Output) -> Option<(f64, f64)> {
            $(if let Some($o) = output.downcast_ref::<$output>() {
                return Some($units);
            })*
            None
        }
    };
}

item_operations! {
    GetItemInput => GetItemOutput,
        tables: |i| one(&i.table_name, None), units: |o| (units(o.consumed_capacity.as_ref()), 0.0);
    BatchGetItemInput => BatchGetItemOutput,
        tables: |i| i.request_items.iter().flatten().map(|(table, _)| (table.clone(), None)).collect(),
        units: |o| (o.consumed_capacity.iter().flatten().map(|c| units(Some(c))).sum(), 0.0);
    BatchWriteItemInput => BatchWriteItemOutput,
        tables: |i| i.request_items.iter().flatten().map(|(table, _)| (table.clone(), None)).collect(),
        units: |o| (0.0, o.consumed_capacity.iter().flatten().map(|c| units(Some(c))).sum());
    QueryInput => QueryOutput,
        tables: |i| one(&i.table_name, i.index_name.as_ref()), units: |o| (units(o.consumed_capacity.as_ref()), 0.0);
    ScanInput => ScanOutput,
        tables: |i| one(&i.table_name, i.index_name.as_ref()), units: |o| (units(o.consumed_capacity.as_ref()), 0.0);
    PutItemInput => PutItemOutput,
        tables: |i| one(&i.table_name, None), units: |o| (0.0, units(o.consumed_capacity.as_ref()));
    UpdateItemInput => UpdateItemOutput,
        tables: |i| one(&i.table_name, None), units: |o| (0.0, units(o.consumed_capacity.as_ref()));
    DeleteItemInput => DeleteItemOutput,
        tables: |i| one(&i.table_name, None), units: |o| (0.0, units(o.consumed_capacity.as_ref()));
}

impl Intercept for CallCounter {
    fn name(&self) -> &'static str {
        "kuuki-call-counter"
    }

    fn read_before_serialization(
        &self,
        context: &BeforeSerializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        let operation = cfg.load::<Metadata>().map_or("call", |m| m.name()).to_owned();
        let resources = match self.service {
            "dynamodb" => tables_of(context.input()),
            "sqs" => queues_of(context.input()),
            "scheduler" => vec![("schedule".to_owned(), None)],
            _ => Vec::new(),
        };
        let function = self.function.lock().expect("counter lock").clone();
        let mut accesses = self.accesses.lock().expect("counter lock");
        // IAM has no actions of its own for SQS's batch calls: SendMessageBatch needs
        // sqs:SendMessage, and so on.
        let permission = match self.service {
            "sqs" => operation.strip_suffix("Batch").unwrap_or(&operation),
            _ => &operation,
        };
        for (resource, index) in resources {
            let action = format!("{}:{permission}", self.service);
            accesses.insert(Access { function: function.clone(), action, resource, index });
        }
        drop(accesses);
        *self.calls.lock().expect("counter lock").entry(format!("{}.{operation}", self.service)).or_default() += 1;
        Ok(())
    }

    fn modify_before_serialization(
        &self,
        context: &mut BeforeSerializationInterceptorContextMut<'_>,
        _runtime_components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if self.service == "dynamodb" {
            ask_for_capacity(context.input_mut());
        }
        Ok(())
    }

    fn read_after_deserialization(
        &self,
        context: &AfterDeserializationInterceptorContextRef<'_>,
        _runtime_components: &RuntimeComponents,
        cfg: &mut ConfigBag,
    ) -> Result<(), BoxError> {
        if self.service != "dynamodb" {
            return Ok(());
        }
        match context.output_or_error() {
            Ok(output) => {
                if let Some((read, write)) = reported_units(output) {
                    self.add_units(read, write);
                }
            }
            Err(_) => {
                let operation = cfg.load::<Metadata>().map_or("", |m| m.name());
                if matches!(operation, "PutItem" | "UpdateItem" | "DeleteItem") {
                    self.add_units(0.0, 1.0);
                }
            }
        }
        Ok(())
    }
}
