//! The row rule stays linear in the lengths of the deltas it compares: two megabyte deltas that
//! share a long prefix fold into one row (the case that once took seventy seconds of CPU).

use scrollback_protocol::{coalesce, joins, Line};

fn delta(seq: u64, text: &str) -> Line {
    let event = serde_json::json!({"type": "assistantText", "text": text});
    Line::new(seq, seq as f64, event.as_object().unwrap().clone()).unwrap()
}

#[test]
fn two_megabyte_deltas_sharing_a_prefix_fold_into_one_row() {
    let m = 1_600_000;
    let a = "a".repeat(m);
    let older = delta(1, &format!("{a}b"));
    let newer = delta(2, &format!("{a}c"));
    assert!(joins(&older, &newer), "a clean append joins");
    let page = coalesce(&[older, newer]);
    assert_eq!(page.len(), 1, "one row");
    let text = page[0].text().unwrap();
    assert_eq!(text.len(), 2 * m + 2);
    assert!(text.starts_with(&a) && text.ends_with('c'));
}

#[test]
fn a_megabyte_overlap_is_still_seen() {
    // The newer delta replays the older one's last megabyte: not a clean append.
    let m = 1_000_000;
    let older = delta(1, &format!("x{}", "ab".repeat(m)));
    let newer = delta(2, &format!("{}y", "ab".repeat(m)));
    assert!(!joins(&older, &newer));
    assert_eq!(coalesce(&[older, newer]).len(), 2);
}
