//! The package at `/pkg/` served as a bundler serves its output: under `/pkg/<version>/` for
//! good (`immutable`), the plain paths revalidated (`no-cache`), a version that is not the
//! current one refused, and no way out of the folder through the versioned path; precompressed
//! copies sent while they are at least as new as the file.

mod server_support;

use server_support::Fixture;

#[tokio::test]
async fn the_package_is_served_immutable_under_its_version() {
    let www = tempfile::tempdir().unwrap();
    let pkg = tempfile::tempdir().unwrap();
    std::fs::write(www.path().join("index.html"), "<!doctype html>").unwrap();
    std::fs::write(pkg.path().join("index.js"), "export {}").unwrap();
    std::fs::write(pkg.path().join("scrollback_bg.wasm"), b"\0asm\x01\0\0\0").unwrap();
    let (w, p) = (www.path().to_owned(), pkg.path().to_owned());
    let f = Fixture::with(|c| {
        c.www = Some(w);
        c.pkg = Some(p);
    })
    .await;
    let cache = |r: &reqwest::Response| {
        r.headers()
            .get("cache-control")
            .map(|v| v.to_str().unwrap().to_owned())
    };

    let version = f.get("/pkg/version").await;
    assert_eq!(version.status(), 200);
    assert_eq!(cache(&version).as_deref(), Some("no-cache"));
    let version = version.text().await.unwrap();
    assert_eq!(version.len(), 16, "{version}");

    for file in ["index.js", "scrollback_bg.wasm"] {
        let r = f.get(&format!("/pkg/{version}/{file}")).await;
        assert_eq!(r.status(), 200, "{file}");
        assert!(cache(&r).unwrap().contains("immutable"), "{file}");
        let plain = f.get(&format!("/pkg/{file}")).await;
        assert_eq!(plain.status(), 200, "{file}");
        assert_eq!(cache(&plain).as_deref(), Some("no-cache"), "{file}");
    }
    let wasm = f.get(&format!("/pkg/{version}/scrollback_bg.wasm")).await;
    assert!(wasm.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/wasm"));
    assert_eq!(cache(&f.get("/").await).as_deref(), Some("no-cache"));

    // A rebuild changes the version; the old one is not served as if it were the new.
    std::fs::write(pkg.path().join("index.js"), "export const rebuilt = 1;").unwrap();
    let newer = f.get("/pkg/version").await.text().await.unwrap();
    assert_ne!(newer, version);
    let gone = f.get(&format!("/pkg/{version}/index.js")).await;
    assert_eq!(gone.status(), 404);
    let said = |r: reqwest::Response| async { r.json::<serde_json::Value>().await.unwrap() };
    assert_eq!(said(gone).await["error"], "this package version is gone");
    assert_eq!(f.get(&format!("/pkg/{newer}/index.js")).await.status(), 200);
    let missing = f.get(&format!("/pkg/{newer}/missing.js")).await;
    assert_eq!(missing.status(), 404);
    assert_eq!(said(missing).await["error"], "no such file");
    assert_eq!(
        f.get(&format!("/pkg/{newer}/%2E%2E/%2E%2E/etc/passwd"))
            .await
            .status()
            .as_u16()
            / 100,
        4
    );
}

#[tokio::test]
async fn precompressed_copies_are_sent_only_while_fresh() {
    let pkg = tempfile::tempdir().unwrap();
    let wasm = pkg.path().join("scrollback_bg.wasm");
    let module = b"\0asm\x01\0\0\0 a module long enough to be worth compressing on the fly";
    std::fs::write(&wasm, module).unwrap();
    std::fs::write(pkg.path().join("scrollback_bg.wasm.br"), b"brotli copy").unwrap();
    std::fs::write(pkg.path().join("scrollback_bg.wasm.gz"), b"gzip copy").unwrap();
    let p = pkg.path().to_owned();
    let f = Fixture::with(|c| c.pkg = Some(p)).await;
    let http = reqwest::Client::builder().no_gzip().build().unwrap();
    let get = |path: String, encoding: &'static str| {
        let request = http.get(f.url(&path)).header("accept-encoding", encoding);
        async move {
            let r = request.send().await.unwrap();
            assert_eq!(r.status(), 200, "{path} {encoding}");
            let enc = r
                .headers()
                .get("content-encoding")
                .map(|v| v.to_str().unwrap().to_owned());
            let wasm_type = r.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/wasm");
            assert!(wasm_type, "{path} {encoding}");
            (enc, r.bytes().await.unwrap().to_vec())
        }
    };
    let version = f.get("/pkg/version").await.text().await.unwrap();
    for path in [
        format!("/pkg/{version}/scrollback_bg.wasm"),
        "/pkg/scrollback_bg.wasm".to_string(),
    ] {
        let (enc, body) = get(path.clone(), "br, gzip").await;
        assert_eq!(
            (enc.as_deref(), &body[..]),
            (Some("br"), &b"brotli copy"[..])
        );
        let (enc, body) = get(path.clone(), "gzip").await;
        assert_eq!(
            (enc.as_deref(), &body[..]),
            (Some("gzip"), &b"gzip copy"[..])
        );
        let (enc, body) = get(path.clone(), "identity").await;
        assert_eq!((enc, &body[..]), (None, &module[..]));
    }

    // The module rebuilt after its copies were made: they are stale and never sent.
    let later = std::time::SystemTime::now() + std::time::Duration::from_secs(5);
    std::fs::File::options()
        .write(true)
        .open(&wasm)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let version = f.get("/pkg/version").await.text().await.unwrap();
    let (enc, body) = get(format!("/pkg/{version}/scrollback_bg.wasm"), "br").await;
    assert_eq!(enc.as_deref(), Some("br"), "compressed as it leaves");
    assert_ne!(&body[..], &b"brotli copy"[..]);
    let (enc, body) = get("/pkg/scrollback_bg.wasm".to_string(), "identity").await;
    assert_eq!((enc, &body[..]), (None, &module[..]));
}
