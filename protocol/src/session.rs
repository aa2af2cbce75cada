//! The session list's entries (`GET /sessions`).

use serde::{Deserialize, Serialize};

/// The `code` of the server's 404 for a session it does not have:
/// `{"error":"unknown session","code":"unknownSession"}`. Only that answer tells a client the
/// session is gone (its cache purged): a 404 from anything in front of the server, a gateway
/// or a proxy mid-deploy, says nothing about the session, even as JSON.
pub const UNKNOWN_SESSION: &str = "unknownSession";

/// One session as the list describes it. Status, model and permission mode come from here,
/// not from a replayed cache (design.md decision 7): this is the newer measurement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    /// The session's id: the name of its folder on the server.
    pub id: String,
    /// A title (the first user message, shortened, unless the session names one).
    pub title: String,
    /// The latest `status` event's status (`"idle"`, `"working"`, ...), or `"idle"`.
    pub status: String,
    /// The latest `settings` event's model, or `""`.
    pub model: String,
    /// The latest `settings` event's permission mode, or `""`.
    pub permission_mode: String,
    /// The newest line's seq; 0 for an empty transcript.
    pub seq: u64,
}
