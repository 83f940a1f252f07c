//! Chat templates: the Jinja template stored in the GGUF (`tokenizer.chat_template`),
//! rendered with minijinja and Python-compatible string methods, as `apply_chat_template`
//! does in `transformers`.

#[derive(Debug, Clone)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn user(content: impl Into<String>) -> Message {
        Message { role: "user".into(), content: content.into() }
    }

    fn to_value(&self) -> minijinja::Value {
        minijinja::Value::from_pairs([("role", self.role.as_str()), ("content", self.content.as_str())])
    }
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("the model's chat template failed: {0}; use raw mode to send the prompt as it is")]
pub struct TemplateError(String);

/// Renders `template` for `messages`, ending with the assistant's turn header when
/// `add_generation_prompt` is set.
pub fn render(
    template: &str,
    messages: &[Message],
    add_generation_prompt: bool,
    bos_token: &str,
    eos_token: &str,
) -> Result<String, TemplateError> {
    let mut env = minijinja::Environment::new();
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", |msg: String| -> Result<String, minijinja::Error> {
        Err(minijinja::Error::new(minijinja::ErrorKind::InvalidOperation, msg))
    });
    let ctx = minijinja::context! {
        messages => messages.iter().map(Message::to_value).collect::<Vec<_>>(),
        add_generation_prompt => add_generation_prompt,
        bos_token => bos_token,
        eos_token => eos_token,
    };
    env.render_str(template, ctx).map_err(|e| TemplateError(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_string_methods_and_exceptions() {
        let t = "{% for m in messages %}{{ m.content.strip() }}{% endfor %}{% if add_generation_prompt %}>{% endif %}";
        assert_eq!(render(t, &[Message::user("  hi ")], true, "", "").unwrap(), "hi>");
        let bad = "{{ raise_exception('no system role') }}";
        assert!(render(bad, &[], false, "", "").unwrap_err().to_string().contains("no system role"));
    }
}
