//! The fake sid behaves as the recordings of sid 0.6.0 show: the same lines, in the same order,
//! for the same requests (session ids, paths and usage text aside).

use crate::support;

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

fn data(name: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/tests/data/sid-raw-v5/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

/// What a transcript's environment chose rather than sid's behaviour: the session id, and the
/// agent and model sid was configured with (the recordings used two configurations). Read from a
/// transcript's `hello`, and written as placeholders wherever they appear, so the comparison
/// still sees that every later line names the same session, agent and model as the hello.
struct Environment {
    session: String,
    agent: String,
    model: String,
}

impl Environment {
    fn of(lines: &[Value]) -> Self {
        let hello = &lines[0];
        assert_eq!(hello["type"], "hello", "a transcript starts with hello");
        let text = |k: &str| {
            hello[k]
                .as_str()
                .unwrap_or_else(|| panic!("hello.{k}"))
                .to_owned()
        };
        Environment {
            session: text("session_id"),
            agent: text("current_agent"),
            model: text("model"),
        }
    }

    fn normalise(&self, v: &Value) -> Value {
        match v {
            Value::String(s) if *s == self.agent => Value::from("<agent>"),
            Value::String(s) if *s == self.model => Value::from("<model>"),
            Value::String(s) => Value::from(s.replace(&self.session, "<session>")),
            Value::Array(a) => Value::Array(a.iter().map(|x| self.normalise(x)).collect()),
            Value::Object(o) => Value::Object(
                o.iter()
                    .map(|(k, x)| (k.clone(), self.normalise(x)))
                    .collect(),
            ),
            other => other.clone(),
        }
    }
}

/// The key sets of a value, at every depth (objects become their keys' shapes; scalars `null`).
fn keys(v: &Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(o.iter().map(|(k, x)| (k.clone(), keys(x))).collect()),
        Value::Array(a) => Value::Array(a.iter().map(keys).collect()),
        _ => Value::Null,
    }
}

/// The parts of a line that are sid's behaviour rather than its environment: every member's
/// value (after [`Environment::normalise`]), except `data`, whose key sets are compared (its
/// values are the recorded configuration's: token limits, the system prompt).
fn shape(env: &Environment, v: &Value) -> Value {
    let mut v = env.normalise(v);
    let obj = v.as_object_mut().expect("every line is an object");
    if let Some(data) = obj.get_mut("data") {
        *data = keys(data);
    }
    // A sequence is sid's own counter; a fake session id only has to look like a timestamp.
    if let Some(Value::String(id)) = obj.get("session_id") {
        assert!(id == "<session>", "hello names its own session: {id}");
    }
    v
}
fn run_fake(requests: &str) -> Vec<Value> {
    let mut child = Command::new(support::fake_sid())
        .arg("--raw")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(requests.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit 0 on EOF (or shutdown)");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn every_recorded_exchange_is_reproduced() {
    for name in ["basic", "turn", "tool", "err"] {
        let recorded: Vec<Value> = data(&format!("out_{name}.jsonl"))
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let fake = run_fake(&data(&format!("req_{name}.jsonl")));
        let (fake_env, recorded_env) = (Environment::of(&fake), Environment::of(&recorded));
        for (i, (f, r)) in fake.iter().zip(&recorded).enumerate() {
            assert_eq!(
                shape(&fake_env, f),
                shape(&recorded_env, r),
                "{name} line {}",
                i + 1
            );
        }
        assert_eq!(fake.len(), recorded.len(), "{name}: line count");
    }
}
