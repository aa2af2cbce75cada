//! A store that fails under a running session: the view says the cache stopped keeping what it
//! shows (`storage_error`), the rows are still shown and followed, and a reload (which throws
//! the session's cache away) keeps them again. Natively on a `MemoryStore` with a write limit;
//! tests/lifecycle.test.mjs does the same with a real quota on OPFS and IndexedDB in Chromium.

use scrollback::chunks::Cache;
use scrollback::engine::{Config, Engine};
use scrollback::store::MemoryStore;
use scrollback::transport::HttpTransport;
use std::sync::Arc;

use crate::support::{local, Running, TestServer};

#[test]
fn a_full_store_is_said_in_the_view_and_a_reload_keeps_rows_again() {
    local(async {
        let base = TestServer::start(|config| config.sandbox = true).await;
        let transport = HttpTransport::new(&base.server.url(), None).unwrap();
        let store = Arc::new(MemoryStore::new());
        let cache = Cache::new(store.clone(), transport.host(), transport.port()).await;
        let engine = Engine::new(cache, transport, Config::default());
        let a = Running::open(&engine, "long").await;
        a.live().await;
        assert_eq!(a.session.with_view(|v| v.storage_error.clone()), None);

        // The store is full: the older pages are shown, and the view says they are not kept.
        store.limit_writes(Some(0));
        let shown = a.session.with_view(|v| v.transcript.rows().len());
        for _ in 0..3 {
            assert!(a.session.older().await.unwrap());
        }
        let (rows, error) = a
            .session
            .with_view(|v| (v.transcript.rows().len(), v.storage_error.clone()));
        assert!(rows > shown, "older pages shown: {shown} -> {rows}");
        assert_eq!(error.as_deref(), Some("storage quota exceeded"));
        assert!(a.session.with_view(|v| v.live), "still following the file");

        // Room again: a reload throws the cache away and keeps what it shows from then on.
        store.limit_writes(None);
        a.session.reload(None);
        a.wait("the reload", |v| {
            v.live && v.verified && v.storage_error.is_none()
        })
        .await;
        let kept = a.session.cached_size().await;
        assert!(kept > 0, "the opening window is kept");
        assert!(a.session.older().await.unwrap());
        assert!(a.session.cached_size().await > kept, "and the older page");
        a.close().await;
    });
}
