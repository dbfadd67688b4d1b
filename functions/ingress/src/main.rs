//! The ingress Lambda. The router it serves is `kuuki_ingress::app` (also served by
//! `kuuki serve`); the Lambda needs the AWS adapters (DynamoDB, SQS), which are not
//! built yet, so this binary refuses to start instead of pretending to work.

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!(
        "kuuki-ingress: the AWS adapters this function needs are not built yet; \
         serve the same routes locally with `kuuki serve`"
    );
    ExitCode::FAILURE
}
