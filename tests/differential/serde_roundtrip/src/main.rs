//! serde_json's answer for each line on stdin: `ok <re-encoding>` or
//! `err <message>`, one answer line per input line.
//!
//! Usage: `serde_roundtrip meta|entry|message|journal|head|title|erasure|session`
//!
//! The types are this project's SPEC section 1 written with serde's
//! attributes, as the Rust implementation declares them: the header and the
//! entries are read from `&str` (the Rust store reads whole files as
//! strings), journal lines from bytes (the Rust journal parses byte pieces).
//!
//! `head`, `title` and `erasure` are this project's own records, which the
//! reference has no type for: here they are declared as a Rust program would
//! declare them with serde (docs/wire-format.md gives their fields), so the
//! answer is serde_json's reading of those fields, read from `&str`.
//!
//! `session` reads a path on each line and loads that session file as the
//! Rust store's `JsonlSessionStore::load` does; its `ok` answer is a JSON
//! array of strings: the header, then each entry, as serde_json re-encodes
//! them.

use std::io::{self, BufRead, BufWriter, Write};

use chrono::{DateTime, Utc};
use serde_derive::{Deserialize, Serialize};
use serde_json::{Map, Value};
use uuid::Uuid;

fn version_one() -> u32 {
    1
}

fn is_false(flag: &bool) -> bool {
    !*flag
}

#[derive(Serialize, Deserialize)]
struct Header {
    id: String,
    #[serde(default = "version_one")]
    version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    parent_session: Option<String>,
    #[serde(default)]
    created_at: String,
}

#[derive(Serialize, Deserialize)]
struct ChatMessage {
    role: String,
    content: Value,
    #[serde(default, skip_serializing_if = "is_false")]
    streaming: bool,
    #[serde(flatten)]
    more: Map<String, Value>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Entry {
    Message {
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_id: Option<String>,
        timestamp: String,
        message: ChatMessage,
    },
    Compaction {
        id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        parent_id: Option<String>,
        timestamp: String,
        summary: String,
        first_kept_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tokens_before: Option<u64>,
    },
}

#[derive(Serialize, Deserialize)]
struct Opened {
    started_at: DateTime<Utc>,
    model: String,
}

#[derive(Serialize, Deserialize)]
struct Posted {
    at: DateTime<Utc>,
    id: Uuid,
}

#[derive(Serialize, Deserialize)]
struct Commented {
    at: DateTime<Utc>,
    id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    on: Option<Uuid>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "line", rename_all = "snake_case")]
enum Journal {
    Session(Opened),
    Post(Posted),
    Comment(Commented),
}

#[derive(Serialize, Deserialize)]
struct HeadMove {
    session_id: String,
    at: String,
}

#[derive(Serialize, Deserialize)]
struct TitleChange {
    session_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    title: Option<String>,
    at: String,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Erased {
    Session,
    Journal,
}

#[derive(Serialize, Deserialize)]
struct Erasure {
    kind: Erased,
    name: String,
    at: String,
    reason: String,
    lines: u64,
    digest: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    key: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    keys: Option<u64>,
}

fn reencoded<T>(text: &str) -> Result<String, String>
where
    T: serde::de::DeserializeOwned + serde::Serialize,
{
    let value: T = serde_json::from_str(text).map_err(|e| e.to_string())?;
    serde_json::to_string(&value).map_err(|e| e.to_string())
}

fn from_text<T>(line: &[u8]) -> Result<String, String>
where
    T: serde::de::DeserializeOwned + serde::Serialize,
{
    let text = std::str::from_utf8(line).map_err(|e| format!("invalid UTF-8: {e}"))?;
    reencoded::<T>(text)
}

/// The session file at `path`, loaded as `JsonlSessionStore::load` loads it:
/// read whole as UTF-8; what follows the last '\n' is a crash-truncated tail,
/// dropped (the store also truncates the file; the oracle never writes);
/// split by `str::lines` (a '\r' before a '\n' goes); the header on line 1,
/// which must parse; every further line an entry, which must parse.
fn load_session(path: &[u8]) -> Result<String, String> {
    let path = std::str::from_utf8(path).map_err(|e| format!("invalid UTF-8 path: {e}"))?;
    let content =
        std::fs::read_to_string(path).map_err(|e| format!("Failed to read session file: {e}"))?;
    let complete_len = if content.ends_with('\n') {
        content.len()
    } else {
        content.rfind('\n').map(|i| i + 1).unwrap_or(0)
    };
    let mut lines = content[..complete_len].lines();
    let Some(header) = lines.next() else {
        return Err("Session file is empty (missing header line)".to_string());
    };
    let mut decoded =
        vec![reencoded::<Header>(header).map_err(|e| format!("Invalid session header: {e}"))?];
    for (i, line) in lines.enumerate() {
        let entry = reencoded::<Entry>(line)
            .map_err(|e| format!("Invalid entry at line {} of the session: {e}", i + 2))?;
        decoded.push(entry);
    }
    serde_json::to_string(&decoded).map_err(|e| e.to_string())
}

fn from_bytes<T>(line: &[u8]) -> Result<String, String>
where
    T: serde::de::DeserializeOwned + serde::Serialize,
{
    let value: T = serde_json::from_slice(line).map_err(|e| e.to_string())?;
    serde_json::to_string(&value).map_err(|e| e.to_string())
}

fn main() {
    let kind = std::env::args().nth(1).unwrap_or_default();
    let answer: fn(&[u8]) -> Result<String, String> = match kind.as_str() {
        "meta" => from_text::<Header>,
        "entry" => from_text::<Entry>,
        "message" => from_text::<ChatMessage>,
        "journal" => from_bytes::<Journal>,
        "head" => from_text::<HeadMove>,
        "title" => from_text::<TitleChange>,
        "erasure" => from_text::<Erasure>,
        "session" => load_session,
        _ => {
            eprintln!("usage: serde_roundtrip meta|entry|message|journal|head|title|erasure|session");
            std::process::exit(2);
        }
    };
    let stdin = io::stdin();
    let mut out = BufWriter::new(io::stdout().lock());
    for line in stdin.lock().split(b'\n') {
        let line = line.expect("stdin");
        let reply = match answer(&line) {
            Ok(text) => format!("ok {text}"),
            Err(message) => format!("err {}", message.replace('\n', " ")),
        };
        writeln!(out, "{reply}").expect("stdout");
    }
    out.flush().expect("stdout");
}
