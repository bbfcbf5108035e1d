//! Loss models, drawn from the link's seeded RNG.
//!
//! * Bernoulli: each packet is lost independently with probability p.
//! * Gilbert-Elliott (E. N. Gilbert, "Capacity of a burst-noise channel", 1960; E. O. Elliott,
//!   1963): a good and a bad state; per packet the chain moves good->bad with p and bad->good with
//!   r, then the packet is lost with `loss_good` or `loss_bad`. Mean burst length in the bad state
//!   is 1/r packets and the stationary bad-state share is p/(p+r). netem's `gemodel` uses the same
//!   four numbers (p, r, 1-h, 1-k).

use crate::config::LossModel;
use rand::RngExt;
use rand::rngs::Xoshiro256PlusPlus;

/// The loss model with its state.
#[derive(Debug, Clone)]
pub(crate) struct LossState {
    model: LossModel,
    bad: bool,
}

impl LossState {
    pub(crate) fn new(model: LossModel) -> LossState {
        LossState { model, bad: false }
    }

    /// Decides the fate of the next packet.
    pub(crate) fn lose(&mut self, rng: &mut Xoshiro256PlusPlus) -> bool {
        match self.model {
            LossModel::None => false,
            LossModel::Random { p } => rng.random_bool(p.get()),
            LossModel::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => {
                let flip = if self.bad { r } else { p };
                if rng.random_bool(flip.get()) {
                    self.bad = !self.bad;
                }
                rng.random_bool(if self.bad {
                    loss_bad.get()
                } else {
                    loss_good.get()
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Probability;
    use rand::SeedableRng;

    fn pr(x: f64) -> Probability {
        Probability::new(x).unwrap()
    }

    #[test]
    fn bernoulli_rate_is_close_to_p() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let mut s = LossState::new(LossModel::Random { p: pr(0.01) });
        let lost = (0..200_000).filter(|_| s.lose(&mut rng)).count();
        // Expect 2000, sd ~44.5: allow 5 sd.
        assert!((1778..=2222).contains(&lost), "lost {lost}");
    }

    #[test]
    fn gilbert_elliott_losses_come_in_bursts() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        // p=1%, r=25%: bad share 1/26 = 3.85 %, mean burst 4 packets.
        let mut s = LossState::new(LossModel::GilbertElliott {
            p: pr(0.01),
            r: pr(0.25),
            loss_bad: pr(1.0),
            loss_good: pr(0.0),
        });
        let seq: Vec<bool> = (0..400_000).map(|_| s.lose(&mut rng)).collect();
        let lost = seq.iter().filter(|&&l| l).count() as f64 / seq.len() as f64;
        assert!((lost - 1.0 / 26.0).abs() < 0.004, "loss rate {lost}");
        let bursts = seq.windows(2).filter(|w| w[1] && !w[0]).count() as f64;
        let mean_burst = seq.iter().filter(|&&l| l).count() as f64 / bursts;
        assert!((mean_burst - 4.0).abs() < 0.3, "mean burst {mean_burst}");
    }
}
