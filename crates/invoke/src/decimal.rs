//! Exact decimal arithmetic for percentages: `5.5` (percent) is read as the f64
//! nearest 0.055, not as 5.5 / 100 rounded twice, so a fraction written back as a
//! percentage by [`to_percent`] reads back as the same f64.

/// `m / 10^scale`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Dec {
    m: u128,
    scale: u32,
}

/// Enough digits for any f64's shortest spelling in the ranges we write (fractions
/// down to 1e-20); larger scales fall back to f64 arithmetic.
const MAX_SCALE: u32 = 30;

impl Dec {
    /// `[+]digits[.digits]` or `[+].digits`; `None` for anything else.
    fn parse(s: &str) -> Option<Dec> {
        let s = s.strip_prefix('+').unwrap_or(s);
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        if int.is_empty() && frac.is_empty()
            || !(int.bytes().chain(frac.bytes())).all(|b| b.is_ascii_digit())
        {
            return None;
        }
        let scale = u32::try_from(frac.len()).ok().filter(|&s| s <= MAX_SCALE)?;
        let m = format!("{int}{frac}").parse::<u128>().ok()?;
        Some(Dec { m, scale })
    }

    fn pow10(n: u32) -> Option<u128> {
        10u128.checked_pow(n)
    }

    /// `self × 10^k` for k ≥ -scale.
    fn shift(self, k: i32) -> Option<Dec> {
        let scale = i64::from(self.scale) - i64::from(k);
        if scale >= 0 {
            Some(Dec {
                m: self.m,
                scale: u32::try_from(scale).ok()?,
            })
        } else {
            let up = Dec::pow10(u32::try_from(-scale).ok()?)?;
            Some(Dec {
                m: self.m.checked_mul(up)?,
                scale: 0,
            })
        }
    }

    /// `n - self`, `None` when negative.
    fn sub_from(self, n: u128) -> Option<Dec> {
        let big = n.checked_mul(Dec::pow10(self.scale)?)?;
        Some(Dec {
            m: big.checked_sub(self.m)?,
            scale: self.scale,
        })
    }

    /// The f64 nearest to the exact value.
    fn to_f64(self) -> f64 {
        format!("{}e-{}", self.m, self.scale)
            .parse()
            .unwrap_or(f64::NAN)
    }

    /// Plain decimal, no exponent, no trailing zeros.
    fn spell(self) -> String {
        let digits = format!("{:0>width$}", self.m, width = self.scale as usize + 1);
        let (int, frac) = digits.split_at(digits.len() - self.scale as usize);
        let frac = frac.trim_end_matches('0');
        if frac.is_empty() {
            int.to_owned()
        } else {
            format!("{int}.{frac}")
        }
    }
}

/// `s` percent as a fraction (`5` → 0.05), exactly rounded when `s` is a plain
/// decimal; other spellings f64 reads (`5e1`) are divided as before.
pub fn percent_as_fraction(s: &str) -> Option<f64> {
    match Dec::parse(s).and_then(|d| d.shift(-2)) {
        Some(d) => Some(d.to_f64()),
        None => s.parse::<f64>().ok().map(|v| v / 100.0),
    }
}

/// `100 - s` percent as a fraction (`95` → 0.05): the share a percentage leaves out.
pub fn rest_as_fraction(s: &str) -> Option<f64> {
    match Dec::parse(s).and_then(|d| d.sub_from(100)?.shift(-2)) {
        Some(d) => Some(d.to_f64()),
        None => s.parse::<f64>().ok().map(|v| (100.0 - v) / 100.0),
    }
}

/// The percentage that [`percent_as_fraction`] reads as `x`.
pub fn to_percent(x: f64) -> String {
    match Dec::parse(&x.to_string()).and_then(|d| d.shift(2)) {
        Some(d) => d.spell(),
        None => (x * 100.0).to_string(),
    }
}

/// The percentage that [`rest_as_fraction`] reads as `x` (for `x` in [0, 1]).
pub fn to_rest_percent(x: f64) -> String {
    match Dec::parse(&x.to_string()).and_then(|d| d.shift(2)?.sub_from(100)) {
        Some(d) => d.spell(),
        None => (100.0 - x * 100.0).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn known_values() {
        assert_eq!(percent_as_fraction("5"), Some(0.05));
        assert_eq!(percent_as_fraction("0.1"), Some(0.001));
        assert_eq!(percent_as_fraction("5e1"), Some(0.5));
        assert_eq!(percent_as_fraction("x"), None);
        assert_eq!(rest_as_fraction("95"), Some(0.05));
        assert_eq!(rest_as_fraction("100"), Some(0.0));
        assert_eq!(to_percent(0.05), "5");
        assert_eq!(to_percent(0.0012), "0.12");
        assert_eq!(to_rest_percent(0.05), "95");
        assert_eq!(to_rest_percent(0.0), "100");
    }

    proptest! {
        #[test]
        fn percentages_read_back_exactly(m in 1u64..=100_000_000, scale in 0u32..=6) {
            let s = Dec { m: u128::from(m), scale }.spell();
            if let Some(x) = percent_as_fraction(&s) {
                prop_assert_eq!(percent_as_fraction(&to_percent(x)), Some(x));
            }
            if let Some(x) = rest_as_fraction(&s).filter(|x| *x >= 0.0) {
                prop_assert_eq!(rest_as_fraction(&to_rest_percent(x)), Some(x));
            }
        }
    }
}
