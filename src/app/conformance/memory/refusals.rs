//! What the service must refuse, and to whom: the documented 400s and the 404, a wrong
//! or missing credential, and another tenant's entries.

use serde_json::{Value, json};

use super::http::{Auth, Exchange, Request};
use super::shapes;
use super::{Appended, Checklist, hex};
use crate::app::conformance::report::Check;

impl Checklist {
    /// The documented 400s and the 404.
    pub(super) async fn refusals(&mut self) {
        let a = self.a.clone();
        let cursor = format!("cyberos-check-not-a-cursor-{}", hex::<8>());
        let x = self
            .svc
            .send(&Request::get(
                &a,
                &[],
                &[("limit", "2"), ("cursor", &cursor)],
            ))
            .await;
        let ok = x.is(400)
            && x.json
                .as_ref()
                .and_then(|v| v.get("error"))
                .and_then(Value::as_str)
                == Some("invalid_cursor");
        let seen = self.seen(&x);
        self.set(Check::verdict(
            "invalid cursor",
            format!("{} (a cursor the service never issued)", x.request),
            seen,
            (!ok).then(|| "400 {\"error\":\"invalid_cursor\"}".to_owned()),
        ));

        let entry = self.entry("check.alpha", None, 4, &self.marker_a);
        let x = self.svc.send(&Request::post(&a, &entry, None)).await;
        self.bad_request(
            "400 without Idempotency-Key",
            format!("{} without Idempotency-Key", x.request),
            &x,
        );

        let mut entry = self.entry("check.alpha", None, 5, &self.marker_a);
        entry["kind"] = json!("Not A Kind!");
        let key = hex::<16>();
        let x = self.svc.send(&Request::post(&a, &entry, Some(&key))).await;
        self.bad_request(
            "400 for a bad kind",
            format!("{} with kind \"Not A Kind!\"", x.request),
            &x,
        );

        let x = self
            .svc
            .send(&Request::get(&a, &[], &[("limit", "0")]))
            .await;
        self.bad_request("400 for a bad limit", x.request.clone(), &x);

        let missing = format!("cyberos-check-missing-{}", hex::<8>());
        let x = self.svc.send(&Request::get(&a, &[&missing], &[])).await;
        let seen = self.seen(&x);
        self.set(Check::verdict(
            "404 unknown id",
            x.request.clone(),
            seen,
            (!x.is(404)).then(|| "404".to_owned()),
        ));
    }

    fn bad_request(&mut self, name: &'static str, sent: String, x: &Exchange) {
        let fault = (!x.is(400)).then(|| "400 with an error body".to_owned());
        let seen = self.seen(x);
        self.set(Check::verdict(name, sent, seen, fault));
    }

    /// `401 bad credential`: a wrong bearer and none at all are refused.
    pub(super) async fn credential(&mut self) {
        const NAME: &str = "401 bad credential";
        if !self.svc.has_token() {
            self.set(Check::skip(
                NAME,
                "--memory-token-file, to tell a refused credential from an accepted one",
            ));
            return;
        }
        let a = self.a.clone();
        let query = [("limit", "1")];
        let wrong = self.wrong_token.clone();
        let mut r = Request::get(&a, &[], &query);
        r.auth = Auth::Other(&wrong);
        let x = self.svc.send(&r).await;
        if !x.is(401) {
            let seen = self.seen(&x);
            self.set(Check::fail(
                NAME,
                format!("{} with a wrong bearer token", x.request),
                seen,
                "401",
            ));
            return;
        }
        r.auth = Auth::Without;
        let y = self.svc.send(&r).await;
        let seen = self.seen(&y);
        self.set(Check::verdict(
            NAME,
            format!(
                "{} with a wrong bearer token, then without Authorization",
                x.request
            ),
            format!("401, then {seen}"),
            (!y.is(401)).then(|| "401 without Authorization too".to_owned()),
        ));
    }

    /// `tenant isolation`: an entry of tenant B is invisible to A, and A's to B, exactly
    /// like a missing one.
    pub(super) async fn isolation(&mut self, appended: &[Appended]) {
        const NAME: &str = "tenant isolation";
        let (a, b) = (self.a.clone(), self.b.clone());
        let entry = self.entry("check.alpha", Some("conformance/other"), 9, &self.marker_b);
        let key = hex::<16>();
        let x = self.svc.send(&Request::post(&b, &entry, Some(&key))).await;
        let theirs = match x.json.as_ref().map(shapes::receipt) {
            Some(Ok(r)) if x.is(201) => r.audit_id,
            _ => {
                let seen = self.seen(&x);
                self.set(Check::fail(
                    NAME,
                    x.request,
                    seen,
                    "201 for an append under a second tenant",
                ));
                return;
            }
        };
        let sent = format!(
            "an entry under a second tenant {b}, then A's list, A's GET of its id, B's list and B's GET of one of A's ids"
        );
        let missing = format!("cyberos-check-missing-{}", hex::<8>());
        let unknown = self.svc.send(&Request::get(&a, &[&missing], &[])).await;
        let probes = [
            self.svc
                .send(&Request::get(&a, &[], &[("limit", "50")]))
                .await,
            self.svc.send(&Request::get(&a, &[&theirs], &[])).await,
            self.svc
                .send(&Request::get(&b, &[], &[("limit", "50")]))
                .await,
            self.svc
                .send(&Request::get(&b, &[&appended[0].receipt.audit_id], &[]))
                .await,
        ];
        let fault = shapes::isolated(
            &probes,
            &unknown,
            (&missing, &theirs, &appended[0].receipt.audit_id),
            (&self.marker_a, &self.marker_b),
        );
        let check = match fault {
            None => Check::pass(
                NAME,
                sent,
                "neither tenant saw the other's entries; a foreign id answered exactly like a missing one",
            ),
            Some((i, want)) => {
                let seen = format!("{}: {}", probes[i].request, self.seen(&probes[i]));
                Check::fail(NAME, sent, seen, self.redact(&want))
            }
        };
        self.set(check);
    }
}
