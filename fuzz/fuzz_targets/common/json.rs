//! JSON equality for round trips through serde_json.

use serde_json::Value;

/// JSON equality, but for numbers that moved by a few ulps: serde_json's default float parsing
/// (without its `float_roundtrip` feature) may read back a number it wrote one ulp off.
pub fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            x == y
                || matches!((x.as_f64(), y.as_f64()), (Some(p), Some(q))
                    if (p - q).abs() <= p.abs().max(q.abs()) * 4.0 * f64::EPSILON)
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_json(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}
