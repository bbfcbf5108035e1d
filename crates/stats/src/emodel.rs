//! Voice quality (MOS) from the ITU-T G.107 E-model, for the `voip` test.
//!
//! We use the widely used simplified form of the E-model (Cole & Rosenbluth, "Voice over
//! IP performance monitoring", ACM SIGCOMM CCR 31(2), 2001), which keeps G.107's
//! structure and default values and reduces the delay impairment to a fit:
//!
//! ```text
//! R     = 93.2 − Id − Ie,eff                       (93.2 = G.107's R with all defaults)
//! Id    = 0.024·d + 0.11·(d − 177.3)·H(d − 177.3)  (d = mouth-to-ear delay, ms; H = step)
//! Ie,eff = Ie + (95 − Ie) · Ppl / (Ppl / BurstR + Bpl)   (G.107 §7.5; Ppl in %)
//! ```
//!
//! Codec values are from ITU-T G.113 Appendix I: G.711 `Ie = 0`, `Bpl = 4.3` without
//! packet-loss concealment (random loss, `BurstR = 1`), `Bpl = 25.1` with PLC.
//!
//! R is converted to MOS with G.107 Annex B:
//!
//! ```text
//! R ≤ 0:        MOS = 1
//! 0 < R < 100:  MOS = max(1, 1 + 0.035·R + R·(R − 60)·(100 − R)·7·10⁻⁶)
//! R ≥ 100:      MOS = 4.5
//! ```
//!
//! # From probes to (d, Ppl): the jitter buffer
//!
//! A receiver plays packets out at a fixed delay `P = mean one-way delay + B`, where
//! `B` is the jitter-buffer depth. A packet whose one-way delay exceeds `P` arrives too
//! late to be played and counts as lost, so
//! `Ppl = (lost in network + arrived after P) / sent`, and `d = P + extra` (codec and
//! packetisation delay, zero by default). With [`JitterBuffer::TwiceMeanIpdv`],
//! `B = 2 × mean |IPDV|`, which makes `P` exactly flent's VoIP delay
//! (mean OWD + 2·mean IPDV, as in flent's `voip` tests).

use std::time::Duration;

use crate::latency::{ProbeSample, mean_abs_ipdv};
use crate::quantile::mean;

/// A codec's E-model parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Codec {
    /// Name for reports.
    pub name: &'static str,
    /// Equipment impairment factor `Ie` at zero loss.
    pub ie: f64,
    /// Packet-loss robustness factor `Bpl`.
    pub bpl: f64,
}

/// G.711 without packet-loss concealment (G.113 Appendix I): `Ie = 0`, `Bpl = 4.3`.
pub const G711: Codec = Codec {
    name: "G.711",
    ie: 0.0,
    bpl: 4.3,
};

/// G.711 with packet-loss concealment (G.113 Appendix I): `Ie = 0`, `Bpl = 25.1`.
pub const G711_PLC: Codec = Codec {
    name: "G.711 with PLC",
    ie: 0.0,
    bpl: 25.1,
};

/// The simplified E-model's `Ro − Is` with G.107 default parameters.
pub const R_DEFAULT: f64 = 93.2;

/// Delay impairment `Id` for a mouth-to-ear delay.
pub fn delay_impairment(mouth_to_ear: Duration) -> f64 {
    let d = mouth_to_ear.as_secs_f64() * 1e3;
    let knee = 177.3;
    0.024 * d + if d > knee { 0.11 * (d - knee) } else { 0.0 }
}

/// Effective equipment impairment `Ie,eff` for a packet-loss fraction in `[0, 1]`
/// (clamped; NaN treated as 0) with random loss (`BurstR = 1`).
pub fn effective_equipment_impairment(codec: &Codec, loss_fraction: f64) -> f64 {
    let ppl = if loss_fraction.is_nan() {
        0.0
    } else {
        loss_fraction.clamp(0.0, 1.0) * 100.0
    };
    let burst_r = 1.0;
    codec.ie + (95.0 - codec.ie) * ppl / (ppl / burst_r + codec.bpl)
}

/// The transmission rating factor R.
pub fn r_factor(mouth_to_ear: Duration, loss_fraction: f64, codec: &Codec) -> f64 {
    R_DEFAULT
        - delay_impairment(mouth_to_ear)
        - effective_equipment_impairment(codec, loss_fraction)
}

/// G.107 Annex B: R to estimated mean opinion score (1..=4.5). NaN gives 1.
///
/// The Annex B cubic dips just below 1 for `0 < R < 6.5` (to 0.98 near R = 3.2); we
/// clamp at 1, the floor of the MOS scale, which also keeps MOS non-decreasing in R.
pub fn mos_from_r(r: f64) -> f64 {
    if r.is_nan() || r <= 0.0 {
        1.0
    } else if r >= 100.0 {
        4.5
    } else {
        (1.0 + 0.035 * r + r * (r - 60.0) * (100.0 - r) * 7e-6).max(1.0)
    }
}

/// How the receiver's jitter buffer is sized.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JitterBuffer {
    /// A fixed depth.
    Fixed(Duration),
    /// Twice the mean absolute IPDV of the stream (flent's VoIP delay).
    TwiceMeanIpdv,
}

/// Settings for [`assess_voip`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VoipConfig {
    /// Jitter-buffer sizing.
    pub jitter_buffer: JitterBuffer,
    /// Codec parameters.
    pub codec: Codec,
    /// Delay added to the playout delay for codec/packetisation (default zero).
    pub extra_delay: Duration,
}

impl Default for VoipConfig {
    fn default() -> Self {
        VoipConfig {
            jitter_buffer: JitterBuffer::TwiceMeanIpdv,
            codec: G711,
            extra_delay: Duration::ZERO,
        }
    }
}

/// The E-model's view of a one-way VoIP stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VoipAssessment {
    /// Mean one-way delay of the received packets.
    pub mean_delay: Duration,
    /// Jitter-buffer depth used.
    pub jitter_buffer: Duration,
    /// Mouth-to-ear delay `d` fed to the model.
    pub mouth_to_ear: Duration,
    /// Packets sent.
    pub sent: u64,
    /// Lost in the network.
    pub network_lost: u64,
    /// Arrived after their playout time.
    pub late_discarded: u64,
    /// `(network_lost + late_discarded) / sent`.
    pub effective_loss: f64,
    /// R factor.
    pub r: f64,
    /// Estimated MOS.
    pub mos: f64,
}

/// Assesses one-way samples (in send order). `None` if nothing arrived.
pub fn assess_voip(
    samples_in_send_order: &[ProbeSample],
    cfg: &VoipConfig,
) -> Option<VoipAssessment> {
    let delays: Vec<Duration> = samples_in_send_order
        .iter()
        .filter_map(ProbeSample::delay)
        .collect();
    let mean_delay = mean(&delays)?;
    let jitter_buffer = match cfg.jitter_buffer {
        JitterBuffer::Fixed(b) => b,
        JitterBuffer::TwiceMeanIpdv => mean_abs_ipdv(samples_in_send_order).unwrap_or_default() * 2,
    };
    let playout = mean_delay.saturating_add(jitter_buffer);
    let sent = samples_in_send_order.len() as u64;
    let network_lost = sent - delays.len() as u64;
    let late_discarded = delays.iter().filter(|&&d| d > playout).count() as u64;
    let effective_loss = (network_lost + late_discarded) as f64 / sent as f64;
    let mouth_to_ear = playout.saturating_add(cfg.extra_delay);
    let r = r_factor(mouth_to_ear, effective_loss, &cfg.codec);
    Some(VoipAssessment {
        mean_delay,
        jitter_buffer,
        mouth_to_ear,
        sent,
        network_lost,
        late_discarded,
        effective_loss,
        r,
        mos: mos_from_r(r),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn r_to_mos_reference_points() {
        // G.107 Annex B curve at published points.
        for (r, mos) in [
            (93.2, 4.41),
            (90.0, 4.34),
            (80.0, 4.02),
            (70.0, 3.60),
            (60.0, 3.10),
            (50.0, 2.58),
        ] {
            // Published values are rounded to 2 decimals (2.575 prints as 2.58).
            assert!(
                close(mos_from_r(r), mos, 0.0051),
                "R={r}: {}",
                mos_from_r(r)
            );
        }
        assert_eq!(mos_from_r(0.0), 1.0);
        assert_eq!(mos_from_r(-5.0), 1.0);
        assert_eq!(mos_from_r(100.0), 4.5);
        assert_eq!(mos_from_r(f64::NAN), 1.0);
        // The raw cubic gives 0.989 at R = 3; the scale's floor is 1.
        assert_eq!(mos_from_r(3.0), 1.0);
        assert!(mos_from_r(7.0) > 1.0);
        // Exact algebra at R = 60: 1 + 2.1 + 0.
        assert!(close(mos_from_r(60.0), 3.1, 1e-12));
    }

    #[test]
    fn r_factor_hand_computed() {
        // No delay, no loss: the default 93.2.
        assert!(close(r_factor(Duration::ZERO, 0.0, &G711), 93.2, 1e-12));
        // 150 ms, no loss: Id = 3.6 -> 89.6.
        assert!(close(r_factor(ms(150), 0.0, &G711), 89.6, 1e-9));
        // 300 ms: Id = 7.2 + 0.11*122.7 = 20.697 -> 72.503.
        assert!(close(r_factor(ms(300), 0.0, &G711), 72.503, 1e-9));
        // 1 % loss, G.711 without PLC: Ie,eff = 95*1/(1+4.3) = 17.9245 -> 75.2755.
        assert!(close(
            r_factor(Duration::ZERO, 0.01, &G711),
            93.2 - 95.0 / 5.3,
            1e-9
        ));
        // Same with PLC: 95/26.1 = 3.6398 -> 89.5602.
        assert!(close(
            r_factor(Duration::ZERO, 0.01, &G711_PLC),
            93.2 - 95.0 / 26.1,
            1e-9
        ));
        // Total loss approaches Ie,eff = 95*100/104.3.
        assert!(close(
            effective_equipment_impairment(&G711, 1.0),
            9500.0 / 104.3,
            1e-9
        ));
        assert_eq!(effective_equipment_impairment(&G711, f64::NAN), 0.0);
    }

    #[test]
    fn jitter_buffer_discards_late_packets() {
        // Delays 20,20,20,60 ms with a fixed 10 ms buffer: mean 30, playout 40,
        // the 60 ms packet is late; one more packet lost in the network.
        let mut v: Vec<ProbeSample> = [20, 20, 20, 60]
            .iter()
            .enumerate()
            .map(|(i, &d)| ProbeSample::received(ms(20 * i as u64), ms(d)))
            .collect();
        v.push(ProbeSample::lost(ms(100)));
        let cfg = VoipConfig {
            jitter_buffer: JitterBuffer::Fixed(ms(10)),
            ..VoipConfig::default()
        };
        let a = assess_voip(&v, &cfg).unwrap();
        assert_eq!((a.mean_delay, a.mouth_to_ear), (ms(30), ms(40)));
        assert_eq!((a.sent, a.network_lost, a.late_discarded), (5, 1, 1));
        assert!(close(a.effective_loss, 0.4, 1e-12));
        let want_r = 93.2 - 0.024 * 40.0 - 95.0 * 40.0 / (40.0 + 4.3);
        assert!(close(a.r, want_r, 1e-9));
        assert!(close(a.mos, mos_from_r(want_r), 1e-12));
    }

    #[test]
    fn flent_style_buffer_is_twice_mean_ipdv() {
        // Delays 10, 14, 10, 14: |IPDV| = 4 each, buffer 8, mean 12, playout 20: none late.
        let v: Vec<ProbeSample> = [10, 14, 10, 14]
            .iter()
            .enumerate()
            .map(|(i, &d)| ProbeSample::received(ms(20 * i as u64), ms(d)))
            .collect();
        let a = assess_voip(&v, &VoipConfig::default()).unwrap();
        assert_eq!(
            (a.jitter_buffer, a.mouth_to_ear, a.late_discarded),
            (ms(8), ms(20), 0)
        );
        assert!(close(a.r, 93.2 - 0.48, 1e-9));
        assert_eq!(
            assess_voip(&[ProbeSample::lost(ms(0))], &VoipConfig::default()),
            None
        );
    }
}
