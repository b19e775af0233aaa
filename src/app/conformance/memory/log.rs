//! The audit log read back as written: appends and their receipts, the idempotent
//! repeat, one entry by id, the list newest first, its pages and its filters.

use super::http::{Exchange, Request};
use super::shapes;
use super::{Appended, Checklist, as_since, hex};
use crate::app::conformance::report::Check;

impl Checklist {
    /// `append`: three entries, each 201 with a receipt.
    pub(super) async fn append(&mut self) -> Option<Vec<Appended>> {
        let a = self.a.clone();
        let entries = [
            self.entry("check.alpha", Some("conformance/one"), 1, &self.marker_a),
            self.entry("check.beta", Some("conformance/two"), 2, &self.marker_a),
            self.entry("check.alpha", None, 3, &self.marker_a),
        ];
        let mut appended = Vec::new();
        let mut last = String::new();
        for entry in entries {
            let key = hex::<16>();
            let x = self.svc.send(&Request::post(&a, &entry, Some(&key))).await;
            last = x.request.clone();
            let receipt = match (x.is(201), x.json.as_ref().map(shapes::receipt)) {
                (true, Some(Ok(r))) => r,
                (_, Some(Err(want))) if x.is(201) => {
                    let seen = self.seen(&x);
                    self.set(Check::fail("append", x.request, seen, want));
                    return None;
                }
                _ => {
                    let seen = self.seen(&x);
                    self.set(Check::fail(
                        "append",
                        x.request,
                        seen,
                        "201 with {audit_id, recorded_at}",
                    ));
                    return None;
                }
            };
            appended.push(Appended {
                entry,
                receipt,
                key,
            });
        }
        let ids: Vec<&str> = appended
            .iter()
            .map(|e| e.receipt.audit_id.as_str())
            .collect();
        if ids[0] == ids[1] || ids[1] == ids[2] || ids[0] == ids[2] {
            self.set(Check::fail(
                "append",
                "3 appends",
                format!("ids {ids:?}"),
                "a new audit_id for each entry",
            ));
            return None;
        }
        self.set(Check::pass(
            "append",
            format!("3 × {last} with Idempotency-Key"),
            format!("201 with receipts {}", ids.join(", ")),
        ));
        Some(appended)
    }

    /// `idempotent repeat`: the first append again with its key: 200 and the same receipt.
    pub(super) async fn repeat(&mut self, first: &Appended) {
        let a = self.a.clone();
        let x = self
            .svc
            .send(&Request::post(&a, &first.entry, Some(&first.key)))
            .await;
        let fault = match (x.is(200), x.json.as_ref().map(shapes::receipt)) {
            (true, Some(Ok(r)))
                if r.audit_id == first.receipt.audit_id
                    && r.recorded_at == first.receipt.recorded_at =>
            {
                None
            }
            (true, Some(Ok(_))) => Some(format!("the original receipt {}", first.receipt.audit_id)),
            _ => Some("200 with the original receipt".to_owned()),
        };
        let sent = format!(
            "{} with the first append's Idempotency-Key again",
            x.request
        );
        let seen = self.seen(&x);
        self.set(Check::verdict("idempotent repeat", sent, seen, fault));
    }

    /// `read one`: each entry by its id, exactly as appended.
    pub(super) async fn read_one(&mut self, appended: &[Appended]) {
        let a = self.a.clone();
        for e in appended {
            let id = e.receipt.audit_id.clone();
            let x = self.svc.send(&Request::get(&a, &[&id], &[])).await;
            let fault = if x.is(200) {
                x.json
                    .as_ref()
                    .ok_or_else(|| "a JSON body".to_owned())
                    .and_then(|v| shapes::same_entry(v, &e.entry, &e.receipt))
                    .err()
            } else {
                Some("200 with the entry".to_owned())
            };
            if let Some(want) = fault {
                let seen = self.seen(&x);
                self.set(Check::fail("read one", x.request, seen, want));
                return;
            }
        }
        self.set(Check::pass(
            "read one",
            format!("GET /v1/tenants/{a}/audit/{{id}} for the 3 ids"),
            "200 with each entry as appended",
        ));
    }

    /// Lists: all, two pages, by kind, since.
    pub(super) async fn lists(&mut self, appended: &[Appended]) {
        let a = self.a.clone();
        let ids: Vec<String> = appended
            .iter()
            .rev()
            .map(|e| e.receipt.audit_id.clone())
            .collect();

        let x = self
            .svc
            .send(&Request::get(&a, &[], &[("limit", "50")]))
            .await;
        let fault = shapes::page(&x, 50).and_then(|(got, next)| {
            shapes::ids_are(&got, &ids, "the 3 entries newest first")?;
            shapes::no_cursor(next.as_deref())?;
            shapes::newest_first(&got)
        });
        self.listed("list newest first", &x, &ids, fault);

        let first = self
            .svc
            .send(&Request::get(&a, &[], &[("limit", "2")]))
            .await;
        let fault = match shapes::page(&first, 2) {
            Err(want) => Err((first.clone(), want)),
            Ok((got, next)) => match (
                shapes::ids_are(&got, &ids[..2], "the 2 newest entries"),
                next,
            ) {
                (Err(want), _) => Err((first.clone(), want)),
                (Ok(()), None) => Err((
                    first.clone(),
                    "next_cursor, since a third entry matches".into(),
                )),
                (Ok(()), Some(cursor)) => {
                    let second = self
                        .svc
                        .send(&Request::get(
                            &a,
                            &[],
                            &[("limit", "2"), ("cursor", &cursor)],
                        ))
                        .await;
                    shapes::page(&second, 2)
                        .and_then(|(got, next)| {
                            shapes::ids_are(
                                &got,
                                &ids[2..],
                                "the oldest entry on the second page",
                            )?;
                            shapes::no_cursor(next.as_deref())
                        })
                        .map_err(|want| (second.clone(), want))
                }
            },
        };
        let check = match fault {
            Ok(()) => Check::pass(
                "pagination",
                format!("{} then its next_cursor", first.request),
                "2 entries and a next_cursor, then the third and no next_cursor",
            ),
            Err((x, want)) => {
                let seen = self.seen(&x);
                Check::fail("pagination", x.request, seen, want)
            }
        };
        self.set(check);

        let x = self
            .svc
            .send(&Request::get(
                &a,
                &[],
                &[("kind", "check.alpha"), ("limit", "50")],
            ))
            .await;
        let alphas = [ids[0].clone(), ids[2].clone()];
        let fault = shapes::page(&x, 50)
            .and_then(|(got, _)| shapes::ids_are(&got, &alphas, "the 2 check.alpha entries"));
        self.listed("kind filter", &x, &alphas, fault);

        // The bridge sends milliseconds, so `since` may fall a little before the second
        // entry: the entries expected are those at or after it as sent.
        let since_text = as_since(appended[1].receipt.recorded_at);
        let since = chrono::DateTime::parse_from_rfc3339(&since_text)
            .map_or(appended[1].receipt.recorded_at, |t| {
                t.with_timezone(&chrono::Utc)
            });
        let expected: Vec<String> = appended
            .iter()
            .rev()
            .filter(|e| e.receipt.recorded_at >= since)
            .map(|e| e.receipt.audit_id.clone())
            .collect();
        let x = self
            .svc
            .send(&Request::get(
                &a,
                &[],
                &[("since", &since_text), ("limit", "50")],
            ))
            .await;
        let fault = shapes::page(&x, 50).and_then(|(got, _)| {
            shapes::ids_are(&got, &expected, "the entries recorded at or after since")
        });
        self.listed("since filter", &x, &expected, fault);
    }

    /// A list probe's line: on success, the ids it listed rather than the whole page.
    fn listed(
        &mut self,
        name: &'static str,
        x: &Exchange,
        ids: &[String],
        fault: Result<(), String>,
    ) {
        let check = match fault {
            Ok(()) => Check::pass(
                name,
                x.request.clone(),
                format!("200 with {}", ids.join(", ")),
            ),
            Err(want) => Check::fail(name, x.request.clone(), self.seen(x), want),
        };
        self.set(check);
    }
}
