//! Embedders for vector fact search (`VECTOR_SEARCH_ENABLED`): the OpenAI-compatible
//! `/embeddings` endpoint, and a local feature-hashing embedder for replay and tests.

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

use super::http::{HttpPolicy, client, decode, post_json};
use crate::memory::keywords::keywords;
use crate::ports::{Embedder, LlmError};

/// `POST {OPENAI_BASE_URL}/embeddings` with `EMBEDDING_MODEL`, under the chat calls'
/// timeout and retries. Errors never carry the key, even when a server echoes it.
pub struct OpenAiEmbeddings {
    http: reqwest::Client,
    policy: HttpPolicy,
    base_url: String,
    api_key: String,
    model: String,
}

impl OpenAiEmbeddings {
    /// `base_url` ends before `/embeddings` (`https://api.openai.com/v1`); an empty key
    /// sends no Authorization header (local servers).
    pub fn new(base_url: &str, api_key: &str, model: &str, policy: HttpPolicy) -> Self {
        OpenAiEmbeddings {
            http: client(&policy),
            policy,
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key: api_key.to_owned(),
            model: model.to_owned(),
        }
    }

    async fn call(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        let body = json!({"model": self.model, "input": texts});
        let bearer = format!("Bearer {}", self.api_key);
        let headers: Vec<(&str, &str)> =
            if self.api_key.is_empty() { vec![] } else { vec![("authorization", &bearer)] };
        let url = format!("{}/embeddings", self.base_url);
        let answer: EmbeddingAnswer =
            decode("embeddings", post_json(&self.http, &self.policy, "embeddings", &url, &headers, &body).await?)?;
        let mut data = answer.data;
        // The API numbers its answers; nothing promises they come in order.
        data.sort_by_key(|d| d.index);
        if data.len() != texts.len() || data.iter().enumerate().any(|(i, d)| d.index != i) {
            return Err(LlmError::Failed(format!(
                "embeddings: asked for {} vectors, the answer numbers {:?}",
                texts.len(),
                data.iter().map(|d| d.index).collect::<Vec<_>>()
            )));
        }
        let vectors: Vec<Vec<f32>> = data.into_iter().map(|d| d.embedding).collect();
        let dimensions = vectors.first().map_or(0, Vec::len);
        if dimensions == 0 || vectors.iter().any(|v| v.len() != dimensions) {
            return Err(LlmError::Failed("embeddings: empty or unequal vectors in the answer".into()));
        }
        Ok(vectors)
    }
}

#[async_trait]
impl Embedder for OpenAiEmbeddings {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let started = std::time::Instant::now();
        let result = self.call(texts).await;
        tracing::info!(
            target: "kuuki::llm",
            role = "embed",
            texts = texts.len(),
            latency_ms = started.elapsed().as_millis() as u64,
            ok = result.is_ok(),
            "embedding call"
        );
        result.map_err(|error| match error {
            LlmError::Failed(message) if !self.api_key.is_empty() => {
                LlmError::Failed(message.replace(&self.api_key, "[key]"))
            }
            other => other,
        })
    }
}

#[derive(Deserialize)]
struct EmbeddingAnswer {
    data: Vec<EmbeddingData>,
}

#[derive(Deserialize)]
struct EmbeddingData {
    index: usize,
    embedding: Vec<f32>,
}

/// Dimensions of [`KeywordHashEmbedder`]'s vectors.
pub const KEYWORD_HASH_DIMENSIONS: usize = 256;

/// A local, deterministic embedder for replay and tests: it hashes each keyword
/// (`memory::keywords`) and the keyword's character trigrams into a fixed-size vector.
/// It knows spelling, not meaning: "deploy" and "deploys" come out close (shared
/// trigrams) where keyword overlap sees nothing, but "デプロイ" and "release" stay
/// strangers. It makes no calls and costs nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct KeywordHashEmbedder;

impl KeywordHashEmbedder {
    pub fn vector(text: &str) -> Vec<f32> {
        let mut v = vec![0.0_f32; KEYWORD_HASH_DIMENSIONS];
        let mut add = |feature: &str, weight: f32| {
            let h = fnv1a(feature.as_bytes());
            // One bit of the hash picks the sign, so unrelated features cancel out on
            // average instead of piling up in shared buckets.
            let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
            v[(h % KEYWORD_HASH_DIMENSIONS as u64) as usize] += sign * weight;
        };
        for word in keywords(text) {
            add(&format!("w:{word}"), 1.0);
            let chars: Vec<char> = word.chars().collect();
            for gram in chars.windows(3) {
                add(&format!("g:{}", gram.iter().collect::<String>()), 0.5);
            }
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm > 0.0 {
            v.iter_mut().for_each(|x| *x /= norm);
        }
        v
    }
}

/// FNV-1a: stable across builds and platforms (the standard hasher promises neither).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3))
}

#[async_trait]
impl Embedder for KeywordHashEmbedder {
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, LlmError> {
        Ok(texts.iter().map(|t| Self::vector(t)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::reflect::cosine;

    #[test]
    fn the_hashing_embedder_is_deterministic_and_knows_spelling_not_meaning() {
        let v = |t: &str| KeywordHashEmbedder::vector(t);
        assert_eq!(v("alice deploys on Fridays"), v("alice deploys on Fridays"));
        assert_eq!(v("alice deploys").len(), KEYWORD_HASH_DIMENSIONS);
        let norm: f32 = v("alice deploys").iter().map(|x| x * x).sum();
        assert!((norm - 1.0).abs() < 1e-5, "unit length: {norm}");
        assert!(v("!!!").iter().all(|x| *x == 0.0), "no keywords, no direction");
        let close = cosine(&v("deploys"), &v("deploy"));
        let far = cosine(&v("deploys"), &v("curry"));
        assert!(close > 0.4, "shared trigrams: {close}");
        assert!(far.abs() < 0.3, "nothing shared: {far}");
    }
}
