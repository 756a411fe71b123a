//! Paths into a JSON value, for the loader's fuzzers: the native one (`shared/tests/fuzz_load.rs`)
//! and the wasm32 one in the browser (`viewer/tests/loader_fuzz.rs`) include this file.

use serde_json::Value;

/// Every path (object keys and array indices) to a value inside `v`.
pub fn paths(v: &Value, here: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(here.clone());
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                here.push(k.clone());
                paths(x, here, out);
                here.pop();
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                here.push(i.to_string());
                paths(x, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

/// The value at `path`, if there is one.
pub fn at_mut<'a>(v: &'a mut Value, path: &[String]) -> Option<&'a mut Value> {
    path.iter().try_fold(v, |v, key| match v {
        Value::Object(m) => m.get_mut(key),
        Value::Array(a) => key.parse::<usize>().ok().and_then(|i| a.get_mut(i)),
        _ => None,
    })
}
