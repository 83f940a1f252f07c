//! Conversations as the front ends keep them: a system prompt and the turns, saved as JSON
//! (the app keeps one file per conversation in its data directory, `dllm chat` writes one on
//! `/save`) and exported as Markdown.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::chat::Message;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    pub title: String,
    /// Empty: none.
    #[serde(default)]
    pub system: String,
    #[serde(default)]
    pub turns: Vec<Turn>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Turn {
    /// "user" or "assistant".
    pub role: String,
    pub content: String,
}

impl Conversation {
    /// What the chat template renders: the system prompt, then the turns.
    pub fn messages(&self) -> Vec<Message> {
        let system =
            (!self.system.trim().is_empty()).then(|| Message { role: "system".into(), content: self.system.clone() });
        system
            .into_iter()
            .chain(self.turns.iter().map(|t| Message { role: t.role.clone(), content: t.content.clone() }))
            .collect()
    }

    pub fn push(&mut self, role: &str, content: impl Into<String>) {
        self.turns.push(Turn { role: role.into(), content: content.into() });
        if self.title.is_empty() && role == "user" {
            self.title = self.turns.last().map(|t| t.content.chars().take(48).collect()).unwrap_or_default();
        }
    }

    /// Removes the `n` oldest turns (to fit the context; the front end says so).
    pub fn drop_oldest(&mut self, n: usize) {
        self.turns.drain(..n.min(self.turns.len()));
    }

    pub fn to_markdown(&self) -> String {
        let mut out = format!("# {}\n\n", if self.title.is_empty() { "Conversation" } else { &self.title });
        if !self.system.trim().is_empty() {
            out.push_str(&format!("**System:** {}\n\n", self.system.trim()));
        }
        for t in &self.turns {
            let who = if t.role == "user" { "You" } else { "Assistant" };
            out.push_str(&format!("**{who}:** {}\n\n", t.content.trim()));
        }
        out
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a conversation serializes")
    }

    /// Writes the conversation to `path` whole (a temporary file renamed), as Markdown for a
    /// `.md` name, else JSON.
    pub fn save(&self, path: &Path) -> std::io::Result<()> {
        let text = if path.extension().is_some_and(|e| e == "md") { self.to_markdown() } else { self.to_json() };
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let mut temp = tempfile::Builder::new().prefix(".dllm-conversation-").tempfile_in(dir)?;
        std::io::Write::write_all(&mut temp, text.as_bytes())?;
        temp.persist(path).map_err(|e| e.error)?;
        Ok(())
    }

    pub fn load(path: &Path) -> Result<Conversation, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{} is not a saved conversation: {e}", path.display()))
    }
}

/// A folder of saved conversations, one JSON file each, named by an id.
#[derive(Debug, Clone)]
pub struct Store {
    pub dir: PathBuf,
}

impl Store {
    /// The saved conversations (id, conversation), most recently saved first; unreadable files
    /// are left out.
    pub fn list(&self) -> Vec<(String, Conversation)> {
        let mut found: Vec<(std::time::SystemTime, String, Conversation)> = std::fs::read_dir(&self.dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let path = e.path();
                let id = path.file_stem()?.to_string_lossy().into_owned();
                (path.extension()? == "json").then_some(())?;
                let modified = e.metadata().and_then(|m| m.modified()).ok()?;
                Some((modified, id, Conversation::load(&path).ok()?))
            })
            .collect();
        found.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.cmp(&a.1)));
        found.into_iter().map(|(_, id, c)| (id, c)).collect()
    }

    pub fn path(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Saves under `id`, creating the folder.
    pub fn save(&self, id: &str, conversation: &Conversation) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        conversation.save(&self.path(id))
    }

    pub fn delete(&self, id: &str) -> std::io::Result<()> {
        std::fs::remove_file(self.path(id))
    }

    /// A new id: the time in milliseconds (unique within a store: it waits a millisecond on a
    /// collision).
    pub fn new_id(&self) -> String {
        loop {
            let ms = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
            let id = format!("c{ms}");
            if !self.path(&id).exists() {
                return id;
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saved_conversations_come_back_and_export() {
        let dir = std::env::temp_dir().join(format!("dllm-conv-test-{}", std::process::id()));
        let store = Store { dir: dir.clone() };
        let mut c = Conversation { system: "Be brief.".into(), ..Default::default() };
        c.push("user", "What is a diffusion model?");
        c.push("assistant", "A model that denoises.");
        assert_eq!(c.title, "What is a diffusion model?");
        assert_eq!(c.messages().len(), 3);
        let id = store.new_id();
        store.save(&id, &c).unwrap();
        assert_eq!(store.list(), vec![(id.clone(), c.clone())]);
        let md = c.to_markdown();
        assert!(md.contains("**You:** What is a diffusion model?") && md.contains("**System:** Be brief."), "{md}");
        c.drop_oldest(1);
        assert_eq!(c.turns[0].role, "assistant");
        store.delete(&id).unwrap();
        assert!(store.list().is_empty());
        std::fs::remove_dir_all(&dir).ok();
    }
}
