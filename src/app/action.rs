//! What the user asked for, as values: the drawing code records them and the app applies them
//! after the frame is drawn, so no drawing code loads a model, starts a run or changes the
//! settings it is reading.

use std::path::PathBuf;

use super::decoding_mode::Mode;
use crate::decoding::{Param, Value};

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Load the model at this path, cancelling the run in progress.
    Load(PathBuf),
    /// Choose a file in the system's dialog (on its own thread), then load it.
    PickFile,
    /// Load the current model again with the load settings just changed.
    Reload,
    /// List the models downloaded to the Hugging Face cache (on its own thread).
    ScanDownloads,
    Generate,
    Stop,
    /// Change one generation setting of the current model's kind.
    SetParam(Param, Value),
    SetDecodingMode(Mode),
    /// Show the canvas as it was after this step.
    ReplayStep(usize),
    SaveReplay,
    /// Add the message being written to the conversation and generate the reply.
    ChatSend,
    /// Generate the last reply again.
    ChatRegenerate,
    /// Take the last message back into the message box (its reply is removed).
    ChatEditLast,
    /// Save the conversation on display and start another.
    ChatNew,
    ChatOpen(String),
    ChatDelete(String),
    ChatRename(String),
    /// Write the conversation on display to the export folder: "md" or "json".
    ChatExport(&'static str),
    /// Serve the loaded model over the OpenAI-compatible API (true), or stop (false).
    Serve(bool),
}
