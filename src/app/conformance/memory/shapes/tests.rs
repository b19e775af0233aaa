use super::*;

#[test]
fn internals_are_found_and_plain_messages_are_not() {
    for (body, what) in [
        (
            r#"{"error":"x","message":"dsn postgres://memory:hunter2@db/audit"}"#,
            "a credential in a URL",
        ),
        (
            r#"{"error":"x","message":"password=hunter2"}"#,
            "a password",
        ),
        (
            r#"{"error":"x","message":"row 7 in /srv/memory/audit.db"}"#,
            "a file path",
        ),
        (
            r#"{"error":"x","message":"Traceback (most recent call last): ..."}"#,
            "a stack trace",
        ),
        (
            r#"{"error":"x","message":"ERROR: syntax error at or near \"FROM\""}"#,
            "SQL",
        ),
        (
            r#"{"error":"x","message":"at C:\\srv\\audit.db"}"#,
            "a file path",
        ),
        ("java.lang.Error\n\tat com.x.Y(Y.java:3)", "a stack trace"),
    ] {
        assert_eq!(internals(body), Some(what), "{body}");
    }
    for body in [
        r#"{"error":"invalid_request","message":"limit must be between 1 and 200"}"#,
        r#"{"error":"not_found","message":"no entry at /v1/tenants/x/audit/y"}"#,
        r#"{"error":"unauthorized","message":"see https://docs.example.com/auth"}"#,
        r#"{"error":"invalid_request","message":"kind must match ^[a-z][a-z0-9_.]*$"}"#,
    ] {
        assert_eq!(internals(body), None, "{body}");
    }
}
