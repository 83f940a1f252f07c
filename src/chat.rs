//! Chat templates: the Jinja template stored in the GGUF (`tokenizer.chat_template`),
//! rendered with minijinja and Python-compatible string methods, as `apply_chat_template`
//! does in `transformers`.

#[derive(Debug, Clone, PartialEq)]
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
#[error("the model's chat template (tokenizer.chat_template) failed: {0}; use raw mode to send the prompt as it is")]
pub struct TemplateError(String);

/// The work a template may do in one rendering, in minijinja's fuel: about one unit per
/// instruction and per 64 bytes allocated or written (minijinja 3.1 charges output too), so
/// this bounds the time (well under a second), the memory and the output (about 64 MB) of a
/// hostile template. The real templates use a few hundred units for a turn, a 40 KB prompt
/// about a thousand.
pub const TEMPLATE_FUEL: u64 = 1_000_000;

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
    env.set_fuel(Some(TEMPLATE_FUEL));
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
    env.render_str(template, ctx).map_err(|e| match e.kind() {
        minijinja::ErrorKind::OutOfFuel => TemplateError(format!(
            "it did more work than any chat template needs (over {TEMPLATE_FUEL} units: nested loops or a huge output) and was stopped"
        )),
        _ => TemplateError(e.to_string()),
    })
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

    /// #23.6: nested loops used to hang the run or grow memory at 100 MB/s.
    #[test]
    fn a_hostile_template_is_stopped_by_its_budget() {
        for hostile in [
            "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
            "{% for a in range(100000) %}{% for b in range(100000) %}{{ 'x' * 1000 }}{% endfor %}{% endfor %}",
            "{% set s = namespace(v='x') %}{% for a in range(60) %}{% set s.v = s.v ~ s.v %}{% endfor %}{{ s.v }}",
        ] {
            let err = render(hostile, &[Message::user("hi")], true, "", "").unwrap_err().to_string();
            assert!(err.contains("tokenizer.chat_template") && err.contains("was stopped"), "{err}");
        }
    }

    /// The budget leaves the real templates room: the LLaDA and Qwen2 (Dream) ones with a 40 KB
    /// prompt over several turns.
    #[test]
    fn real_templates_render_long_prompts_within_the_budget() {
        let llada = "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
        let qwen = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";
        let long = "word ".repeat(8000);
        let turns: Vec<Message> = (0..6)
            .map(|i| Message { role: if i % 2 == 0 { "user" } else { "assistant" }.into(), content: long.clone() })
            .collect();
        for t in [llada, qwen] {
            let out = render(t, &turns, true, "<s>", "</s>").unwrap();
            assert!(out.len() > 6 * long.len());
        }
    }
}
