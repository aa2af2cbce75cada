//! The file an answer was read from (`FILE_HEADER`): named on `/transcript` and `/catchup`,
//! the same while the file grows, another once it is replaced, and readable by a page of an
//! allowed origin. A client refuses an older page of another file than the one it checked.

mod server_support;

use scrollback::protocol::{fingerprint, FILE_HEADER};
use serde_json::json;
use server_support::{line, Fixture};

fn file_of(response: &reqwest::Response) -> Option<String> {
    let value = response.headers().get(FILE_HEADER)?;
    Some(value.to_str().unwrap().to_string())
}

#[tokio::test]
async fn every_answer_names_its_file_which_stays_while_it_grows_and_changes_when_replaced() {
    let f = Fixture::with(|c| c.allow_origin = vec!["http://app.example".into()]).await;
    let first = line(1, json!({"type": "userMessage", "text": "hi"}));
    f.write(
        "s",
        &format!(
            "{first}{}",
            line(2, json!({"type": "status", "status": "idle"}))
        ),
    );
    let page = f.get("/sessions/s/transcript").await;
    let id = file_of(&page).expect("named");
    assert_eq!(
        id,
        fingerprint(first.trim_end().as_bytes()),
        "its first line's"
    );
    let check = f.get("/sessions/s/catchup?cursor=2").await;
    assert_eq!(
        file_of(&check).as_ref(),
        Some(&id),
        "the check names it too"
    );
    let older = f.get("/sessions/s/transcript?before=2&coalesce=true").await;
    assert_eq!(file_of(&older).as_ref(), Some(&id));

    // Appended to: the same file.
    let grown = format!(
        "{first}{}{}",
        line(2, json!({"type": "status", "status": "idle"})),
        line(3, json!({"type": "userMessage", "text": "more"}))
    );
    f.write("s", &grown);
    assert_eq!(
        file_of(&f.get("/sessions/s/transcript").await),
        Some(id.clone())
    );

    // Replaced by another conversation with as many lines: another file.
    let other = format!(
        "{}{}",
        line(1, json!({"type": "userMessage", "text": "another"})),
        line(2, json!({"type": "status", "status": "idle"}))
    );
    f.write("s", &other);
    let replaced = file_of(&f.get("/sessions/s/transcript?before=2").await).unwrap();
    assert_ne!(replaced, id);

    // A page of an allowed origin may read it.
    let cors = f
        .get_with("/sessions/s/transcript", "origin", "http://app.example")
        .await;
    let exposed = cors.headers().get("access-control-expose-headers");
    assert!(
        exposed.is_some_and(|v| v.to_str().unwrap().contains(FILE_HEADER)),
        "{exposed:?}"
    );

    // A file with no complete line yet names none.
    f.write("t", "{\"seq\":1,\"ts\":1,");
    assert_eq!(file_of(&f.get("/sessions/t/transcript").await), None);
}
