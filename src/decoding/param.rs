//! The one description of the generation settings: each one's names (the CLI's flag, the app's
//! label, the field of result files), its help, its kind and range, and the families it
//! applies to. The CLI builds its flags from this table and the app its controls, so a setting
//! exists everywhere or nowhere, and its meaning is written once.

use super::{DreamAlg, GenerateParams, KvCacheMode, Remasking};
use crate::model::Family;

/// A generation setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Param {
    GenLength,
    Steps,
    BlockLength,
    Temperature,
    Seed,
    EarlyStop,
    Remasking,
    CfgScale,
    LogitsEosInf,
    ConfidenceEosEotInf,
    Alg,
    AlgTemp,
    Eps,
    TopP,
    TopK,
    Threshold,
    Cache,
}

/// What values a setting takes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// A whole number in `min..=max`.
    Count { min: usize, max: usize },
    /// A real number in `min..=max`; `step` is the app's drag speed.
    Real { min: f64, max: f64, step: f64 },
    /// On or off. The CLI's flag sets it to `flag_sets` (`--no-early-stop` sets false).
    Switch { flag_sets: bool },
    /// One of these names.
    Choice(&'static [&'static str]),
}

/// A setting's value, as the front ends read and write it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    Count(usize),
    Real(f64),
    Switch(bool),
    Choice(&'static str),
    /// An optional setting that is off (no top-p, no threshold).
    Off,
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Count(n) => write!(f, "{n}"),
            Value::Real(x) => write!(f, "{x}"),
            Value::Switch(b) => write!(f, "{b}"),
            Value::Choice(c) => write!(f, "{c}"),
            Value::Off => write!(f, "off"),
        }
    }
}

/// One row of the table.
#[derive(Debug, Clone, Copy)]
pub struct ParamSpec {
    pub param: Param,
    /// snake_case, as in `GenerateParams`, result files and JSON.
    pub name: &'static str,
    /// The CLI's long flag, without the dashes.
    pub flag: &'static str,
    /// The app's label.
    pub label: &'static str,
    pub help: &'static str,
    pub kind: Kind,
    /// Whether `Value::Off` is a value.
    pub optional: bool,
    pub families: &'static [Family],
}

const ALL: &[Family] = &[Family::Llada, Family::Dream, Family::Rnd1];
const BOTH: &[Family] = &[Family::Llada, Family::Dream];
const LLADA: &[Family] = &[Family::Llada];
const DREAM: &[Family] = &[Family::Dream];
const DREAM_RND1: &[Family] = &[Family::Dream, Family::Rnd1];

const REMASKING: &[&str] = &["low_confidence", "random"];
const ALGS: &[&str] = &["origin", "maskgit_plus", "topk_margin", "entropy", "confidence_threshold"];
const CACHES: &[&str] = &["none", "prefix", "dual"];

/// Every setting, in the order the front ends show them.
pub const PARAMS: &[ParamSpec] = &[
    ParamSpec {
        param: Param::GenLength,
        name: "gen_length",
        flag: "gen",
        label: "generated length",
        help: "Tokens to generate: mask cells appended to the prompt",
        kind: Kind::Count { min: 1, max: 8192 },
        optional: false,
        families: ALL,
    },
    ParamSpec {
        param: Param::Steps,
        name: "steps",
        flag: "steps",
        label: "steps",
        help: "Denoising steps in all (LLaDA: across the blocks). Fewer commit more tokens per step: faster, usually worse",
        kind: Kind::Count { min: 1, max: 8192 },
        optional: false,
        families: ALL,
    },
    ParamSpec {
        param: Param::BlockLength,
        name: "block_length",
        flag: "block",
        label: "block length",
        help: "The answer is filled in blocks of this many tokens, left to right; it must divide the generated length (Dream: only with a threshold)",
        kind: Kind::Count { min: 1, max: 8192 },
        optional: false,
        families: BOTH,
    },
    ParamSpec {
        param: Param::Temperature,
        name: "temperature",
        flag: "temperature",
        label: "temperature",
        help: "0 always picks the most likely token; higher values sample more freely",
        kind: Kind::Real { min: 0.0, max: 2.0, step: 0.01 },
        optional: false,
        families: ALL,
    },
    ParamSpec {
        param: Param::Remasking,
        name: "remasking",
        flag: "remasking",
        label: "remasking",
        help: "Which masked positions each step commits: the most confident (low_confidence) or random ones",
        kind: Kind::Choice(REMASKING),
        optional: false,
        families: LLADA,
    },
    ParamSpec {
        param: Param::Alg,
        name: "alg",
        flag: "alg",
        label: "algorithm",
        help: "How Dream rates the positions it commits: entropy, topk_margin, maskgit_plus (top probability), origin (at random), or confidence_threshold (Fast-dLLM's quota sampler, with a threshold)",
        kind: Kind::Choice(ALGS),
        optional: false,
        families: DREAM,
    },
    ParamSpec {
        param: Param::Seed,
        name: "seed",
        flag: "seed",
        label: "seed",
        help: "Seed of every random choice: the same seed and settings give the same answer",
        kind: Kind::Count { min: 0, max: usize::MAX },
        optional: false,
        families: ALL,
    },
    ParamSpec {
        param: Param::EarlyStop,
        name: "early_stop",
        flag: "no-early-stop",
        label: "early stop",
        help: "Stop as soon as the answer is complete and ends (the same text as running every step); the flag runs every step",
        kind: Kind::Switch { flag_sets: false },
        optional: false,
        families: ALL,
    },
    ParamSpec {
        param: Param::Threshold,
        name: "threshold",
        flag: "threshold",
        label: "threshold",
        help: "Fast-dLLM threshold decoding: commit every masked position of the block whose probability reaches this, at least one per step (fewer steps; exact without a cache)",
        kind: Kind::Real { min: 0.01, max: 1.0, step: 0.01 },
        optional: true,
        families: BOTH,
    },
    ParamSpec {
        param: Param::Cache,
        name: "cache",
        flag: "cache",
        label: "K/V cache",
        help: "Fast-dLLM K/V cache: none (exact), prefix or dual (faster, approximate: cached keys and values ignore tokens committed since the block began)",
        kind: Kind::Choice(CACHES),
        optional: false,
        families: BOTH,
    },
    ParamSpec {
        param: Param::CfgScale,
        name: "cfg_scale",
        flag: "cfg",
        label: "guidance (cfg)",
        help: "Classifier-free guidance scale; 0 is off (each step then runs a second pass without the prompt)",
        kind: Kind::Real { min: 0.0, max: 10.0, step: 0.05 },
        optional: false,
        families: LLADA,
    },
    ParamSpec {
        param: Param::LogitsEosInf,
        name: "logits_eos_inf",
        flag: "logits-eos-inf",
        label: "never predict end of text",
        help: "The official logits_eos_inf option: end-of-sequence is never predicted",
        kind: Kind::Switch { flag_sets: true },
        optional: false,
        families: LLADA,
    },
    ParamSpec {
        param: Param::ConfidenceEosEotInf,
        name: "confidence_eos_eot_inf",
        flag: "confidence-eos-eot-inf",
        label: "no confidence for end tokens",
        help: "The official confidence_eos_eot_inf option: positions predicting end-of-text or end-of-turn are committed last",
        kind: Kind::Switch { flag_sets: true },
        optional: false,
        families: LLADA,
    },
    ParamSpec {
        param: Param::AlgTemp,
        name: "alg_temp",
        flag: "alg-temp",
        label: "algorithm temperature",
        help: "Temperature of the choice of positions; 0 takes the most confident",
        kind: Kind::Real { min: 0.0, max: 2.0, step: 0.01 },
        optional: false,
        families: DREAM,
    },
    ParamSpec {
        param: Param::TopP,
        name: "top_p",
        flag: "top-p",
        label: "top-p",
        help: "Nucleus sampling: keep the most likely tokens whose probabilities sum to this",
        kind: Kind::Real { min: 0.01, max: 1.0, step: 0.01 },
        optional: true,
        families: DREAM_RND1,
    },
    ParamSpec {
        param: Param::TopK,
        name: "top_k",
        flag: "top-k",
        label: "top-k",
        help: "Keep only the k most likely tokens",
        kind: Kind::Count { min: 1, max: 1_000_000 },
        optional: true,
        families: DREAM_RND1,
    },
    ParamSpec {
        param: Param::Eps,
        name: "eps",
        flag: "eps",
        label: "eps",
        help: "End of the timestep schedule, linspace(1, eps, steps + 1)",
        kind: Kind::Real { min: 1e-6, max: 0.999, step: 0.0001 },
        optional: false,
        families: DREAM,
    },
];

impl Param {
    pub fn spec(self) -> &'static ParamSpec {
        PARAMS.iter().find(|s| s.param == self).expect("every setting has a row")
    }

    /// Whether the setting means anything for `family`.
    pub fn applies_to(self, family: Family) -> bool {
        self.spec().families.contains(&family)
    }
}

impl std::fmt::Display for Param {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.spec().name)
    }
}

/// A setting that could not be set, and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{param}: {reason}")]
pub struct ParamError {
    pub param: Param,
    pub reason: String,
}

impl ParamError {
    pub fn new(param: Param, reason: impl Into<String>) -> ParamError {
        ParamError { param, reason: reason.into() }
    }
}

fn choice<T: Copy + PartialEq>(names: &'static [&'static str], values: &[T], v: T) -> &'static str {
    names[values.iter().position(|&x| x == v).expect("every value has a name")]
}

const REMASKINGS: [Remasking; 2] = [Remasking::LowConfidence, Remasking::Random];
const DREAM_ALGS: [DreamAlg; 5] =
    [DreamAlg::Origin, DreamAlg::MaskgitPlus, DreamAlg::TopkMargin, DreamAlg::Entropy, DreamAlg::ConfidenceThreshold];
const CACHE_MODES: [KvCacheMode; 3] = [KvCacheMode::None, KvCacheMode::Prefix, KvCacheMode::Dual];

impl GenerateParams {
    /// The value of one setting.
    pub fn get(&self, param: Param) -> Value {
        // The f64 of the f32's shortest decimal (0.2, not 0.2000000029...): what people wrote,
        // and it converts back to the same f32.
        let real = |x: f32| Value::Real(x.to_string().parse().unwrap_or(f64::from(x)));
        match param {
            Param::GenLength => Value::Count(self.gen_length),
            Param::Steps => Value::Count(self.steps),
            Param::BlockLength => Value::Count(self.block_length),
            Param::Temperature => real(self.temperature),
            Param::Seed => Value::Count(self.seed as usize),
            Param::EarlyStop => Value::Switch(self.early_stop),
            Param::Remasking => Value::Choice(choice(REMASKING, &REMASKINGS, self.remasking)),
            Param::CfgScale => real(self.cfg_scale),
            Param::LogitsEosInf => Value::Switch(self.logits_eos_inf),
            Param::ConfidenceEosEotInf => Value::Switch(self.confidence_eos_eot_inf),
            Param::Alg => Value::Choice(choice(ALGS, &DREAM_ALGS, self.alg)),
            Param::AlgTemp => real(self.alg_temp),
            Param::Eps => real(self.eps),
            Param::TopP => self.top_p.map_or(Value::Off, real),
            Param::TopK => self.top_k.map_or(Value::Off, Value::Count),
            Param::Threshold => self.threshold.map_or(Value::Off, Value::Real),
            Param::Cache => Value::Choice(choice(CACHES, &CACHE_MODES, self.cache)),
        }
    }

    /// Sets one setting; the value must be of the setting's kind and in its range.
    pub fn set(&mut self, param: Param, value: Value) -> Result<(), ParamError> {
        let spec = param.spec();
        let wrong = || ParamError::new(param, format!("{value} is not a value of this setting"));
        match (spec.kind, value) {
            (_, Value::Off) if spec.optional => {}
            (Kind::Count { min, max }, Value::Count(n)) if !(min..=max).contains(&n) => {
                return Err(ParamError::new(param, format!("{n} is outside {min}..={max}")));
            }
            (Kind::Real { min, max, .. }, Value::Real(x)) if !(x >= min && x <= max) => {
                return Err(ParamError::new(param, format!("{x} is outside {min}..={max}")));
            }
            (Kind::Count { .. }, Value::Count(_))
            | (Kind::Real { .. }, Value::Real(_))
            | (Kind::Switch { .. }, Value::Switch(_)) => {}
            (Kind::Choice(names), Value::Choice(c)) if names.contains(&c) => {}
            _ => return Err(wrong()),
        }
        let count = |v: Value| if let Value::Count(n) = v { Some(n) } else { None };
        let real = |v: Value| if let Value::Real(x) = v { Some(x) } else { None };
        let switch = matches!(value, Value::Switch(true));
        let pick = |names: &'static [&'static str]| names.iter().position(|&n| Value::Choice(n) == value);
        match param {
            Param::GenLength => self.gen_length = count(value).ok_or_else(wrong)?,
            Param::Steps => self.steps = count(value).ok_or_else(wrong)?,
            Param::BlockLength => self.block_length = count(value).ok_or_else(wrong)?,
            Param::Temperature => self.temperature = real(value).ok_or_else(wrong)? as f32,
            Param::Seed => self.seed = count(value).ok_or_else(wrong)? as u64,
            Param::EarlyStop => self.early_stop = switch,
            Param::Remasking => self.remasking = REMASKINGS[pick(REMASKING).ok_or_else(wrong)?],
            Param::CfgScale => self.cfg_scale = real(value).ok_or_else(wrong)? as f32,
            Param::LogitsEosInf => self.logits_eos_inf = switch,
            Param::ConfidenceEosEotInf => self.confidence_eos_eot_inf = switch,
            Param::Alg => self.alg = DREAM_ALGS[pick(ALGS).ok_or_else(wrong)?],
            Param::AlgTemp => self.alg_temp = real(value).ok_or_else(wrong)? as f32,
            Param::Eps => self.eps = real(value).ok_or_else(wrong)? as f32,
            Param::TopP => self.top_p = real(value).map(|x| x as f32),
            Param::TopK => self.top_k = count(value),
            Param::Threshold => self.threshold = real(value),
            Param::Cache => self.cache = CACHE_MODES[pick(CACHES).ok_or_else(wrong)?],
        }
        Ok(())
    }

    /// Sets one setting from its text (a CLI flag's or a request field's value; empty for a
    /// switch's flag, which sets the flag's value).
    pub fn set_text(&mut self, param: Param, text: &str) -> Result<(), ParamError> {
        let spec = param.spec();
        let value = match spec.kind {
            _ if spec.optional && matches!(text, "off" | "none") => Value::Off,
            Kind::Count { .. } => Value::Count(
                text.trim().parse().map_err(|_| ParamError::new(param, format!("'{text}' is not a whole number")))?,
            ),
            Kind::Real { .. } => Value::Real(
                text.trim().parse().map_err(|_| ParamError::new(param, format!("'{text}' is not a number")))?,
            ),
            Kind::Switch { flag_sets } => match text {
                "" => Value::Switch(flag_sets),
                "true" | "on" => Value::Switch(true),
                "false" | "off" => Value::Switch(false),
                _ => return Err(ParamError::new(param, format!("'{text}' is not true or false"))),
            },
            Kind::Choice(names) => match names.iter().find(|&&n| n == text) {
                Some(&n) => Value::Choice(n),
                None => {
                    return Err(ParamError::new(
                        param,
                        format!("unknown value '{text}' (choose {})", names.join(", ")),
                    ));
                }
            },
        };
        self.set(param, value)
    }

    /// `self` with `given` settings applied for a model of `family`, the way every front end
    /// applies a user's choices: each must apply to the family; a generated length given
    /// without a block length also sets Dream's block length (its official sampler treats the
    /// whole answer as one block); Dream's block length means something only with a threshold.
    pub fn with_given(&self, family: Family, given: &[(Param, String)]) -> Result<GenerateParams, ParamError> {
        let mut p = self.clone();
        for (param, text) in given {
            if !param.applies_to(family) {
                let others: Vec<&str> = param.spec().families.iter().map(|f| f.title()).collect();
                return Err(ParamError::new(
                    *param,
                    format!("applies to {} models; this is a {} model", others.join(" and "), family.title()),
                ));
            }
            p.set_text(*param, text)?;
        }
        let has = |q: Param| given.iter().any(|(p, _)| *p == q);
        if family == Family::Dream {
            if has(Param::GenLength) && !has(Param::BlockLength) {
                p.block_length = p.gen_length;
            }
            if has(Param::BlockLength) && p.threshold.is_none() {
                return Err(ParamError::new(
                    Param::BlockLength,
                    "applies to Dream only with a threshold (the block sampler)",
                ));
            }
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_setting_has_one_row_and_unique_names() {
        let all = [
            Param::GenLength,
            Param::Steps,
            Param::BlockLength,
            Param::Temperature,
            Param::Seed,
            Param::EarlyStop,
            Param::Remasking,
            Param::CfgScale,
            Param::LogitsEosInf,
            Param::ConfidenceEosEotInf,
            Param::Alg,
            Param::AlgTemp,
            Param::Eps,
            Param::TopP,
            Param::TopK,
            Param::Threshold,
            Param::Cache,
        ];
        assert_eq!(PARAMS.len(), all.len());
        for p in all {
            assert_eq!(PARAMS.iter().filter(|s| s.param == p).count(), 1, "{p:?}");
        }
        for field in [|s: &ParamSpec| s.name, |s: &ParamSpec| s.flag, |s: &ParamSpec| s.label] {
            let mut names: Vec<&str> = PARAMS.iter().map(field).collect();
            names.sort();
            names.dedup();
            assert_eq!(names.len(), PARAMS.len());
        }
    }

    #[test]
    fn every_value_read_sets_back_to_the_same_settings() {
        for family in [Family::Llada, Family::Dream] {
            let p = GenerateParams::defaults_for(family);
            for spec in PARAMS {
                let mut q = p.clone();
                q.set(spec.param, p.get(spec.param)).unwrap();
                assert_eq!(q, p, "{}", spec.name);
                let text = p.get(spec.param).to_string();
                let mut q = p.clone();
                if !matches!(spec.kind, Kind::Switch { .. }) {
                    q.set_text(spec.param, &text).unwrap();
                    assert_eq!(q, p, "{} from '{text}'", spec.name);
                }
            }
        }
    }

    #[test]
    fn out_of_range_and_wrong_kinds_name_the_setting() {
        let mut p = GenerateParams::default();
        let e = p.set_text(Param::Steps, "0").unwrap_err();
        assert_eq!(e.param, Param::Steps);
        assert!(e.to_string().starts_with("steps: 0 is outside"), "{e}");
        assert!(p.set_text(Param::TopP, "1.5").is_err());
        assert!(p.set_text(Param::Cache, "full").unwrap_err().reason.contains("none, prefix, dual"));
        assert!(p.set(Param::Temperature, Value::Count(1)).is_err());
        assert!(p.set(Param::Steps, Value::Off).is_err(), "steps is not optional");
        let e = p.with_given(Family::Llada, &[(Param::Alg, "entropy".into())]).unwrap_err();
        assert_eq!(e.to_string(), "alg: applies to Dream models; this is a LLaDA model");
    }
}
