//! The generation settings as command-line flags, built from the engine's description of them
//! (`decoding::PARAMS`): one flag per setting, its help and its family defaults from the same
//! row, so a setting the engine has is a flag here and a flag here is a setting there.

use clap::{Arg, ArgAction, ArgMatches, Command, FromArgMatches};
use dllm::decoding::{GenerateParams, Kind, PARAMS, Param};
use dllm::model::Family;

/// The defaults a command's help states (and, but for the demo model, runs with).
pub trait Defaults {
    fn for_family(family: Family) -> GenerateParams;
}

/// The model family's official settings (`dllm run`).
pub struct Official;

impl Defaults for Official {
    fn for_family(family: Family) -> GenerateParams {
        GenerateParams::defaults_for(family)
    }
}

/// The settings given on the command line, as (setting, text) in the table's order; an empty
/// text for a switch's flag. `D` gives the defaults the help states.
pub struct ParamArgs<D> {
    pub given: Vec<(Param, String)>,
    defaults: std::marker::PhantomData<D>,
}

impl<D> ParamArgs<D> {
    /// `defaults` with the given settings applied for a model of `family`.
    pub fn apply(&self, family: Family, defaults: &GenerateParams) -> anyhow::Result<GenerateParams> {
        defaults.with_given(family, &self.given).map_err(|e| {
            let spec = e.param.spec();
            anyhow::anyhow!("--{}: {}", spec.flag, e.reason)
        })
    }
}

/// "[default: LLaDA 128, Dream 512]", from the engine's official defaults.
fn defaults_text<D: Defaults>(param: Param) -> String {
    let of = |family: Family| D::for_family(family).get(param).to_string();
    let families = param.spec().families;
    let values: Vec<String> = families.iter().map(|&f| of(f)).collect();
    if values.windows(2).all(|w| w[0] == w[1]) {
        format!("[default: {}]", values[0])
    } else {
        let named: Vec<String> = families.iter().zip(&values).map(|(f, v)| format!("{} {v}", f.title())).collect();
        format!("[default: {}]", named.join(", "))
    }
}

impl<D: Defaults> clap::Args for ParamArgs<D> {
    fn augment_args(mut cmd: Command) -> Command {
        for spec in PARAMS {
            let only = match spec.families {
                [one] => format!("{}: ", one.title()),
                _ => String::new(),
            };
            let mut arg = Arg::new(spec.name).long(spec.flag);
            arg = match spec.kind {
                Kind::Switch { .. } => arg.action(ArgAction::SetTrue).help(format!("{only}{}", spec.help)),
                // A choice's help names its values.
                Kind::Choice(_) => {
                    arg.value_name(spec.name).help(format!("{only}{} {}", spec.help, defaults_text::<D>(spec.param)))
                }
                _ => arg.value_name(spec.name).allow_hyphen_values(true).help(format!(
                    "{only}{} {}",
                    spec.help,
                    defaults_text::<D>(spec.param)
                )),
            };
            cmd = cmd.arg(arg);
        }
        cmd
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        Self::augment_args(cmd)
    }
}

impl<D> FromArgMatches for ParamArgs<D> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let mut args = ParamArgs { given: Vec::new(), defaults: std::marker::PhantomData };
        args.update_from_arg_matches(m)?;
        Ok(args)
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        self.given.clear();
        for spec in PARAMS {
            match spec.kind {
                Kind::Switch { .. } if m.get_flag(spec.name) => self.given.push((spec.param, String::new())),
                Kind::Switch { .. } => {}
                _ => {
                    if let Some(text) = m.get_one::<String>(spec.name) {
                        self.given.push((spec.param, text.clone()));
                    }
                }
            }
        }
        Ok(())
    }
}
