//! The server's one error shape: the JSON body `{"error": "..."}` every route and the auth
//! guard answer with, and [`ApiError`], what a handler returns (I/O errors mapped to a status).

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use scrollback_protocol::UNKNOWN_SESSION;
use serde_json::json;
use std::io;

/// A JSON error response: `{"error": "..."}` (a session's 404 adds its `code`, see
/// [`ApiError`]).
pub fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(json!({ "error": message.into() }))).into_response()
}

/// A static file's answer from `ServeDir`, whose 404 has an empty body: said in the one shape.
pub fn file_or_error(response: Response) -> Response {
    match response.status() {
        StatusCode::NOT_FOUND => error(StatusCode::NOT_FOUND, "no such file"),
        _ => response,
    }
}

/// An error a handler answers with.
#[derive(Debug)]
pub struct ApiError(pub(crate) StatusCode, pub(crate) String);

impl ApiError {
    /// A 400 with this message: the request itself is wrong.
    pub(crate) fn bad(message: impl Into<String>) -> ApiError {
        ApiError(StatusCode::BAD_REQUEST, message.into())
    }

    /// A 404 for a session that does not exist.
    pub(crate) fn unknown() -> ApiError {
        ApiError(StatusCode::NOT_FOUND, "unknown session".into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let busy = self.0 == StatusCode::SERVICE_UNAVAILABLE;
        // A handler's 404 is always [`ApiError::unknown`] (a missing file is one): it carries
        // the code that tells a client the session is gone, which no other 404 carries.
        if self.0 == StatusCode::NOT_FOUND {
            let body = json!({ "error": self.1, "code": UNKNOWN_SESSION });
            return (self.0, Json(body)).into_response();
        }
        let mut response = error(self.0, self.1);
        if busy {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
        }
        response
    }
}

impl From<io::Error> for ApiError {
    fn from(e: io::Error) -> ApiError {
        if e.kind() == io::ErrorKind::NotFound {
            return ApiError::unknown();
        }
        // A torn last line that did not complete in time, or a full queue: nothing was written.
        if matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::QuotaExceeded
        ) {
            return ApiError(StatusCode::SERVICE_UNAVAILABLE, e.to_string());
        }
        eprintln!("scrollback-server: {e}");
        ApiError(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the server could not read or write the session".into(),
        )
    }
}
