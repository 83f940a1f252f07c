//! A request's settings turned into the engine's `GenerateParams`.
//!
//! Clients ask for an answer length (`max_tokens`) and rarely for steps or blocks, while the
//! official samplers want blocks that divide the answer and steps that are a multiple of the
//! blocks. So when a request gives a length without blocks or steps, they follow from it as
//! the model's defaults would scale: blocks as long as the default block or the longest divisor
//! of the length below it, and the defaults' steps per token. A setting that does not apply to
//! the model's family is an error, except `top_p` for a family whose sampler has none, which is
//! ignored (clients send it by default).

use crate::decoding::{GenerateParams, Param};
use crate::model::Family;

use super::api::ApiError;

/// The params for `given` settings on a model of `family` whose defaults are `defaults`.
pub fn params_for(
    family: Family,
    defaults: &GenerateParams,
    given: &[(Param, String)],
) -> Result<GenerateParams, ApiError> {
    let given: Vec<(Param, String)> =
        given.iter().filter(|(p, _)| *p != Param::TopP || p.applies_to(family)).cloned().collect();
    let mut params =
        defaults.with_given(family, &given).map_err(|e| ApiError::invalid(e.to_string(), Some(e.param.spec().name)))?;
    let has = |q: Param| given.iter().any(|(p, _)| *p == q);
    if has(Param::GenLength) {
        let n = params.gen_length.max(1);
        if family == Family::Llada && !has(Param::BlockLength) {
            params.block_length = (1..=defaults.block_length.min(n)).rev().find(|b| n % b == 0).unwrap_or(1);
        }
        if !has(Param::Steps) {
            let per_token = defaults.steps as f64 / defaults.gen_length.max(1) as f64;
            let blocks = if family == Family::Llada { n / params.block_length } else { 1 };
            let steps = ((n as f64 * per_token).round() as usize).max(1);
            params.steps = steps.div_ceil(blocks) * blocks;
        }
    }
    Ok(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_length_brings_blocks_and_steps_that_fit() {
        let d = GenerateParams::defaults_for(Family::Llada);
        let p = params_for(Family::Llada, &d, &[(Param::GenLength, "100".into())]).unwrap();
        assert_eq!((p.gen_length, p.block_length, p.steps), (100, 25, 100));
        assert!(p.plan(Family::Llada, 10, 4096).is_ok());
        let p = params_for(Family::Llada, &d, &[(Param::GenLength, "7".into())]).unwrap();
        assert_eq!((p.gen_length, p.block_length, p.steps), (7, 7, 7));
        let given = [(Param::GenLength, "64".into()), (Param::Steps, "16".into())];
        let p = params_for(Family::Llada, &d, &given).unwrap();
        assert_eq!((p.block_length, p.steps), (32, 16));
        let d = GenerateParams::defaults_for(Family::Dream);
        let p = params_for(Family::Dream, &d, &[(Param::GenLength, "50".into()), (Param::TopP, "1".into())]).unwrap();
        assert_eq!((p.gen_length, p.block_length, p.steps, p.top_p), (50, 50, 50, Some(1.0)));
    }

    #[test]
    fn top_p_is_ignored_where_the_sampler_has_none_and_other_misfits_are_errors() {
        let d = GenerateParams::defaults_for(Family::Llada);
        assert!(params_for(Family::Llada, &d, &[(Param::TopP, "0.9".into())]).is_ok());
        let err = params_for(Family::Llada, &d, &[(Param::Alg, "entropy".into())]).unwrap_err();
        assert_eq!((err.status, err.param.as_deref()), (400, Some("alg")));
    }
}
