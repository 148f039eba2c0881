//! Unit tests of the Caterva2 URL parsing.

use super::*;

#[test]
fn web_ui_urls_split_into_server_and_api_path() {
    let t = |u: &str| parse(u).unwrap();
    assert_eq!(
        t("http://127.0.0.1:8000/roots/@public"),
        Target {
            base: "http://127.0.0.1:8000".into(),
            path: "@public".into()
        }
    );
    assert_eq!(
        t("https://cat2.cloud/demo/roots/@public/dir1/ds-2d.b2nd"),
        Target {
            base: "https://cat2.cloud/demo".into(),
            path: "@public/dir1/ds-2d.b2nd".into()
        }
    );
    assert_eq!(t("http://h/roots/%40public/a%20b/").path, "@public/a b");
    assert_eq!(t("http://h:1/demo").path, "", "a base: every root");
    assert!(looks_like_caterva2("http://h/roots/@public/x"));
    assert!(!looks_like_caterva2("http://h/data/roots/x.b2nd"));
    assert!(!looks_like_caterva2("http://h/x.b2nd"));
    assert!(!looks_like_caterva2("s3://b/roots/@public"));
    assert_eq!(encode_path("@public/a b/x.b2nd"), "@public/a%20b/x.b2nd");
}
