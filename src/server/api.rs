//! The OpenAI-shaped parts of the API: what a request may hold, and the error bodies.
//!
//! A request is read field by field from its JSON object, so that a known field of the wrong
//! type is refused naming the field (serde's derive would say only "invalid type"), and fields
//! dllm does not know are ignored, as OpenAI's clients send many.

use serde_json::{Map, Value, json};

use crate::chat::Message;
use crate::decoding::{PARAMS, Param};

/// An error answer: its HTTP status and OpenAI's `{"error": {...}}` body.
#[derive(Debug)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
    pub kind: &'static str,
    pub param: Option<String>,
    pub code: Option<&'static str>,
}

impl ApiError {
    pub fn invalid(message: impl Into<String>, param: Option<&str>) -> ApiError {
        ApiError {
            status: 400,
            message: message.into(),
            kind: "invalid_request_error",
            param: param.map(str::to_owned),
            code: None,
        }
    }

    pub fn new(status: u16, kind: &'static str, code: Option<&'static str>, message: impl Into<String>) -> ApiError {
        ApiError { status, message: message.into(), kind, param: None, code }
    }

    pub fn body(&self) -> Value {
        json!({"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}})
    }
}

/// What a chat or text completion request asks for, once read.
#[derive(Debug, Default)]
pub struct CompletionRequest {
    /// The conversation (chat) or `None` for a text completion's raw prompt.
    pub messages: Option<Vec<Message>>,
    pub prompt: Option<String>,
    pub stream: bool,
    /// Texts that end the answer where they first appear (not included).
    pub stop: Vec<String>,
    /// Settings by the engine's names (`decoding::PARAMS`), as text, in the order given.
    pub settings: Vec<(Param, String)>,
}

fn field<T: serde::de::DeserializeOwned>(name: &str, value: &Value) -> Result<T, ApiError> {
    serde_json::from_value(value.clone()).map_err(|e| ApiError::invalid(format!("'{name}': {e}"), Some(name)))
}

/// A message's `content`: a string, or OpenAI's array of parts of which the text parts count.
fn content(value: &Value, at: usize) -> Result<String, ApiError> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => parts
            .iter()
            .map(|p| match (p.get("type").and_then(Value::as_str), p.get("text").and_then(Value::as_str)) {
                (Some("text"), Some(t)) => Ok(t),
                _ => Err(ApiError::invalid(
                    format!("messages[{at}].content: only text parts are supported"),
                    Some("messages"),
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|t| t.concat()),
        Value::Null => Ok(String::new()),
        _ => Err(ApiError::invalid(format!("messages[{at}].content must be a string"), Some("messages"))),
    }
}

/// Reads a request body: `chat` for /v1/chat/completions (messages), else /v1/completions
/// (prompt).
pub fn read_request(body: &Value, chat: bool) -> Result<CompletionRequest, ApiError> {
    let Some(object) = body.as_object() else {
        return Err(ApiError::invalid("the body must be a JSON object", None));
    };
    let mut req = CompletionRequest::default();
    for (name, value) in object {
        read_field(&mut req, name, value, chat)?;
    }
    if chat && req.messages.as_ref().is_none_or(Vec::is_empty) {
        return Err(ApiError::invalid("'messages' must hold at least one message", Some("messages")));
    }
    if !chat && req.prompt.is_none() {
        return Err(ApiError::invalid("'prompt' is required", Some("prompt")));
    }
    Ok(req)
}

fn read_field(req: &mut CompletionRequest, name: &str, value: &Value, chat: bool) -> Result<(), ApiError> {
    let setting = |param: Param| -> Result<(Param, String), ApiError> {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            _ => {
                return Err(ApiError::invalid(format!("'{name}' must be a number, a string or a boolean"), Some(name)));
            }
        };
        Ok((param, text))
    };
    match name {
        "messages" if chat => {
            let list: Vec<Map<String, Value>> = field(name, value)?;
            let mut messages = Vec::with_capacity(list.len());
            for (i, m) in list.iter().enumerate() {
                let role: String = field("messages.role", m.get("role").unwrap_or(&Value::Null))?;
                if !matches!(role.as_str(), "system" | "developer" | "user" | "assistant") {
                    return Err(ApiError::invalid(
                        format!("messages[{i}].role '{role}' is not supported (system, user, assistant)"),
                        Some("messages"),
                    ));
                }
                let role = if role == "developer" { "system".to_string() } else { role };
                messages.push(Message { role, content: content(m.get("content").unwrap_or(&Value::Null), i)? });
            }
            req.messages = Some(messages);
        }
        "prompt" if !chat => {
            req.prompt = Some(match value {
                Value::Array(items) if items.len() == 1 => field(name, &items[0])?,
                Value::Array(_) => return Err(ApiError::invalid("'prompt': one prompt per request", Some(name))),
                _ => field(name, value)?,
            });
        }
        "model" => {
            let _: String = field(name, value)?;
        }
        "stream" => req.stream = field::<Option<bool>>(name, value)?.unwrap_or(false),
        "stop" => {
            req.stop = match value {
                Value::Null => Vec::new(),
                Value::String(s) => vec![s.clone()],
                _ => field(name, value)?,
            };
            req.stop.retain(|s| !s.is_empty());
        }
        "n" => {
            let n: Option<u32> = field(name, value)?;
            if n.is_some_and(|n| n != 1) {
                return Err(ApiError::invalid("'n': dllm answers one choice per request", Some(name)));
            }
        }
        "max_tokens" | "max_completion_tokens" => {
            if !value.is_null() {
                let _: u32 = field(name, value)?;
                req.settings.push(setting(Param::GenLength)?);
            }
        }
        "temperature" | "top_p" | "seed" => {
            if !value.is_null() {
                let _: f64 = field(name, value)?;
                let param = match name {
                    "temperature" => Param::Temperature,
                    "top_p" => Param::TopP,
                    _ => Param::Seed,
                };
                req.settings.push(setting(param)?);
            }
        }
        _ => {
            // dllm's own settings, by the engine's names (steps, block_length, alg, threshold,
            // cache, ...); anything else is ignored.
            if let Some(spec) = PARAMS.iter().find(|s| s.name == name)
                && !value.is_null()
            {
                req.settings.push(setting(spec.param)?);
            }
        }
    }
    Ok(())
}
