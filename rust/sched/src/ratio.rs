//! `new_token_ratio`: the fraction of a request's `max_new_tokens` that admission reserves for
//! its output. Starting optimistic and decaying while decoding runs without running out of KV
//! slots lets more requests in; a retraction (the pool ran dry) raises it again.

use crate::error::SchedError;

/// Bounds and speed of the ratio. The defaults follow the usual serving settings: start at
/// 0.7, never go below 14% of that, and reach the floor after 600 clean decode steps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RatioConfig {
    pub init: f64,
    pub min: f64,
    pub decay_steps: u32,
}

impl Default for RatioConfig {
    fn default() -> Self {
        Self { init: 0.7, min: 0.098, decay_steps: 600 }
    }
}

impl RatioConfig {
    pub fn validate(&self) -> Result<(), SchedError> {
        let in_unit = |x: f64| x.is_finite() && (0.0..=1.0).contains(&x);
        if !in_unit(self.init) || !in_unit(self.min) || self.min > self.init {
            return Err(SchedError::Config(format!(
                "new_token_ratio needs 0 <= min ({}) <= init ({}) <= 1",
                self.min, self.init
            )));
        }
        if self.decay_steps == 0 {
            return Err(SchedError::Config("new_token_ratio decay_steps must be >= 1".into()));
        }
        Ok(())
    }
}

/// The live ratio, always within `[config.min, 1]`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewTokenRatio {
    config: RatioConfig,
    value: f64,
}

impl NewTokenRatio {
    pub fn new(config: RatioConfig) -> Self {
        Self { config, value: config.init }
    }

    pub fn value(&self) -> f64 {
        self.value
    }

    pub fn config(&self) -> RatioConfig {
        self.config
    }

    /// Sets the ratio, clamped into `[min, 1]` (NaN leaves it unchanged).
    pub fn set(&mut self, value: f64) {
        if !value.is_nan() {
            self.value = value.clamp(self.config.min, 1.0);
        }
    }

    /// One decode step went by without running out of slots: admit a little more boldly.
    pub fn decay(&mut self) -> f64 {
        let per_step = (self.config.init - self.config.min) / f64::from(self.config.decay_steps);
        self.value = (self.value - per_step).max(self.config.min);
        self.value
    }

    /// Back to the initial value (the engine went idle).
    pub fn reset(&mut self) {
        self.value = self.config.init;
    }

    /// A retraction happened. `num_decoded_tokens` and `num_max_new_tokens` are sums over the
    /// requests still running after it; `num_running` is their count. The ratio becomes the
    /// fraction of their output budget they are expected to use over the next
    /// `retract_decode_steps` steps, if that is higher than now.
    pub fn on_retract(
        &mut self,
        num_decoded_tokens: usize,
        num_max_new_tokens: usize,
        num_running: usize,
        retract_decode_steps: usize,
    ) -> f64 {
        let expected = num_decoded_tokens as f64 + (retract_decode_steps * num_running) as f64;
        let observed = (expected / (num_max_new_tokens as f64 + 1.0)).min(1.0);
        self.value = self.value.max(observed).clamp(self.config.min, 1.0);
        self.value
    }

    /// Output slots to set aside for a request that may still generate `num_tokens_left`
    /// tokens: `ceil(min(num_tokens_left, clip) * ratio)`.
    pub fn reserve(&self, num_tokens_left: usize, clip: usize) -> usize {
        let estimate = num_tokens_left.min(clip) as f64 * self.value;
        // NOTE: 10 * 0.7 is 7.000000000000001 in binary; do not let that cost a slot.
        (estimate - 1e-9).ceil().max(0.0) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decays_to_the_floor_and_resets() {
        let mut ratio = NewTokenRatio::new(RatioConfig { init: 0.5, min: 0.1, decay_steps: 4 });
        ratio.decay();
        assert!((ratio.value() - 0.4).abs() < 1e-12);
        for _ in 0..10 {
            ratio.decay();
        }
        assert_eq!(ratio.value(), 0.1);
        ratio.reset();
        assert_eq!(ratio.value(), 0.5);
    }

    #[test]
    fn retraction_only_raises() {
        let mut ratio = NewTokenRatio::new(RatioConfig::default());
        ratio.set(0.2);
        // 100 decoded + 20 * 2 expected over 199 + 1 budget = 0.7.
        assert!((ratio.on_retract(100, 199, 2, 20) - 0.7).abs() < 1e-12);
        ratio.on_retract(0, 1000, 1, 20);
        assert!((ratio.value() - 0.7).abs() < 1e-12);
        assert_eq!(ratio.on_retract(5000, 10, 3, 20), 1.0);
    }

    #[test]
    fn reserve_is_integral_and_clipped() {
        let mut ratio = NewTokenRatio::new(RatioConfig::default());
        assert_eq!(ratio.reserve(10, 4096), 7);
        assert_eq!(ratio.reserve(100_000, 4096), 2868); // ceil(4096 * 0.7) = 2867.2 -> 2868
        ratio.set(1.0);
        assert_eq!(ratio.reserve(3, 2), 2);
        assert_eq!(ratio.reserve(0, 2), 0);
    }

    #[test]
    fn bad_configs_are_rejected() {
        let bad = [(0.5, 0.6, 10), (1.5, 0.1, 10), (0.5, 0.1, 0), (f64::NAN, 0.1, 1)];
        for (init, min, decay_steps) in bad {
            let config = RatioConfig { init, min, decay_steps };
            assert!(config.validate().is_err(), "{config:?}");
        }
    }
}
