//! One rule for session ids (issue row 13): every id the server accepts is one a client can
//! file its cache under, so 128 uppercase letters (384 bytes as a cache key) are refused with a
//! 400 that says why, and the longest accepted ids key on the client.

mod server_support;

use scrollback::chunks::names::encode;
use server_support::{line, Fixture};

#[tokio::test]
async fn the_server_accepts_exactly_the_ids_a_client_can_key() {
    let f = Fixture::new().await;
    let body = line(1, serde_json::json!({"type": "userMessage", "text": "hi"}));
    for (id, accepted) in [
        ("A".repeat(128), false),
        ("A".repeat(67), false),
        ("A".repeat(66), true),
        ("a".repeat(128), true),
        ("Run_".repeat(20), true),
    ] {
        let response = f
            .http
            .put(f.url(&format!("/sessions/{id}/transcript")))
            .body(body.clone())
            .send()
            .await
            .unwrap();
        let status = response.status().as_u16();
        assert_eq!(encode(&id).is_ok(), accepted, "{id}: the client's answer");
        if accepted {
            assert_eq!(status, 201, "{id}");
        } else {
            let (status, message) = f.error(response).await;
            assert_eq!(status, 400, "{id}");
            assert!(message.contains("cache key"), "{message}");
        }
    }
}
