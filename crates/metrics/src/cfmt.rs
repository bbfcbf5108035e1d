//! Number formatting that reproduces iperf 2.1.8's C `printf` output.
//!
//! * [`byte_snprintf`]: iperf 2's adaptive byte/bit formatter
//!   (`src/stdio.c:260`): `1.37 GByte`, `955 MByte`, `11.8 Gbit`.
//! * [`c_g`]: C's `%.<p>g` (used for the loss percentage, `%.2g`).
//! * [`net_power`]: the NetPwr column rules (`%.0f` above 100, `%.2f` above
//!   10, else `%.6f`, `NAN` for a zero delay, `OBL` below -1e7).
//!
//! Rust's `{:.N}` float formatting rounds the exact binary value half-to-even,
//! the same as glibc's `printf`, so `%4.2f` maps to `{:4.2}`.

/// What `byte_snprintf` should print: the format letters of iperf 2's `-f`.
///
/// Upper case = bytes with 1024-based prefixes, lower case = bits with
/// 1000-based prefixes; `A`/`a` pick the prefix adaptively (the default is `a`
/// for rates and `A` for amounts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ByteFormat {
    /// `A`: adaptive bytes (`Byte`, `KByte`, `MByte`, ...).
    AdaptiveBytes,
    /// `a`: adaptive bits (`bit`, `Kbit`, `Mbit`, ...).
    AdaptiveBits,
    /// A fixed prefix: `power` 0 = unit, 1 = K, 2 = M, 3 = G, 4 = T, 5 = P;
    /// `bits` selects bits (1000-based) instead of bytes (1024-based).
    Fixed {
        /// Prefix power (0..=5).
        power: u8,
        /// Bits instead of bytes.
        bits: bool,
    },
}

impl ByteFormat {
    /// From an iperf 2 `-f` letter (`b k m g t p a` or upper case); `None` otherwise.
    pub fn from_letter(c: char) -> Option<ByteFormat> {
        let bits = c.is_ascii_lowercase();
        let power = match c.to_ascii_uppercase() {
            'A' => {
                return Some(if bits {
                    ByteFormat::AdaptiveBits
                } else {
                    ByteFormat::AdaptiveBytes
                });
            }
            'B' => 0,
            'K' => 1,
            'M' => 2,
            'G' => 3,
            'T' => 4,
            'P' => 5,
            _ => return None,
        };
        Some(ByteFormat::Fixed { power, bits })
    }

    /// The same prefix rule for the other kind (bytes <-> bits), as iperf 2
    /// uses `toupper(Format)` for amounts and `Format` for rates.
    pub fn as_bytes(self) -> ByteFormat {
        match self {
            ByteFormat::AdaptiveBits | ByteFormat::AdaptiveBytes => ByteFormat::AdaptiveBytes,
            ByteFormat::Fixed { power, .. } => ByteFormat::Fixed { power, bits: false },
        }
    }

    fn is_bits(self) -> bool {
        matches!(
            self,
            ByteFormat::AdaptiveBits | ByteFormat::Fixed { bits: true, .. }
        )
    }
}

const BYTE_LABELS: [&str; 6] = ["Byte", "KByte", "MByte", "GByte", "TByte", "PByte"];
const BIT_LABELS: [&str; 6] = ["bit", "Kbit", "Mbit", "Gbit", "Tbit", "Pbit"];

/// iperf 2's `byte_snprintf`: `value` is a number of **bytes** (or bytes per
/// second); bit formats multiply by 8. Always four significant places:
/// `%4.3f` below 1, `%4.2f` below 10, `%4.1f` below 100, else `%4.0f`.
///
/// The caller appends iperf 2's suffixes: `s` after an amount
/// (`1.37 GByte` + `s`) and `s/sec` after a rate (`11.8 Gbit` + `s/sec`).
pub fn byte_snprintf(value: f64, format: ByteFormat) -> String {
    let bits = format.is_bits();
    let mut num = if bits { value * 8.0 } else { value };
    let base = if bits { 1000.0 } else { 1024.0 };
    let conv: usize = match format {
        ByteFormat::Fixed { power, .. } => usize::from(power.min(5)),
        ByteFormat::AdaptiveBits | ByteFormat::AdaptiveBytes => {
            let mut tmp = num.abs();
            let mut conv = 0;
            while tmp >= base && conv < 5 {
                tmp /= base;
                conv += 1;
            }
            conv
        }
    };
    num /= base.powi(conv as i32);
    let label = if bits {
        BIT_LABELS[conv]
    } else {
        BYTE_LABELS[conv]
    };
    let mag = num.abs();
    if mag < 0.9995 {
        format!("{num:4.3} {label}")
    } else if mag < 9.995 {
        format!("{num:4.2} {label}")
    } else if mag < 99.95 {
        format!("{num:4.1} {label}")
    } else {
        format!("{num:4.0} {label}")
    }
}

/// An amount of bytes as iperf 2 prints it in the Transfer column
/// (`byte_snprintf` + `s`): `4.63 GBytes`, ` 955 MBytes`.
pub fn transfer(bytes: f64, format: ByteFormat) -> String {
    let mut s = byte_snprintf(bytes, format.as_bytes());
    s.push('s');
    s
}

/// A rate in **bytes** per second as iperf 2 prints it in the Bandwidth
/// column (`byte_snprintf` + `s/sec`): `13.2 Gbits/sec`.
pub fn bandwidth(bytes_per_sec: f64, format: ByteFormat) -> String {
    let mut s = byte_snprintf(bytes_per_sec, format);
    s.push_str("s/sec");
    s
}

/// C's `%.<precision>g` for finite and non-finite values (`nan`, `-nan`, `inf`).
pub fn c_g(value: f64, precision: usize) -> String {
    if value.is_nan() {
        return if value.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if value.is_infinite() {
        return if value < 0.0 {
            "-inf".into()
        } else {
            "inf".into()
        };
    }
    let p = precision.max(1);
    if value == 0.0 {
        return if value.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    // The exponent X that %e with precision p-1 would print (after rounding).
    let e_repr = format!("{:.*e}", p - 1, value);
    let (mantissa, exp) = match e_repr.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse::<i32>().unwrap_or(0)),
        None => (e_repr.clone(), 0),
    };
    if exp < -4 || exp >= p as i32 {
        let m = strip_zeros(&mantissa);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.unsigned_abs())
    } else {
        let decimals = usize::try_from(p as i32 - 1 - exp).unwrap_or(0);
        strip_zeros(&format!("{value:.decimals$}"))
    }
}

fn strip_zeros(s: &str) -> String {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s.to_string()
    }
}

/// The NetPwr column: `NAN` when the delay was zero (`None`), `OBL` below
/// -1e7, `%.0f` above 100, `%.2f` above 10, else `%.6f`.
pub fn net_power(value: Option<f64>) -> String {
    match value {
        None => "NAN".into(),
        Some(v) if v < -1e7 => "OBL".into(),
        Some(v) if v > 100.0 => format!("{v:.0}"),
        Some(v) if v > 10.0 => format!("{v:.2}"),
        Some(v) => format!("{v:.6}"),
    }
}

/// The TCP inP column: adaptive bytes without the plural `s`
/// (`2.79 MByte`, ` 261 KByte`), or `OBL` below -1e7.
pub fn in_progress(bytes: f64) -> String {
    if bytes < -1e7 {
        "OBL".into()
    } else {
        byte_snprintf(bytes, ByteFormat::AdaptiveBytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: ByteFormat = ByteFormat::AdaptiveBytes;
    const B: ByteFormat = ByteFormat::AdaptiveBits;

    #[test]
    fn adaptive_bytes_match_captures() {
        assert_eq!(transfer(4.63 * 1073741824.0, A), "4.63 GBytes");
        assert_eq!(transfer(955.0 * 1048576.0, A), " 955 MBytes");
        assert_eq!(transfer(1017.0 * 1048576.0, A), "1017 MBytes");
        assert_eq!(transfer(1_252_440.0, A), "1.19 MBytes");
        assert_eq!(transfer(2000.0, A), "1.95 KBytes");
        assert_eq!(transfer(12.0 * 1048576.0, A), "12.0 MBytes");
        assert_eq!(transfer(0.0, A), "0.000 Bytes");
        // Banner: "Read buffer size:  128 KByte", "1.44 KByte", " 183 Byte", "16.0 KByte".
        assert_eq!(byte_snprintf(131_072.0, A), " 128 KByte");
        assert_eq!(byte_snprintf(1470.0, A), "1.44 KByte");
        assert_eq!(byte_snprintf(183.0, A), " 183 Byte");
        assert_eq!(byte_snprintf(16_384.0, A), "16.0 KByte");
    }

    #[test]
    fn adaptive_bits_match_captures() {
        // 4.63 GiB over 3.0219 s is 13.2 Gbit/s.
        assert_eq!(bandwidth(4.63 * 1073741824.0 / 3.0219, B), "13.2 Gbits/sec");
        assert_eq!(bandwidth(1_252_440.0, B), "10.0 Mbits/sec");
        assert_eq!(bandwidth(12_625_000.0, B), " 101 Mbits/sec");
        assert_eq!(bandwidth(2000.0, B), "16.0 Kbits/sec");
        assert_eq!(bandwidth(0.0, B), "0.000 bits/sec");
    }

    #[test]
    fn boundaries_round_like_c() {
        // 9.995 would print as 10.00 with %4.2f, so it switches to %4.1f.
        assert_eq!(byte_snprintf(9.9951, A), "10.0 Byte");
        assert_eq!(byte_snprintf(9.994, A), "9.99 Byte");
        assert_eq!(byte_snprintf(0.9994, A), "0.999 Byte");
        assert_eq!(byte_snprintf(999.4, A), " 999 Byte");
        assert_eq!(byte_snprintf(1000.0, A), "1000 Byte");
        assert_eq!(byte_snprintf(1023.0, A), "1023 Byte");
        assert_eq!(byte_snprintf(1024.0, A), "1.00 KByte");
        assert_eq!(byte_snprintf(-2048.0, A), "-2.00 KByte");
    }

    #[test]
    fn fixed_formats() {
        let m = ByteFormat::from_letter('m').unwrap();
        assert_eq!(bandwidth(1_250_000.0, m), "10.0 Mbits/sec");
        let k = ByteFormat::from_letter('K').unwrap();
        assert_eq!(transfer(1_048_576.0, k), "1024 KBytes");
        assert_eq!(ByteFormat::from_letter('x'), None);
        assert_eq!(ByteFormat::from_letter('a'), Some(B));
    }

    #[test]
    fn percent_g_matches_c() {
        // Values printf("%.2g") gives on glibc.
        for (v, want) in [
            (0.0, "0"),
            (48.008, "48"),
            (49.49, "49"),
            (1.5, "1.5"),
            (0.012345, "0.012"),
            (100.0, "1e+02"),
            (99.6, "1e+02"),
            (9.96, "10"),
            (0.00001234, "1.2e-05"),
            (0.0001, "0.0001"),
            (3.0, "3"),
        ] {
            assert_eq!(c_g(v, 2), want, "{v}");
        }
        assert_eq!(c_g(f64::NAN, 2), "nan");
        assert_eq!(c_g(-f64::NAN, 2), "-nan");
        assert_eq!(c_g(123456.0, 6), "123456");
        assert_eq!(c_g(1234567.0, 6), "1.23457e+06");
    }

    #[test]
    fn netpower_column_rules() {
        assert_eq!(net_power(Some(5_869_519.04)), "5869519");
        assert_eq!(net_power(Some(53_532.01)), "53532");
        assert_eq!(net_power(Some(55.36)), "55.36");
        assert_eq!(net_power(Some(7.56)), "7.560000");
        assert_eq!(net_power(None), "NAN");
        assert_eq!(net_power(Some(-2e7)), "OBL");
    }

    #[test]
    fn in_progress_column() {
        assert_eq!(in_progress(2.79 * 1048576.0), "2.79 MByte");
        assert_eq!(in_progress(261.0 * 1024.0), " 261 KByte");
        assert_eq!(in_progress(-2e7), "OBL");
    }
}
