//! Structured output (`LLM_STRUCTURED_OUTPUT`): the form a provider asks for a JSON
//! answer in, which steps down for the rest of the process when a server refuses it
//! as malformed (a local server that does not know `json_schema`, a proxy that strips
//! tools), so one refusal costs one more request, once per step, and never an outage.

use std::sync::atomic::{AtomicU8, Ordering};

use crate::config::StructuredOutput;

/// The form a provider asks with now, shared by every call it makes.
pub(super) struct StructuredMode {
    current: AtomicU8,
}

fn code(mode: StructuredOutput) -> u8 {
    match mode {
        StructuredOutput::Off => 0,
        StructuredOutput::JsonObject => 1,
        StructuredOutput::JsonSchema => 2,
    }
}

fn mode(code: u8) -> StructuredOutput {
    match code {
        0 => StructuredOutput::Off,
        1 => StructuredOutput::JsonObject,
        _ => StructuredOutput::JsonSchema,
    }
}

impl StructuredMode {
    pub(super) fn new(start: StructuredOutput) -> Self {
        StructuredMode { current: AtomicU8::new(code(start)) }
    }

    pub(super) fn current(&self) -> StructuredOutput {
        mode(self.current.load(Ordering::SeqCst))
    }

    /// A server refused `refused` as malformed (HTTP `status`): from now on `next` is
    /// asked with. Said once per step in the log, with the status and never the
    /// answer's body (it may quote the prompt); calls that were refused at the same
    /// time step down once. Returns the form to ask with now.
    pub(super) fn step_down(
        &self,
        provider: &'static str,
        refused: StructuredOutput,
        next: StructuredOutput,
        status: u16,
    ) -> StructuredOutput {
        let stepped = self.current.compare_exchange(code(refused), code(next), Ordering::SeqCst, Ordering::SeqCst);
        if stepped.is_ok() {
            tracing::warn!(
                provider,
                refused = refused.as_str(),
                now = next.as_str(),
                status,
                "the model server refused this form of structured output as malformed; the next form is asked \
                 for as long as this process runs (LLM_STRUCTURED_OUTPUT)"
            );
        }
        self.current()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_down_once_per_step_and_stays_down() {
        let m = StructuredMode::new(StructuredOutput::JsonSchema);
        let (schema, object, off) = (StructuredOutput::JsonSchema, StructuredOutput::JsonObject, StructuredOutput::Off);
        assert_eq!(m.step_down("openai", schema, object, 500), object);
        // A call refused at the same time as the first does not step twice.
        assert_eq!(m.step_down("openai", schema, object, 500), object);
        assert_eq!(m.current(), object);
        assert_eq!(m.step_down("openai", object, off, 400), off);
        assert_eq!(m.current(), off);
    }
}
