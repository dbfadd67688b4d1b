//! The respond Lambda. Its AWS adapters (DynamoDB, SQS, Scheduler) and the Lambda runtime
//! are not built yet, so this binary refuses to start instead of pretending to work.
//! The same logic runs today in one process: `kuuki replay` (and later `kuuki serve`).

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!(
        "kuuki-respond: the AWS adapters this function needs are not built yet; \
         run kuuki locally with `kuuki replay` instead"
    );
    ExitCode::FAILURE
}
