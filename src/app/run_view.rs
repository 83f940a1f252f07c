//! What the window knows about one generation: every step's canvas as it arrives, when each
//! position was committed and with what confidence, and the final result. Pure data, fed by
//! engine events, so the canvas, the replay slider and the charts all read from one place.

use crate::engine::{EngineError, Event, Finished, Generation, StepEvent};

pub struct RunView {
    generation: Option<Generation>,
    pub prompt_len: usize,
    pub mask: u32,
    /// Steps the run plans, or the most it can take (the colour scale of the canvas).
    pub total_steps: usize,
    pub initial: Vec<u32>,
    pub steps: Vec<StepEvent>,
    /// Per position: (step it was committed in, confidence), for answer positions.
    pub commits: Vec<Option<(usize, f32)>>,
    pub finished: Option<Finished>,
    pub failed: Option<String>,
    pub stop_requested: bool,
}

impl RunView {
    /// The view of a run that has just started: its first event, the start, is the engine's
    /// plan and initial canvas.
    pub fn new(generation: Generation, mask: u32) -> Result<RunView, EngineError> {
        let started = match generation.events().recv() {
            Ok(Event::Started(started)) => started,
            Ok(Event::Failed(e)) => return Err(e),
            _ => return Err(EngineError::Internal("a run sent no start".into())),
        };
        Ok(RunView {
            generation: Some(generation),
            prompt_len: started.plan.prompt_len,
            mask,
            total_steps: started.plan.max_steps,
            commits: vec![None; started.initial.len()],
            initial: started.initial,
            steps: Vec::new(),
            finished: None,
            failed: None,
            stop_requested: false,
        })
    }

    pub fn is_running(&self) -> bool {
        self.generation.is_some()
    }

    pub fn stop(&mut self) {
        if let Some(g) = &self.generation {
            g.cancel();
            self.stop_requested = true;
        }
    }

    /// Takes every event that has arrived; returns whether anything changed.
    pub fn drain_events(&mut self) -> bool {
        let Some(generation) = &self.generation else { return false };
        let mut changed = false;
        let mut ended = false;
        while let Ok(event) = generation.events().try_recv() {
            changed = true;
            match event {
                Event::Started(_) => {}
                Event::Step(step) => {
                    for &(pos, confidence) in &step.committed {
                        if let Some(slot) = self.commits.get_mut(pos) {
                            *slot = Some((step.index, confidence));
                        }
                    }
                    self.steps.push(step);
                }
                Event::Done(f) => {
                    self.finished = Some(f);
                    ended = true;
                }
                Event::Failed(e) => {
                    self.failed = Some(e.to_string());
                    ended = true;
                }
            }
        }
        if ended {
            self.generation = None;
        }
        changed
    }

    /// The canvas after `step` (None: the latest).
    pub fn canvas_at(&self, step: Option<usize>) -> &[u32] {
        match step {
            Some(s) if s < self.steps.len() => &self.steps[s].canvas,
            _ => self.steps.last().map_or(&self.initial[..], |s| &s.canvas[..]),
        }
    }

    /// The step a position was committed in, if it was by `step` (None: the latest).
    pub fn committed_by(&self, pos: usize, step: Option<usize>) -> Option<(usize, f32)> {
        let c = self.commits.get(pos).copied().flatten()?;
        match step {
            Some(s) if c.0 > s => None,
            _ => Some(c),
        }
    }
}
